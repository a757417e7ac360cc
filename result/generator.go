package result

import (
	"github.com/headroom-dev/headroom/metrics"
)

// Burstiness is how bunched the generator's starts were in the worst
// second: the most in any 10 ms and any 100 ms, as they started (Max), as
// they were meant to (Meant), and as independent starts at that second's
// rate would be (Fair, Poisson's median). Max far above Meant is load the
// scenario never asked for: the generator woke users together; Meant far
// above Fair is a schedule that collapsed (users on one another's phases).
// Starts is the most starts of any second (0 in results before it): the
// rate Fair and the untrue-load rule are worked out at.
type Burstiness struct {
	Starts     int64 `json:"starts,omitempty"`
	Max10ms    int64 `json:"max_10ms"`
	Max100ms   int64 `json:"max_100ms"`
	Meant10ms  int64 `json:"meant_10ms"`
	Meant100ms int64 `json:"meant_100ms"`
	Fair10ms   int64 `json:"fair_10ms"`
	Fair100ms  int64 `json:"fair_100ms"`
}

// LatenessOf sums up the lateness of w's starts (closed-model users' think
// times ending, open-model arrivals starting: how late each fired after
// its intended time); nil when w started nothing.
func LatenessOf(w *metrics.Wakes) *Lateness {
	if w == nil || w.Late.Count == 0 {
		return nil
	}
	s := w.Late.Summarize("", 0)
	return &Lateness{Starts: w.Late.Count, MeanMs: s.MeanMs, P50Ms: s.P50Ms, P99Ms: s.P99Ms, P999Ms: float64(w.Late.Percentile(99.9)) / 1000, MaxMs: s.MaxMs}
}

// BurstinessOf is w's worst second (Wakes.Peak); nil when w started nothing.
func BurstinessOf(w *metrics.Wakes) *Burstiness {
	if w == nil || w.Peak.Starts == 0 {
		return nil
	}
	b := w.Peak
	return &Burstiness{Starts: b.Starts, Max10ms: b.Max10, Max100ms: b.Max100, Meant10ms: b.Meant10, Meant100ms: b.Meant100, Fair10ms: b.Fair10, Fair100ms: b.Fair100}
}
