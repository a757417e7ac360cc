package compare

import (
	"testing"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// TestComparePhases: each phase of the request names every run timed,
// and of all requests, is judged over the runs: a wait three times as long
// on every new run is a regression; a name one run lacks, or a phase a
// side never went through, is left out; results without phases give none.
func TestComparePhases(t *testing.T) {
	run := func(wait float64, names ...string) *Run {
		tab := &result.PhaseTable{Totals: metrics.Summary{Name: "all requests", Count: 100, MeanMs: wait, P99Ms: 2 * wait}}
		for _, n := range names {
			tab.Requests = append(tab.Requests, metrics.Summary{Name: n, Count: 50, MeanMs: wait, P99Ms: 2 * wait})
		}
		return &Run{Result: &result.Result{Phases: result.Phases{"wait": tab}}}
	}
	base := &Side{Runs: []*Run{run(10, "GET /a", "GET /b"), run(10.2, "GET /a", "GET /b"), run(9.8, "GET /a", "GET /b")}}
	new := &Side{Runs: []*Run{run(30, "GET /a", "GET /b"), run(30.3, "GET /a"), run(29.7, "GET /a", "GET /b")}}
	var o Options
	o.defaults()
	rows := comparePhases(base, new, o)
	if len(rows) != 2 || rows[0].Name != "GET /a" || rows[1].Name != "all requests" || rows[0].Phase != "wait" {
		t.Fatalf("rows %+v: want wait of GET /a and of all requests (GET /b is not in every run)", rows)
	}
	for _, r := range rows {
		if r.Mean.Verdict != Regression || r.P99.Verdict != Regression || r.Mean.Base != 10 || r.Mean.New != 30 {
			t.Errorf("%s %s: mean %v → %v %s, p99 %s; want regressions", r.Phase, r.Name, r.Mean.Base, r.Mean.New, r.Mean.Verdict, r.P99.Verdict)
		}
	}
	if rows := comparePhases(&Side{Runs: []*Run{{Result: &result.Result{}}}}, new, o); rows != nil {
		t.Errorf("a base without phases: %+v", rows)
	}
}
