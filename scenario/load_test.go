package scenario

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestLoadErrorsNameFileLineAndFix(t *testing.T) {
	cases := []struct {
		name, src string
		want      []string // substrings of the message
	}{
		{"syntax error", "def a(user)\n    pass\nactions = [action(\"A\", a)]\n",
			[]string{"s.star:1:12: syntax error", "def a(user)", "hint:"}},
		{"no actions", "def a(user):\n    pass\n",
			[]string{"s.star: no actions", "actions = ["}},
		{"empty actions", "actions = []\n",
			[]string{"s.star:1:1: no actions: the actions list is empty"}},
		{"negative weight", "def a(user):\n    pass\nactions = [\n    action(\"A\", a, weight=-2),\n]\n",
			[]string{"s.star:4:", "weight must be a positive number, got -2", "action(\"A\", a, weight=-2)", "relative frequencies"}},
		{"weight not a number", "def a(user):\n    pass\nactions = [action(\"A\", a, weight=\"high\")]\n",
			[]string{"s.star:3:", "weight is a string, want a number"}},
		{"unknown builtin", "def a(user):\n    pass\nactions = [acton(\"A\", a)]\n",
			[]string{"s.star:3:12: undefined: acton", "did you mean action", "hint:"}},
		{"action function takes two", "def a(user, other):\n    pass\nactions = [action(\"A\", a)]\n",
			[]string{"takes 2 arguments, want one (the user)"}},
		{"action not a function", "actions = [action(\"A\", 42)]\n",
			[]string{"s.star:1:", "is a int, want a function"}},
		{"actions not a list", "def a(user):\n    pass\nactions = a\n",
			[]string{"s.star:3:1: actions is a function, want a list"}},
		{"duplicate action", "def a(user):\n    pass\nactions = [action(\"A\", a), action(\"A\", a)]\n",
			[]string{"action \"A\" is defined twice"}},
		{"bad think", "def a(user):\n    pass\nactions = [action(\"A\", a)]\nthink_time = think.uniform(\"2s\", \"1s\")\n",
			[]string{"s.star:4:", "need 0 <= min <= max"}},
		{"bad duration", "def a(user):\n    pass\nactions = [action(\"A\", a)]\nthink_time = think.constant(\"soon\")\n",
			[]string{"s.star:4:", "bad duration \"soon\"", "250ms"}},
		{"setup with no args", "def setup():\n    pass\ndef a(user):\n    pass\nactions = [action(\"A\", a)]\n",
			[]string{"s.star:1:1: setup takes no arguments", "def setup(user)"}},
		{"top-level runtime error", "x = {}[\"k\"]\n",
			[]string{"s.star:1:", "key \"k\" not in dict"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := load("s.star", c.src)
			if err == nil {
				t.Fatal("loaded without error")
			}
			var le *LoadError
			if !errors.As(err, &le) {
				t.Errorf("error is a %T, want *LoadError: %v", err, err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message lacks %q:\n%s", w, err)
				}
			}
		})
	}
}

func TestLoadGoodScenario(t *testing.T) {
	sc, err := load("ok.star", `
def setup(user):
    user.state["n"] = 0
def teardown(user, reason=None):
    pass
def a(user):
    pass
def b(user):
    pass
actions = [action("A", a, weight=6.5219), action("B", b)]
think_time = think.reference(min="1s", avg="5s", rates=[(5.4, 1.0)])
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Types) != 1 || sc.Types[0].Name != DefaultType {
		t.Fatalf("types %v, want the one default type", sc.Types)
	}
	typ := sc.Types[0]
	if typ.Setup == nil || typ.Teardown == nil || len(typ.Actions) != 2 || len(sc.Actions) != 2 {
		t.Fatalf("setup %v teardown %v actions %d (scenario's %d)", typ.Setup, typ.Teardown, len(typ.Actions), len(sc.Actions))
	}
	if sc.Actions[0].Weight != 6.5219 || sc.Actions[1].Weight != 1 {
		t.Errorf("weights %v %v", sc.Actions[0].Weight, sc.Actions[1].Weight)
	}
	ref, ok := typ.Think.(Reference)
	if !ok || ref.Min != time.Second || ref.Avg != 5*time.Second || ref.Rates[0].Rate != 5.4 {
		t.Errorf("think = %#v", typ.Think)
	}
	if !strings.HasPrefix(sc.Hash, "sha256:") || len(sc.Hash) != 7+64 {
		t.Errorf("hash %q", sc.Hash)
	}
	if typ.ThinkSrc != `think.reference(min="1s", avg="5s", rates=[(5.4, 1.0)])` {
		t.Errorf("think source %q", typ.ThinkSrc)
	}
}

func TestChecksInScenario(t *testing.T) {
	sc, err := load("c.star", `
def a(user):
    pass
actions = [action("A", a)]
checks = [
    check("p99 (s)", "histogram_quantile(0.99, sum(rate(loadtest_http_request_time_bucket[20s])) by (le))", threshold=2),
    check("throughput floor", "sum(rate(loadtest_http_request_time_count[20s]))", threshold=10, below=True),
]
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Checks) != 2 || sc.Checks[0].Threshold != 2 || !sc.Checks[1].Below || sc.Checks[1].Line != 7 {
		t.Errorf("checks %+v", sc.Checks)
	}
	_, err = load("c.star", "def a(user):\n    pass\nactions = [action('A', a)]\nchecks = [check('x', 'up', threshold='high')]\n")
	if err == nil || !strings.Contains(err.Error(), "c.star:4:") || !strings.Contains(err.Error(), "threshold is a string, want a number") {
		t.Errorf("non-number threshold: %v", err)
	}
}

// load loads a scenario from source with the default limits.
func load(path, src string) (*Scenario, error) {
	return Load(context.Background(), path, []byte(src), Limits{})
}
