package runner

import (
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/scenario"
)

// setupOf sums up the setup samples of snap (snap.Setup); nil when there
// are none. Rates are over window.
func setupOf(snap *metrics.Snapshot, started int64, window time.Duration) *result.Setup {
	if snap == nil || snap.Setup == nil {
		return nil
	}
	st := snap.Setup
	out := &result.Setup{Started: started}
	if a := st.Actions[scenario.ReadyAction]; a != nil {
		out.Users = a.Count
		out.TimeToSetUp = a.Summarize(scenario.ReadyAction, window)
	}
	if a := st.Actions[scenario.SessionKeptAction]; a != nil {
		out.SessionsKept = a.Count
	}
	if a := st.Actions[scenario.GaveUpAction]; a != nil {
		out.GaveUp = a.Count
	}
	if a := st.Actions[scenario.SetupAction]; a != nil {
		out.Attempts = a.Summarize(scenario.SetupAction, window)
	}
	out.Totals = st.Total(metrics.Request, metrics.NewStat()).Summarize("setup requests", window)
	out.Requests = st.Summaries(metrics.Request, window)
	out.Phases = result.PhasesOf(st, window)
	if out.Users == 0 && out.Attempts.Count == 0 && out.Totals.Count == 0 {
		return nil
	}
	return out
}

// withSetup is window with the setups of the whole run (all.Setup), the
// samples of result.Setup, for histograms.json: compare reads a login
// that got slower there. window itself is left as it is; nil stays nil.
func withSetup(window, all *metrics.Snapshot) *metrics.Snapshot {
	if window == nil {
		return nil
	}
	c := *window
	c.Setup = all.Setup
	return &c
}

// meanThink is the mean think time of sc's users: of its one user type,
// or of its types weighted as users are drawn from them.
func meanThink(sc *scenario.Scenario) time.Duration {
	var sum, weights float64
	for _, t := range sc.Types {
		w := t.Weight
		if len(sc.Types) == 1 || w <= 0 {
			w = 1
		}
		sum += w * float64(t.Think.Mean())
		weights += w
	}
	if weights == 0 {
		return 0
	}
	return time.Duration(sum / weights)
}
