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

// TestProfileDiffNamesTheHash: users whose setups hash at 100,000
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
	// Each side must sample well over minSampled (1 s) of CPU in the
	// setup's whole slices, or no cause is named (30 users a side sampled
	// 1.5 to 1.7 s here, 20 once 0.97 s). A user's setup hashes twice:
	// ~45 ms of CPU at 100,000 rounds, ~180 ms at 400,000 (with SHA
	// extensions; a CPU without them only samples more). The base's 60
	// users spend ~2.8 s over the 3 s ramp, of which the whole slices see
	// two seconds' worth or more (1.8 to 2.8 s seen) wherever they fall;
	// the new's 20 ~3.6 s. CPU time is what is sampled, so a busy machine
	// stretches the phase without taking samples away. The figures are
	// per user set up, so the sides need not run as many users: the base
	// runs more for its cheaper hashes, the new fewer to queue less (the
	// same CPU as 30 a side), and a figure not per user grows only ×1.3.
	for i, run := range []struct{ rounds, users int }{{100_000, 60}, {400_000, 20}} {
		srv := httptest.NewServer(testbed.New(testbed.Config{Pprof: true, HashRounds: run.rounds}).Handler())
		target, _ := url.Parse(srv.URL)
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("run-%d", i))
		_, err := (&runner.Bounded{Common: runner.Common{Scenario: sc, Target: target, Seed: 1, Timeout: time.Minute, Grace: time.Second, Out: dir,
			Profile: []string{srv.URL + "/debug/pprof"}, ProfileSlice: time.Second}, Users: run.users, Ramp: 3 * time.Second, Duration: 3 * time.Second}).Run(context.Background())
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
	t.Logf("%s: %.1f → %.1f ms (%s); cause %s; moved %d; sampled %.2f s", m.Name, m.Base, m.New, m.DeltaText(), setup.Cause, len(setup.Moved), setup.SampledS)
	// Seen from +182% to +355% (×2.8 to ×4.6, about ×3.6 in log; the
	// hash is nearly all of a setup). Each side's CPU a unit is its whole
	// slices' CPU over the users set up in the part of the phase they
	// cover, off by several percent a side (the part no slice covers
	// spent more, or less), and ~250 samples a side add 9% to the ratio:
	// its sd was 13% in log over the runs seen. The bounds, ×1.7 and ×7,
	// are 5 to 6 sigma from ×3.6. Broken it is about ×1 (no change), or
	// ×1.3 (not per user).
	if m.Delta < 0.7 || m.Delta > 6 {
		t.Errorf("CPU a user set up %+.0f%%: want about +260%% (four times the rounds, a user)", 100*m.Delta)
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
	// The differential flame graph: the hash grew as the phase did. Its
	// two calls (sign-up and login) are summed, to halve the sampling's
	// variance: 13% in log, as above (seen ×3.4 to ×4.6, about ×3.9 in
	// log), so ×2 and ×8 are 5 sigma away. Broken (the sides swapped, or
	// not per user) it is ×0.25 or ×1.3.
	hashBase, hashNew, found := flameSum(setup.Flame, "testbed.hashPassword")
	if !found || setup.Flame.Base <= 0 || hashBase <= 0 {
		t.Fatalf("no testbed.hashPassword in the differential flame graph, or no base: %+v", setup.Flame)
	}
	t.Logf("flame graph: hashPassword %.1f → %.1f ms a unit (×%.2f)", hashBase, hashNew, hashNew/hashBase)
	// The hash's calls are part of the phase: at most all of it, give or
	// take the float sums' last bits (the flake hunt saw 179.3 of 179.3,
	// the sum of the two calls a rounding above the whole).
	if grew := hashNew / hashBase; grew < 2 || grew > 8 || hashNew > setup.Flame.Value*(1+1e-9) || math.Abs(setup.Flame.Value-m.New) > 0.01*m.New {
		t.Errorf("flame graph: hashPassword %.1f → %.1f ms (×%.1f, want about 4), of %.1f → %.1f ms in all (CPU a unit %.1f → %.1f)",
			hashBase, hashNew, grew, setup.Flame.Base, setup.Flame.Value, m.Base, m.New)
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

// flameSum sums the base's and the new side's values of every function
// named name (a suffix of its full name) in f, not counting one twice
// under itself; found is whether any is.
func flameSum(f *result.Flame, name string) (base, value float64, found bool) {
	if f == nil {
		return 0, 0, false
	}
	if strings.HasSuffix(f.Name, name) {
		return f.Base, f.Value, true
	}
	for _, c := range f.Children {
		b, v, ok := flameSum(c, name)
		base, value, found = base+b, value+v, found || ok
	}
	return base, value, found
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

// With several processes profiled each figure says whose it is: by its
// program, or by target and program where two run the same one; one
// process alone stays "server".
func TestProfilesNamedByProcess(t *testing.T) {
	pc := func(target int, binary, phase string) ProfileComparison {
		return ProfileComparison{Target: target, Binary: binary, Phase: phase, Unit: "request",
			CPUPerUnit: Metric{Name: "server CPU a request (" + phase + ")"}, HeapMB: &Metric{Name: "server heap in use at the end (" + phase + ")"}}
	}
	names := func(pcs ...ProfileComparison) []string {
		nameProcesses(pcs)
		var out []string
		for _, p := range pcs {
			out = append(out, p.CPUPerUnit.Name, p.HeapMB.Name)
		}
		return out
	}
	for _, c := range []struct {
		pcs  []ProfileComparison
		want []string
	}{
		{[]ProfileComparison{pc(0, "python3.11", "setup"), pc(0, "python3.11", "window")},
			[]string{"server CPU a request (setup)", "server heap in use at the end (setup)", "server CPU a request (window)", "server heap in use at the end (window)"}},
		{[]ProfileComparison{pc(0, "python3.11", "window"), pc(1, "mariadbd", "window")},
			[]string{"python3.11 CPU a request (window)", "python3.11 heap in use at the end (window)", "mariadbd CPU a request (window)", "mariadbd heap in use at the end (window)"}},
		{[]ProfileComparison{pc(0, "headroom", "window"), pc(1, "headroom", "window"), pc(2, "", "window")},
			[]string{"target 1 (headroom) CPU a request (window)", "target 1 (headroom) heap in use at the end (window)",
				"target 2 (headroom) CPU a request (window)", "target 2 (headroom) heap in use at the end (window)",
				"target 3 CPU a request (window)", "target 3 heap in use at the end (window)"}},
	} {
		if got := names(c.pcs...); !slices.Equal(got, c.want) {
			t.Errorf("named %q; want %q", got, c.want)
		}
	}
}
