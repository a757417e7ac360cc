package analysis

import (
	"fmt"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// Coordinated omission in the closed model (issue 14, part 4; docs/OPEN.md):
// a closed-model user waits for each response before it thinks and acts
// again, so while the target stalls it sends nothing, and the requests it
// would have sent (and that would have waited too) are never measured.
// One slow sample stands for many: the percentiles understate what clients
// that do not wait would see.
//
// The rule is HdrHistogram's correction for an expected interval
// (RecordCorrectedValue), applied to users' actions: a user's usual
// interval between two action starts is I = its mean think time + the
// median action time. An action that took A >= 2I held the user up for
// at least one whole interval more than usual, in which it would have
// started floor(A/I) - 1 more actions. Summed over the window, those are
// the actions the stall hid; when they are 5% or more of the actions the
// users did, the run warns and points to the open model. Normal variation
// does not trip it (an action takes twice a whole think time only when
// something held it), nor do slow kinds of requests that are always slow
// (the same for every run: only a spread past 2I counts). A scenario
// without think time sets no pace of its own and is not judged.

// OmissionWarnPct is the share of actions hidden by stalls, in percent
// [0, 100] of those the users did, from which a closed-model run warns.
const OmissionWarnPct = 5

// OmissionOf judges the actions of snap, a closed-model window, for users
// whose mean think time is think; nil when it cannot: no think time, or
// no action that sent a request.
func OmissionOf(snap *metrics.Snapshot, think time.Duration) *result.Omission {
	if think <= 0 || snap == nil {
		return nil
	}
	st := snap.Total(metrics.Action, metrics.NewStat())
	acting := st.Count - st.NoRequest
	if acting <= 0 {
		return nil
	}
	interval := think + time.Duration(st.Hist().ValueAtPercentile(50))*time.Microsecond
	iv := interval.Microseconds()
	o := &result.Omission{ThinkMs: ms(think), IntervalMs: ms(interval), Actions: acting, MaxMs: float64(st.Hist().Max()) / 1000}
	for _, b := range st.Hist().Distribution() {
		if b.Count == 0 || b.To < 2*iv {
			continue
		}
		v := (b.From + b.To) / 2 // the bucket's middle: within 0.1% of every value in it
		if v < 2*iv {
			continue
		}
		o.Stalled += b.Count
		o.Hidden += b.Count * (v/iv - 1)
	}
	o.HiddenPct = 100 * float64(o.Hidden) / float64(acting)
	o.Warn = o.HiddenPct >= OmissionWarnPct
	return o
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// OmissionWarning says what a warning Omission means and what to do, or
// "" when it does not warn.
func OmissionWarning(o *result.Omission) string {
	if o == nil || !o.Warn {
		return ""
	}
	return fmt.Sprintf("users were held up by the target: %d actions took at least twice a user's usual interval between actions "+
		"(%.0f ms: %.0f ms think + the median action), the longest %.2f s. At their usual pace users would have started about %d more actions "+
		"(%.0f%% of the %d they did), whose latency this closed-model run cannot see (coordinated omission): its percentiles understate what "+
		"clients that do not wait for each other would see. Measure at a fixed arrival rate with --rate (the open model, docs/OPEN.md)",
		o.Stalled, o.IntervalMs, o.ThinkMs, o.MaxMs/1000, o.Hidden, o.HiddenPct, o.Actions)
}
