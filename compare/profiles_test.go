package compare

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/runner"
	"github.com/headroom-dev/headroom/scenario"
	"github.com/headroom-dev/headroom/testbed"
)

// TestProfileDiffNamesTheHash: 30 users whose setups hash at 100,000
// PBKDF2 rounds (base) against 400,000 (new), each run profiled (--profile,
// 1 s slices): compare finds the server's CPU a user set up about four
// times the base's in the setup phase, and names the hash as the cause,
// not the handler that calls it. The runs go one after the other: a
// process has one CPU profiler, and the testbed runs in this one.
func TestProfileDiffNamesTheHash(t *testing.T) {
	sc, err := scenario.Load(context.Background(), "posts.star", []byte(testbed.PostsScenario(time.Second)), scenario.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for i, rounds := range []int{100_000, 400_000} {
		// 30 users: the base's setups sample well over minSampled (1 s)
		// of CPU, ~50 ms each, however busy the machine.
		srv := httptest.NewServer(testbed.New(testbed.Config{Pprof: true, HashRounds: rounds}).Handler())
		target, _ := url.Parse(srv.URL)
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("run-%d", i))
		_, err := (&runner.Bounded{Common: runner.Common{Scenario: sc, Target: target, Seed: 1, Timeout: time.Minute, Grace: time.Second, Out: dir,
			Profile: []string{srv.URL + "/debug/pprof"}, ProfileSlice: time.Second}, Users: 30, Ramp: 3 * time.Second, Duration: 3 * time.Second}).Run(context.Background())
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	base, err := Load("base", dirs[:1])
	if err != nil {
		t.Fatal(err)
	}
	nw, err := Load("new", dirs[1:])
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compare(base, nw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var setup *ProfileComparison
	for i := range c.Profiles {
		if c.Profiles[i].Phase == "setup" {
			setup = &c.Profiles[i]
		}
	}
	if setup == nil {
		t.Fatalf("no setup phase compared: %+v, notes %q", c.Profiles, c.Notes)
	}
	m := setup.CPUPerUnit
	t.Logf("%s: %.1f → %.1f ms (%s); cause %s; moved %d", m.Name, m.Base, m.New, m.DeltaText(), setup.Cause, len(setup.Moved))
	if m.Delta < 1.5 || m.Delta > 6 {
		t.Errorf("CPU a user set up %+.0f%%: want about +300%% (four times the rounds)", 100*m.Delta)
	}
	// The cause is the deepest function carrying 90% of the change: the
	// hash, or what it is made of (its HMAC carries about 90% of pbkdf2's
	// time, so sampling names either), never the handler that calls it.
	if !slices.ContainsFunc([]string{"pbkdf2", "hashPassword", "/hmac.", "/sha256."}, func(f string) bool { return strings.Contains(setup.Cause, f) }) {
		t.Errorf("cause %q: want the hash (pbkdf2, hashPassword, its HMAC or SHA-256); moved %v", setup.Cause, movedNames(setup.Moved))
	}
	for _, mv := range setup.Moved {
		if strings.HasPrefix(mv.Name, "net/http.") || strings.HasPrefix(mv.Name, "runtime.") {
			t.Errorf("plumbing among the functions that moved: %s", mv.Name)
		}
	}
	// the differential flame graph: the hash grew as the phase did
	hash := findFlame(setup.Flame, "testbed.hashPassword")
	if hash == nil || setup.Flame.Base <= 0 {
		t.Fatalf("no testbed.hashPassword in the differential flame graph, or no base: %+v", setup.Flame)
	}
	if grew := hash.Value / hash.Base; grew < 2.5 || grew > 5 || hash.Value > setup.Flame.Value || math.Abs(setup.Flame.Value-m.New) > 0.01*m.New {
		t.Errorf("flame graph: hashPassword %.1f → %.1f ms (×%.1f, want about 4), of %.1f → %.1f ms in all (CPU a unit %.1f → %.1f)",
			hash.Base, hash.Value, grew, setup.Flame.Base, setup.Flame.Value, m.Base, m.New)
	}
}

// findFlame is the first function named name (a suffix of its full name)
// in f, depth first; nil if none.
func findFlame(f *result.Flame, name string) *result.Flame {
	if f == nil {
		return nil
	}
	if strings.HasSuffix(f.Name, name) {
		return f
	}
	for _, c := range f.Children {
		if got := findFlame(c, name); got != nil {
			return got
		}
	}
	return nil
}

func movedNames(ms []Metric) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

// With three runs a side each figure has an interval over the runs: the
// CPU a unit and the hash that grew are regressions with intervals clear
// of zero; what did not move (the JSON encoding) is no change; the heap
// with it; and the differential flame graph is each side's mean.
func TestProfileIntervalsOverRepeats(t *testing.T) {
	side := func(label string, hashMs []float64, heapMB float64) *Side {
		s := &Side{Label: label}
		for i, h := range hashMs {
			dir := t.TempDir()
			stacks := map[string]float64{"main.hash;main.login": h, "main.json;main.posts": 10 + float64(i%2)}
			extra := 0.0
			if label == "new" { // a function the base never ran: judged in ms, not in % of nothing
				extra = 5 + float64(i)
				stacks["main.audit;main.login"] = extra
			} else { // one the new build never runs: gone
				extra = 4
				stacks["main.oldhash;main.login"] = extra
			}
			writeCPUProfile(t, filepath.Join(dir, "setup-t1.pb.gz"), stacks)
			r := fakeRun("run", nil)
			r.Dir = dir
			r.Result.Profiles = &result.Profiles{Phases: []result.ProfilePhase{{Phase: "setup", File: "setup-t1.pb.gz", PerUnitMs: h + 10 + float64(i%2) + extra,
				Unit: "user set up", Heap: &result.ProfileHeap{InuseMB: heapMB + float64(i)}}}}
			s.Runs = append(s.Runs, r)
		}
		return s
	}
	c, err := Compare(side("base", []float64{19, 20, 21}, 50), side("new", []float64{78, 80, 82}, 50), Options{})
	if err != nil || len(c.Profiles) != 1 {
		t.Fatalf("%v: %d phases compared (notes %q), want the setup", err, len(c.Profiles), c.Notes)
	}
	pc := c.Profiles[0]
	cpu := pc.CPUPerUnit
	if !cpu.HasInterval || cpu.Verdict != Regression || cpu.Low <= 0 || math.Abs(cpu.Base-34.33) > 0.01 || math.Abs(cpu.New-96.33) > 0.01 {
		t.Errorf("CPU a user: %.2f → %.2f ms, %s [%.2f, %.2f] %s: want 34.33 → 96.33, a regression with an interval above 0",
			cpu.Base, cpu.New, cpu.DeltaText(), cpu.Low, cpu.High, cpu.Verdict)
	}
	moved := map[string]Metric{}
	for _, m := range pc.Moved {
		moved[m.Name] = m
	}
	if len(pc.Gone) != 1 || pc.Gone[0].Name != "main.oldhash" || pc.Gone[0].Base != 4 {
		t.Errorf("gone %v: want main.oldhash, 4 ms a unit in the base", movedNames(pc.Gone))
	}
	_, json := moved["main.json"]
	if _, posts := moved["main.posts"]; json == posts {
		t.Errorf("main.json and main.posts, which move alike in every run: want one row for the two, got %v", movedNames(pc.Moved))
	}
	if h := moved["main.hash"]; !h.HasInterval || h.Verdict != Regression || h.Low <= 0 || pc.Moved[0].Name != "main.hash" && pc.Moved[0].Name != "main.login" {
		t.Errorf("main.hash: %s [%.2f, %.2f] %s, first moved %s: want a regression with an interval above 0, first", h.DeltaText(), h.Low, h.High, h.Verdict, pc.Moved[0].Name)
	}
	if a := moved["main.audit"]; a.Verdict != Regression || a.Low <= 0 || !strings.HasPrefix(a.DeltaText(), "+6.00 ms [") {
		t.Errorf("main.audit, new in the new build: %q %s: want +6 ms [...], a regression", a.DeltaText(), a.Verdict)
	}
	j := moved["main.json"]
	if !json {
		j = moved["main.posts"]
	}
	if !j.HasInterval || j.Verdict != NoChange {
		t.Errorf("main.json: %s [%.2f, %.2f] %s: want no change", j.DeltaText(), j.Low, j.High, j.Verdict)
	}
	if pc.HeapMB == nil || pc.HeapMB.Verdict != NoChange || pc.HeapMB.Base != 51 {
		t.Errorf("heap %+v: want 51 MB a side, no change", pc.HeapMB)
	}
	if h := findFlame(pc.Flame, "main.hash"); h == nil || math.Abs(h.Base-20) > 0.01 || math.Abs(h.Value-80) > 0.01 {
		t.Errorf("flame graph's main.hash %+v: want 20 → 80 ms, each side's mean", h)
	}
}

// writeCPUProfile writes a CPU profile of one program whose stacks are
// given leaf first, with their milliseconds.
func writeCPUProfile(t *testing.T, path string, stacks map[string]float64) {
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "cpu", Unit: "nanoseconds"}}, PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period: 1e7, Mapping: []*profile.Mapping{{ID: 1, File: "/usr/bin/app"}}}
	fns := map[string]*profile.Function{}
	for stack, ms := range stacks {
		var locs []*profile.Location
		for _, name := range strings.Split(stack, ";") {
			if fns[name] == nil {
				fns[name] = &profile.Function{ID: uint64(len(fns) + 1), Name: name}
				p.Function = append(p.Function, fns[name])
			}
			l := &profile.Location{ID: uint64(len(p.Location) + 1), Mapping: p.Mapping[0], Line: []profile.Line{{Function: fns[name]}}}
			p.Location = append(p.Location, l)
			locs = append(locs, l)
		}
		p.Sample = append(p.Sample, &profile.Sample{Location: locs, Value: []int64{int64(ms * 1e6)}})
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
}
