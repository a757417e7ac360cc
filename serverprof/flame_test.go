package serverprof

import (
	"math"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/headroom-dev/headroom/result"
)

// A flame graph's tree runs from the root to each leaf, siblings of one
// name merged and the largest first; an inlined call sits on the
// function it was inlined into; what is under FlameMin is left out.
func TestFlameIsTheCallTree(t *testing.T) {
	p := cpuProfile(map[string]int64{
		"sha;hash;login;serve":  600e6,
		"sha;hash;signup;serve": 300e6,
		"json;posts;serve":      99e6,
		"tiny;posts;serve":      1e6, // 0.1%: left out
	})
	// login's location also holds the inlined check: Line[0] is innermost
	for _, l := range p.Location {
		if l.Line[0].Function.Name == "login" {
			check := &profile.Function{ID: 99, Name: "check"}
			p.Function = append(p.Function, check)
			l.Line = []profile.Line{{Function: check}, {Function: l.Line[0].Function}}
		}
	}
	f := Flame(p)
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if f.Name != "all" || !near(f.Value, 1) || len(f.Children) != 1 {
		t.Fatalf("root %s %v with %d callees, want all 1 s with serve alone", f.Name, f.Value, len(f.Children))
	}
	serve := f.Children[0]
	var names []string
	for _, c := range serve.Children {
		names = append(names, c.Name)
	}
	if len(names) != 3 || names[0] != "login" || names[1] != "signup" || names[2] != "posts" {
		t.Fatalf("serve's callees %v, want login, signup, posts (largest first)", names)
	}
	path := []string{"login", "check", "hash", "sha"}
	n := serve
	for _, want := range path {
		if len(n.Children) == 0 || n.Children[0].Name != want {
			t.Fatalf("below %s: %v, want %s (path %v)", n.Name, n.Children, want, path)
		}
		n = n.Children[0]
		if !near(n.Value, 0.6) {
			t.Errorf("%s: %v s, want 0.6", n.Name, n.Value)
		}
	}
	if posts := serve.Children[2]; len(posts.Children) != 1 || posts.Children[0].Name != "json" {
		t.Errorf("posts' callees %v: want json alone (tiny is under %v of the whole)", posts.Children, result.FlameMin)
	}
}

// Two sides' trees add into one, each scaled: a function in one side only
// has nothing on the other.
func TestAddFlameMakesADifferentialTree(t *testing.T) {
	base := Flame(cpuProfile(map[string]int64{"hash;login": 200e6, "json;posts": 800e6}))
	nw := Flame(cpuProfile(map[string]int64{"hash;login": 800e6, "json;posts": 800e6, "gzip;posts": 400e6}))
	d := &result.Flame{Name: "all"}
	AddFlame(d, base, 10, true) // 10 ms a unit for each second
	AddFlame(d, nw, 10, false)
	PruneFlame(d, 0)
	got := map[string][2]float64{}
	var walk func(f *result.Flame, path string)
	walk = func(f *result.Flame, path string) {
		got[path+f.Name] = [2]float64{f.Base, f.Value}
		for _, c := range f.Children {
			walk(c, path+f.Name+"/")
		}
	}
	walk(d, "")
	for path, want := range map[string][2]float64{"all": {10, 20}, "all/login/hash": {2, 8}, "all/posts": {8, 12}, "all/posts/gzip": {0, 4}} {
		if g := got[path]; math.Abs(g[0]-want[0]) > 1e-9 || math.Abs(g[1]-want[1]) > 1e-9 {
			t.Errorf("%s: base %v new %v, want %v", path, g[0], g[1], want)
		}
	}
	if d.Children[0].Name != "posts" {
		t.Errorf("first callee %s: want posts, the largest", d.Children[0].Name)
	}
}
