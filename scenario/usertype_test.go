package scenario

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
)

const twoTypes = `
def login(user):
    user.http.post("/login/" + user.type)
def read(user):
    user.http.get("/read/" + user.type)
def scroll(user):
    pass
def post(user):
    user.http.post("/post/" + user.type)
def setup(user):
    pass

reader = user_type("reader", weight=9, setup=login,
                   actions=[action("Read", read, weight=3), action("Scroll", scroll)],
                   think_time=think.uniform("1s", "3s"))
poster = user_type("poster", weight=1, setup=setup, actions=[action("Post", post), action("Read", read)],
                   think_time=think.constant("5s"))
user_types = [reader, poster]
`

func TestUserTypesLoad(t *testing.T) {
	sc, err := load("t.star", twoTypes)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Types) != 2 {
		t.Fatalf("%d types, want 2", len(sc.Types))
	}
	r, p := sc.Types[0], sc.Types[1]
	if r.Name != "reader" || r.Weight != 9 || len(r.Actions) != 2 || r.Setup == nil || r.ThinkSrc != `think.uniform("1s", "3s")` {
		t.Errorf("reader = %+v", r)
	}
	if p.Name != "poster" || p.Weight != 1 || len(p.Actions) != 2 || p.Think.Mean() != 5*time.Second {
		t.Errorf("poster = %+v", p)
	}
	var names []string
	for _, a := range sc.Actions {
		names = append(names, a.Name)
	}
	if strings.Join(names, ",") != "Read,Scroll,Post" {
		t.Errorf("the scenario's actions %v, want each name once: Read,Scroll,Post", names)
	}
}

func TestEachUserRunsItsTypesCode(t *testing.T) {
	sc, err := load("t.star", twoTypes)
	if err != nil {
		t.Fatal(err)
	}
	posterID := 0
	for id := 1; id <= 10; id++ {
		if sc.TypeOf(id).Name == "poster" {
			posterID = id
		}
	}
	for _, tc := range []struct {
		id                     int
		typ, setupURL, actions string
	}{
		{1, "reader", "/login/reader", "Read Scroll"},
		{posterID, "poster", "", "Post Read"},
	} {
		d := &fakeDoer{status: 200}
		u := NewUser(sc, Env{ID: tc.id, Seed: 1, HTTP: d, Record: &samples{}})
		if u.Type().Name != tc.typ {
			t.Errorf("user %d is a %s, want a %s", tc.id, u.Type().Name, tc.typ)
		}
		if out := u.Setup(); out != metrics.OK {
			t.Fatalf("user %d: setup %v", tc.id, out)
		}
		if got := urls(d); got != tc.setupURL {
			t.Errorf("user %d's setup sent %q, want %q (its type's setup, with user.type)", tc.id, got, tc.setupURL)
		}
		seen := map[string]bool{}
		for range 200 {
			seen[u.Next().Name] = true
		}
		for _, a := range strings.Fields(tc.actions) {
			if !seen[a] || len(seen) != len(strings.Fields(tc.actions)) {
				t.Errorf("user %d (%s) picked %v, want its type's actions %s", tc.id, tc.typ, seen, tc.actions)
			}
		}
		if th := u.Think(); tc.typ == "poster" && th != 5*time.Second || tc.typ == "reader" && (th < time.Second || th >= 3*time.Second) {
			t.Errorf("user %d (%s) thinks %v: not its type's think time", tc.id, tc.typ, th)
		}
	}
}

func urls(d *fakeDoer) string {
	var out []string
	for _, r := range d.sent {
		out = append(out, r.URL)
	}
	return strings.Join(out, " ")
}

func TestUserTypeWithoutUserTypesIsDefault(t *testing.T) {
	d := &fakeDoer{status: 200}
	rec, out := runAction(t, "def act(user):\n    user.http.get('/' + user.type)\n", d)
	if out != metrics.OK || urls(d) != "/"+DefaultType {
		t.Errorf("outcome %v, sent %q; want /%s: %+v", out, urls(d), DefaultType, *rec)
	}
}

func TestTypesAreGivenInProportionOverEveryPrefix(t *testing.T) {
	sc, err := load("t.star", twoTypes)
	if err != nil {
		t.Fatal(err)
	}
	count := func(n int) map[string]int { return sc.UsersByType(n) }
	if c := count(10); c["poster"] != 1 || c["reader"] != 9 {
		t.Errorf("users 1..10: %v, want exactly one poster", c)
	}
	if c := count(100); c["poster"] != 10 || c["reader"] != 90 {
		t.Errorf("users 1..100: %v, want exactly ten posters", c)
	}
	// Asked out of order (a retried user, a test), a user keeps its type.
	fresh, _ := load("t.star", twoTypes)
	for _, id := range []int{57, 3, 100, 9, 10, 57} {
		if a, b := fresh.TypeOf(id), sc.TypeOf(id); a.Name != b.Name {
			t.Errorf("user %d: %s, then %s", id, a.Name, b.Name)
		}
	}

	// Every prefix: two types within half a user of their share, three
	// within one.
	for _, tc := range []struct {
		src   string
		bound float64
	}{
		{`user_types = [user_type("a", weight=0.7, actions=[action("A", f)]), user_type("b", weight=0.3, actions=[action("B", f)])]`, 0.5},
		{`user_types = [user_type("a", weight=3, actions=[action("A", f)]), user_type("b", weight=2.5, actions=[action("B", f)]), user_type("c", weight=1e-3, actions=[action("C", f)])]`, 1},
		{`user_types = [user_type("a", weight=1e308, actions=[action("A", f)]), user_type("b", weight=1e308, actions=[action("B", f)])]`, 0.5},
	} {
		sc, err := load("p.star", "def f(user):\n    pass\n"+tc.src+"\n")
		if err != nil {
			t.Fatal(err)
		}
		total := 0.0
		for _, typ := range sc.Types {
			total += typ.Weight / sc.Types[0].Weight
		}
		n := map[string]int{}
		for id := 1; id <= 2000; id++ {
			n[sc.TypeOf(id).Name]++
			for _, typ := range sc.Types {
				share := float64(id) * (typ.Weight / sc.Types[0].Weight) / total
				if d := math.Abs(float64(n[typ.Name]) - share); d > tc.bound+1e-9 {
					t.Fatalf("%s: users 1..%d hold %d of type %s, %.2f from its share %.2f (bound %v)", tc.src, id, n[typ.Name], typ.Name, d, share, tc.bound)
				}
			}
		}
		if c := sc.UsersByType(2000); c[sc.Types[0].Name] != n[sc.Types[0].Name] {
			t.Errorf("UsersByType %v, counted %v", c, n)
		}
	}
}

func TestUserTypeLoadErrors(t *testing.T) {
	const fns = "def f(user):\n    pass\n" // lines 1-2
	cases := []struct {
		name, src string
		want      []string
	}{
		{"duplicate type names", fns + "a = user_type('reader', actions=[action('A', f)])\nb = user_type('reader', actions=[action('B', f)])\nuser_types = [a, b]\n",
			[]string{"t.star:4:", `user type "reader" is defined twice`, "its own name"}},
		{"zero weight", fns + "user_types = [\n    user_type('r', weight=0, actions=[action('A', f)]),\n]\n",
			[]string{"t.star:4:", `user type "r": weight must be a positive number, got 0`, "relative shares"}},
		{"negative weight", fns + "user_types = [user_type('r', weight=-1, actions=[action('A', f)])]\n",
			[]string{"t.star:3:", "got -1"}},
		{"weight not a number", fns + "user_types = [user_type('r', weight='many', actions=[action('A', f)])]\n",
			[]string{"t.star:3:", "weight is a string, want a number"}},
		{"no actions", fns + "user_types = [user_type('r')]\n",
			[]string{"t.star:3:", `user type "r" has no actions`, "give it at least one"}},
		{"empty actions", fns + "user_types = [user_type('r', actions=[])]\n",
			[]string{"t.star:3:", `user type "r" has no actions: its actions list is empty`}},
		{"an action twice in a type", fns + "user_types = [user_type('r', actions=[action('A', f), action('A', f)])]\n",
			[]string{"t.star:3:", `action "A" is in its actions twice`}},
		{"not an action", fns + "user_types = [user_type('r', actions=[f])]\n",
			[]string{"t.star:3:", "actions[0] is a function, want action(...)"}},
		{"bad setup", fns + "user_types = [user_type('r', setup=42, actions=[action('A', f)])]\n",
			[]string{"t.star:3:", "setup= is a int, want a function"}},
		{"bad think", fns + "user_types = [user_type('r', think_time='1s', actions=[action('A', f)])]\n",
			[]string{"t.star:3:", "think_time= is a string, want think."}},
		{"top-level actions too", fns + "actions = [action('A', f)]\nuser_types = [user_type('r', actions=actions)]\n",
			[]string{"t.star:3:1:", "both user_types and a top-level actions", "rename the list"}},
		{"a setup no type uses", fns + "def setup(user):\n    pass\nuser_types = [user_type('r', actions=[action('A', f)])]\n",
			[]string{"t.star:3:1:", "a top-level setup beside user_types, and no type uses it", "setup=setup"}},
		{"a think time no type uses", fns + "think_time = think.constant('2s')\nuser_types = [user_type('r', actions=[action('A', f)])]\n",
			[]string{"t.star:3:1:", "a top-level think_time beside user_types"}},
		{"not a list", fns + "user_types = user_type('r', actions=[action('A', f)])\n",
			[]string{"t.star:3:1:", "user_types is a user_type, want a list"}},
		{"empty list", fns + "user_types = []\n",
			[]string{"t.star:3:1:", "the user_types list is empty"}},
		{"an entry not a type", fns + "user_types = [action('A', f)]\n",
			[]string{"t.star:3:1:", "user_types[0] is a action, want user_type(...)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := load("t.star", c.src)
			var le *LoadError
			if !errors.As(err, &le) {
				t.Fatalf("error %v (a %T), want a *LoadError", err, err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message lacks %q:\n%s", w, err)
				}
			}
		})
	}
	// A top-level setup and think_time that the types use are fine.
	if _, err := load("t.star", twoTypes); err != nil {
		t.Errorf("a top-level setup given to a type: %v", err)
	}
	src := fns + "think_time = think.constant('2s')\nuser_types = [user_type('r', think_time=think_time, actions=[action('A', f)])]\n"
	if _, err := load("t.star", src); err != nil {
		t.Errorf("a top-level think_time given to a type: %v", err)
	}
}
