package compare

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/result"
)

// The result fixtures of the report package are real runs
// (report/testdata/runs/README.md).
func fixtureSide(t *testing.T, label string, names ...string) *Side {
	t.Helper()
	var dirs []string
	for _, n := range names {
		dirs = append(dirs, filepath.Join("..", "report", "testdata", "runs", n))
	}
	s, err := Load(label, dirs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCeilingSidesCompareSupportedUsers(t *testing.T) {
	c, err := Compare(fixtureSide(t, "a", "ceil-1", "ceil-2"), fixtureSide(t, "b", "ceil-2", "ceil-1"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Users == nil || c.Users.Base != 16 || c.Users.New != 16 || c.Users.Verdict != NoChange {
		t.Errorf("supported users %+v, want 16 on both sides and no change", c.Users)
	}
	if c.CeilingRPS == nil || c.CeilingRPS.Verdict != NoChange {
		t.Errorf("throughput at the ceiling %+v", c.CeilingRPS)
	}
	if len(c.Window.Requests) == 0 {
		t.Errorf("no per-request rows at the supported users")
	}
}

func TestStepSidesCompareLevelByLevel(t *testing.T) {
	c, err := Compare(fixtureSide(t, "a", "step-1"), fixtureSide(t, "b", "step-1"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Levels) != 4 || c.Levels[0].Users != 5 || c.Levels[3].Users != 40 {
		t.Fatalf("levels %+v, want 5, 10, 20, 40", c.Levels)
	}
	for _, l := range c.Levels {
		if l.Throughput.Delta != 0 || l.Throughput.Verdict != NoVerdict {
			t.Errorf("level %d: %s %s, want 0 and %q (one run a side)", l.Users, l.Throughput.DeltaText(), l.Throughput.Verdict, NoVerdict)
		}
	}
	if len(c.Base.Knee) != 1 || c.Base.Knee[0] == "" {
		t.Errorf("knee %v, want the run's", c.Base.Knee)
	}
}

// copyRun copies fixture name into a new directory, through edit, and
// returns it.
func copyRun(t *testing.T, name string, edit func(r *result.Result)) string {
	t.Helper()
	from := filepath.Join("..", "report", "testdata", "runs", name)
	to := filepath.Join(t.TempDir(), name)
	r, err := result.Read(from)
	if err != nil {
		t.Fatal(err)
	}
	edit(r)
	hists, err := os.ReadFile(filepath.Join(from, result.HistogramsFile))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(to, 0o755)
	if err := errors.Join(os.WriteFile(filepath.Join(to, result.ResultFile), b, 0o644), os.WriteFile(filepath.Join(to, result.HistogramsFile), hists, 0o644)); err != nil {
		t.Fatal(err)
	}
	return to
}

func TestStepLevelsHeldOnOneSideAreLeftOut(t *testing.T) {
	// A second base run that stopped before 40 users.
	stopped := copyRun(t, "step-1", func(r *result.Result) {
		r.StartedAt = r.StartedAt.Add(time.Hour)
		r.Step.Levels = r.Step.Levels[:len(r.Step.Levels)-1]
	})
	base, err := Load("a", []string{filepath.Join("..", "report", "testdata", "runs", "step-1"), stopped})
	if err != nil {
		t.Fatal(err)
	}
	new, err := Load("b", []string{copyRun(t, "step-1", func(r *result.Result) { r.StartedAt = r.StartedAt.Add(2 * time.Hour) })})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compare(base, new, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Levels) != 3 || c.Levels[2].Users != 20 {
		t.Errorf("levels %d, want 5, 10, 20 (40 was not held by every run)", len(c.Levels))
	}
	found := false
	for _, n := range c.Notes {
		found = found || strings.Contains(n, "levels [40] were not held by every run")
	}
	if !found {
		t.Errorf("notes %q: want one naming level 40", c.Notes)
	}
}

// TestOpenSidesCompareServiceTimesBeside: two runs of the open model a
// side compare their latencies, labelled from the intended start, and
// their service times beside them, each run's figure a point.
func TestOpenSidesCompareServiceTimesBeside(t *testing.T) {
	c, err := Compare(fixtureSide(t, "a", "open-1", "open-2"), fixtureSide(t, "b", "open-2", "open-1"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Window.MixMean.Name != "mean latency from intended start, common mix" || c.Window.MixP99.Name != "p99 latency from intended start, common mix" {
		t.Errorf("latencies named %q, %q: want them labelled from the intended start", c.Window.MixMean.Name, c.Window.MixP99.Name)
	}
	if c.ServiceMean == nil || c.ServiceP99 == nil {
		t.Fatal("no service times compared")
	}
	for _, m := range []*Metric{c.ServiceMean, c.ServiceP99} {
		if len(m.BaseRuns) != 2 || len(m.NewRuns) != 2 || m.Base <= 0 || m.Base != m.New || m.Verdict != NoChange {
			t.Errorf("%s: %+v; want two runs a side, the same mean, no change", m.Name, m)
		}
	}
	// The service time never exceeds the latency from the intended start.
	if c.ServiceMean.Base > c.Window.MixMean.Base*1.001 {
		t.Errorf("mean service time %.2f ms over the mean latency from the intended start %.2f ms", c.ServiceMean.Base, c.Window.MixMean.Base)
	}
	closed, err := Compare(fixtureSide(t, "a", "base-1"), fixtureSide(t, "b", "new-1"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if closed.ServiceMean != nil || strings.Contains(closed.Window.MixMean.Name, "intended") {
		t.Errorf("closed-model runs: service %+v, latency named %q", closed.ServiceMean, closed.Window.MixMean.Name)
	}
}
