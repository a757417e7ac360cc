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
	if a := st.Actions[scenario.SetupAction]; a != nil {
		out.Attempts = a.Summarize(scenario.SetupAction, window)
	}
	out.Totals = st.Total(metrics.Request, metrics.NewStat()).Summarize("setup requests", window)
	out.Requests = st.Summaries(metrics.Request, window)
	if out.Users == 0 && out.Attempts.Count == 0 && out.Totals.Count == 0 {
		return nil
	}
	return out
}
