package result

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
)

func TestStepHistogramsRoundTripPerLevel(t *testing.T) {
	levels := map[int]*metrics.Snapshot{}
	all := metrics.NewSnapshot()
	for _, users := range []int{48, 96} {
		snap := metrics.NewSnapshot()
		for i := range 1000 * users / 48 {
			snap.Add(&metrics.Sample{Kind: metrics.Request, Name: "GET /x", Status: 200, Latency: time.Duration(users*i) * time.Microsecond})
		}
		snap.Add(&metrics.Sample{Kind: metrics.Action, Name: "Browse", Latency: time.Duration(users) * time.Millisecond})
		levels[users] = snap
		all.Merge(snap)
	}
	dir := filepath.Join(t.TempDir(), "step")
	in := &Result{Kind: "step", Status: Completed, Step: &Step{Planned: []int{48, 96}, Levels: []StepLevel{
		{Users: 48, Complete: true, Totals: levels[48].Total(metrics.Request, metrics.NewStat()).Summarize("all requests", time.Second)},
		{Users: 96, Complete: true},
	}}}
	if err := WriteStep(dir, in, all, levels); err != nil {
		t.Fatal(err)
	}
	back, err := ReadLevelHistograms(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := LevelUsers(back); len(got) != 2 || got[0] != 48 || got[1] != 96 {
		t.Fatalf("levels read back: %v", got)
	}
	for users, snap := range levels {
		if !back[users].Requests["GET /x"].Hist().Equals(snap.Requests["GET /x"].Hist()) || back[users].Actions["Browse"].Count != 1 {
			t.Errorf("level %d: histograms read back differ from those written", users)
		}
	}
	// merging the levels read back gives the top-level histogram exactly
	merged := metrics.NewSnapshot()
	for _, snap := range back {
		merged.Merge(snap)
	}
	top, err := ReadHistograms(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !merged.Requests["GET /x"].Hist().Equals(top.Requests["GET /x"].Hist()) || top.Requests["GET /x"].Count != 3000 {
		t.Errorf("levels merged (%d) != top level (%d)", merged.Requests["GET /x"].Count, top.Requests["GET /x"].Count)
	}
	r, err := Read(dir)
	if err != nil || r.Step == nil || len(r.Step.Levels) != 2 || r.Step.Levels[0].Totals.Count != 1000 {
		t.Errorf("result.json read back: %v %+v", err, r.Step)
	}
	// the documented shape: "levels": {"48": {"requests": {...}, "actions": {...}}}
	raw, _ := os.ReadFile(filepath.Join(dir, HistogramsFile))
	var shape struct {
		Levels map[string]map[string]map[string]string `json:"levels"`
	}
	if err := json.Unmarshal(raw, &shape); err != nil || shape.Levels["48"]["requests"]["GET /x"] == "" || shape.Levels["96"]["actions"]["Browse"] == "" {
		t.Errorf("histograms.json lacks the documented levels part: %v", err)
	}
}

// Bounded and ceiling results keep their histograms.json as it was: no
// levels, and ReadLevelHistograms says so with an empty map.
func TestRunResultHasNoLevels(t *testing.T) {
	snap := metrics.NewSnapshot()
	snap.Add(&metrics.Sample{Kind: metrics.Request, Name: "GET /x", Status: 200, Latency: time.Millisecond})
	dir := t.TempDir()
	if err := Write(dir, &Result{Kind: "run"}, snap); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, HistogramsFile))
	if strings.Contains(string(raw), "levels") {
		t.Errorf("a run's histograms.json has levels:\n%s", raw)
	}
	levels, err := ReadLevelHistograms(dir)
	if err != nil || len(levels) != 0 {
		t.Errorf("levels of a run: %v, %v", levels, err)
	}
}

func TestReadLevelHistogramsRejectsCorruptLevels(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, HistogramsFile), []byte(`{"format": "headroom-result/1", "levels": {"many": {"requests": {}}}}`), 0o644)
	if _, err := ReadLevelHistograms(dir); err == nil || !strings.Contains(err.Error(), `level "many" is not a user count`) {
		t.Errorf("err = %v", err)
	}
	os.WriteFile(filepath.Join(dir, HistogramsFile), []byte(`{"format": "headroom-result/1", "levels": {"5": {"requests": {"x": "not hdr"}}}}`), 0o644)
	if _, err := ReadLevelHistograms(dir); err == nil || !strings.Contains(err.Error(), `level 5: histogram "x"`) {
		t.Errorf("err = %v", err)
	}
}
