package compare

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/runner"
	"github.com/headroom-dev/headroom/scenario"
	"github.com/headroom-dev/headroom/testbed"
)

// TestProfileDiffNamesTheHash: the testbed's password hash at 100,000
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
		srv := httptest.NewServer(testbed.New(testbed.Config{Pprof: true, HashRounds: rounds}).Handler())
		target, _ := url.Parse(srv.URL)
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("run-%d", i))
		_, err := (&runner.Bounded{Common: runner.Common{Scenario: sc, Target: target, Seed: 1, Timeout: time.Minute, Grace: time.Second, Out: dir,
			Profile: []string{srv.URL + "/debug/pprof"}, ProfileSlice: time.Second}, Users: 20, Ramp: 3 * time.Second, Duration: 3 * time.Second}).Run(context.Background())
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
	if !strings.Contains(setup.Cause, "pbkdf2") && !strings.Contains(setup.Cause, "hashPassword") {
		t.Errorf("cause %q: want the hash (pbkdf2, hashPassword); moved %v", setup.Cause, movedNames(setup.Moved))
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
