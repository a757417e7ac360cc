package result

import (
	"fmt"
	"time"

	"github.com/headroom-dev/headroom/metrics"
)

// Burstiness is how bunched the generator's starts were in the worst
// second: the most in any 10 ms and any 100 ms, as they started (Max), as
// they were meant to (Meant), and as independent starts at that second's
// rate would be (Fair, Poisson's median). Max far above Meant is load the
// scenario never asked for: the generator woke users together.
type Burstiness struct {
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
	return &Burstiness{Max10ms: b.Max10, Max100ms: b.Max100, Meant10ms: b.Meant10, Meant100ms: b.Meant100, Fair10ms: b.Fair10, Fair100ms: b.Fair100}
}

// Untrue says why the load a window applied was not what headroom meant
// to send, or "" when it was: its starts bunched (the most in any 10 ms of
// a second over twice, and four over, what the schedule asked for; in any
// 100 ms, half again and four over) or late (the 99th percentile past a
// tenth of the think time, and past 50 ms: a user makes up a smaller
// lateness on its next pause). think is the scenario's mean think time (0
// in the open model, where 50 ms of lateness is in every latency from the
// intended start).
func Untrue(l *Lateness, b *Burstiness, think time.Duration) string {
	if b != nil {
		for _, w := range [...]struct {
			name        string
			most, limit int64
			meant       int64
		}{{"10 ms", b.Max10ms, 2*b.Meant10ms + 4, b.Meant10ms}, {"100 ms", b.Max100ms, b.Meant100ms + b.Meant100ms/2 + 4, b.Meant100ms}} {
			if w.most > w.limit {
				return fmt.Sprintf("the generator's starts bunched: %d in one %s where its schedule had at most %d", w.most, w.name, w.meant)
			}
		}
	}
	if l != nil {
		limit := max(think/10, lateLimit)
		if late := time.Duration(l.P99Ms * float64(time.Millisecond)); late > limit {
			return fmt.Sprintf("the generator's starts were late: p99 %.0f ms behind schedule, past %v", l.P99Ms, limit)
		}
	}
	return ""
}

// lateLimit is the least lateness (p99) that makes load untrue.
const lateLimit = 50 * time.Millisecond

// ScheduleLine says in one line how late and how bunched the generator's
// starts were ("" when there were none): for the terminal and reports.
func ScheduleLine(l *Lateness, b *Burstiness) string {
	if l == nil {
		return ""
	}
	s := fmt.Sprintf("%d starts, late by p50 %s, p99 %s, p99.9 %s, max %s ms", l.Starts, msNum(l.P50Ms), msNum(l.P99Ms), msNum(l.P999Ms), msNum(l.MaxMs))
	if b != nil {
		s += fmt.Sprintf("; worst second: at most %d in 10 ms (%d meant, %d fair), %d in 100 ms (%d meant, %d fair)",
			b.Max10ms, b.Meant10ms, b.Fair10ms, b.Max100ms, b.Meant100ms, b.Fair100ms)
	}
	return s
}

// msNum is a lateness in ms with the digits it needs: 0.042, 1.3, 212.
func msNum(ms float64) string {
	switch {
	case ms < 1:
		return fmt.Sprintf("%.3f", ms)
	case ms < 10:
		return fmt.Sprintf("%.1f", ms)
	}
	return fmt.Sprintf("%.0f", ms)
}
