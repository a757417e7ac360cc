package scenario

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/transport"
	"go.starlark.net/starlark"
)

// noLimit is a limit no test reaches.
const noLimit = math.MaxUint64

func TestTopLevelLoopEndsAtTheStepLimit(t *testing.T) {
	_, err := Load(context.Background(), "s.star", []byte("x = 0\nwhile True:\n    x += 1\n"), Limits{MaxSteps: 10_000, LoadTimeout: time.Hour})
	var le *LoadError
	if !errors.As(err, &le) || !errors.Is(err, ErrTooManySteps) {
		t.Fatalf("error %T %v, want a *LoadError wrapping ErrTooManySteps", err, err)
	}
	for _, w := range []string{"s.star:3:", "ran more than 10000 Starlark steps", "raise the step limit", "Limits in docs/SCENARIOS.md"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("message lacks %q:\n%v", w, err)
		}
	}
}

func TestTopLevelLoopEndsAtTheLoadTimeout(t *testing.T) {
	start := time.Now()
	_, err := Load(context.Background(), "s.star", []byte("x = 0\nwhile True:\n    x += 1\n"), Limits{MaxSteps: noLimit, LoadTimeout: 20 * time.Millisecond})
	if !errors.Is(err, ErrLoadTimeout) || !strings.Contains(err.Error(), "s.star:3:") ||
		!strings.Contains(err.Error(), "ran longer than 20ms") || !strings.Contains(err.Error(), "raise the load timeout") {
		t.Fatalf("error %v, want the load timeout at s.star:3", err)
	}
	// Bounded by the test's own deadline otherwise; this only documents the bound.
	t.Logf("returned after %v", time.Since(start))
}

func TestCancellingTheContextInterruptsTheLoad(t *testing.T) {
	lim := Limits{MaxSteps: noLimit, LoadTimeout: time.Hour} // only ctx can end it
	src := []byte("while True:\n    pass\n")

	// Cancelled before: no check of ctx comes first, so the loop starts and
	// the cancellation has to stop it.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Load(ctx, "s.star", src, lim)
	var le *LoadError
	if !errors.Is(err, context.Canceled) || errors.As(err, &le) || !strings.Contains(err.Error(), "load scenario s.star: interrupted") {
		t.Fatalf("error %T %v, want an interrupted load wrapping context.Canceled", err, err)
	}

	// Cancelled while it runs.
	ctx, cancel = context.WithCancel(context.Background())
	go cancel()
	if _, err := Load(ctx, "s.star", src, lim); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

func TestLoadReturnsWhenABuiltinDoesNotStop(t *testing.T) {
	// fn stands for a builtin that goes on after the thread was cancelled
	// (Starlark only stops between steps).
	release := make(chan struct{})
	defer close(release)
	th := &starlark.Thread{}
	_, why, err := runTop(context.Background(), th, Limits{MaxSteps: noLimit, LoadTimeout: 5 * time.Millisecond},
		func() (starlark.StringDict, error) {
			<-release
			return nil, nil
		})
	if why != haltTimeout || !errors.Is(err, errStuck) {
		t.Fatalf("halt %v, error %v; want the timeout and errStuck", why, err)
	}
}

func TestAPanicAtLoadIsAnError(t *testing.T) {
	_, why, err := runTop(context.Background(), &starlark.Thread{}, Limits{MaxSteps: noLimit, LoadTimeout: time.Hour},
		func() (starlark.StringDict, error) {
			var m map[string]int
			m["x"] = 1 // panics: assignment to entry in nil map
			return nil, nil
		})
	var ie *InternalError
	if why != running || !errors.As(err, &ie) {
		t.Fatalf("halt %v, error %T %v; want an *InternalError", why, err, err)
	}
	for _, w := range []string{"internal error in headroom: assignment to entry in nil map", "(at scenario.TestAPanicAtLoadIsAnError.func1 limits_test.go:", "please report it"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("message lacks %q: %v", w, err)
		}
	}
}

func TestDeeplyNestedSourceIsALoadError(t *testing.T) {
	// Starlark's resolver recurses once per operator of a chain; three
	// million overflow Go's stack. A chain past maxNesting is refused first.
	src := "x = 1" + strings.Repeat(" + 1", maxNesting+10) + "\n"
	_, err := load("s.star", src)
	var le *LoadError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "s.star:1:") || !strings.Contains(err.Error(), "nested too deep (more than 10000 levels)") {
		t.Fatalf("error %v, want a LoadError about nesting", err)
	}
	src = "x = 1" + strings.Repeat(" + 1", maxNesting-10) + "\ndef a(user):\n    pass\nactions = [action('A', a)]\n"
	if _, err := load("s.star", src); err != nil {
		t.Fatalf("a chain within the limit: %v", err)
	}
}

// doerFunc is a Doer made of a function.
type doerFunc func(*transport.Request, *transport.Response)

func (f doerFunc) Do(req *transport.Request, resp *transport.Response) { f(req, resp) }
func (f doerFunc) Cookies() map[string]string                          { return nil }

// newUser loads src, which defines act(user) and maybe more, with one
// action "A", and returns a user of it.
func newUser(t *testing.T, src string, lim Limits, d Doer) (*User, *samples) {
	t.Helper()
	sc, err := Load(context.Background(), "u.star", []byte(src+"\nactions = [action('A', act)]\n"), lim)
	if err != nil {
		t.Fatal(err)
	}
	rec := &samples{}
	return NewUser(sc, Env{ID: 1, Seed: 1, HTTP: d, Record: rec}), rec
}

func last(rec *samples) metrics.Sample { return (*rec)[len(*rec)-1] }

func TestAnActionEndsAtTheStepLimitAndTheNextRuns(t *testing.T) {
	u, rec := newUser(t, `
def act(user):
    n = user.state.get("n", 0)
    user.state["n"] = n + 1
    if n == 1:
        while True:
            n += 1
    for i in range(1000): # about 6,000 steps: each call counts from zero
        pass
`, Limits{MaxSteps: 10_000}, doerFunc(nil))
	a := u.sc.Actions[0]
	if out := u.Run(a); out != metrics.OK {
		t.Fatalf("first run %v: %q", out, last(rec).Message)
	}
	if out := u.Run(a); out != metrics.Failed || !strings.HasPrefix(last(rec).Message, "u.star:7: stopped after 10000 Starlark steps") {
		t.Fatalf("endless run %v: %q", out, last(rec).Message)
	}
	for range 3 {
		if out := u.Run(a); out != metrics.OK {
			t.Fatalf("run after the limit %v: %q", out, last(rec).Message)
		}
	}
}

func TestACancelledActionSaysWhy(t *testing.T) {
	// What a memory watchdog does: cancel the user, with its reason, while
	// an action runs (here, during its request).
	var u *User
	u, rec := newUser(t, `
def act(user):
    user.http.get("/")
    s = "x"
    while True:
        s = s + "x"
`, Limits{}, doerFunc(func(_ *transport.Request, resp *transport.Response) {
		u.Cancel("headroom's memory passed --max-memory")
		*resp = transport.Response{Status: 200}
	}))
	if out := u.Run(u.sc.Actions[0]); out != metrics.Canceled || last(rec).Message != "cancelled: headroom's memory passed --max-memory" {
		t.Fatalf("outcome %v, message %q", out, last(rec).Message)
	}
	// A cancelled user stays cancelled.
	if out := u.Run(u.sc.Actions[0]); out != metrics.Canceled {
		t.Fatalf("next run %v", out)
	}
}

func TestAPanicInABuiltinFailsOnlyItsAction(t *testing.T) {
	calls := 0
	u, rec := newUser(t, "def act(user):\n    user.http.get('/')\n", Limits{}, doerFunc(func(_ *transport.Request, resp *transport.Response) {
		if calls++; calls == 1 {
			var p *transport.Response
			_ = p.Status // nil pointer dereference
		}
		*resp = transport.Response{Status: 200}
	}))
	out := u.Run(u.sc.Actions[0])
	msg := last(rec).Message
	if out != metrics.Failed || !strings.HasPrefix(msg, "internal error in headroom: runtime error: invalid memory address or nil pointer dereference (at scenario.TestAPanicInABuiltinFailsOnlyItsAction.func1 limits_test.go:") ||
		!strings.HasSuffix(msg, "; please report it") {
		t.Fatalf("outcome %v, message %q", out, msg)
	}
	if out := u.Run(u.sc.Actions[0]); out != metrics.OK {
		t.Fatalf("the run after the panic: %v %q", out, last(rec).Message)
	}
}
