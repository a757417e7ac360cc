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

// Untrue says why the load a window applied was not what headroom meant
// to send, or "" when it was:
//
//   - its starts bunched beyond its schedule: the most in any 10 ms of a
//     second over twice, and four over, what the schedule asked for; in
//     any 100 ms, half again and four over (a stall woke users together);
//   - its starts, sent or meant, bunched beyond the fair schedule: more in
//     one 10 ms or 100 ms than independent users at the second's rate put
//     there by chance once in 1/chanceOfBunch seconds (metrics.PoissonBound
//     over the second's windows). Meant past it is a schedule that
//     collapsed, users on one another's phases (issue 50): the generator
//     sent what it meant, but not what a population of users sends;
//   - or late: the 99th percentile past a tenth of the think time, and
//     past 50 ms (a user makes up a smaller lateness on its next pause).
//
// think is the scenario's mean think time (0 in the open model, where 50
// ms of lateness is in every latency from the intended start). b's Starts
// at 0 (a result from before it) leaves the fair rule out.
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
		if why := unfair(b); why != "" {
			return why
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

// chanceOfBunch is how rarely independent starts bunch enough, in a
// second, for Untrue to call the second untrue: once in 10,000 seconds,
// so a search of an hour meets it by chance about once in three.
const chanceOfBunch = 1e-4

// unfair says why b's starts (meant first, then sent) were bunched beyond
// what independent users at its rate give, or "".
func unfair(b *Burstiness) string {
	if b.Starts <= 0 {
		return ""
	}
	slots := int(time.Second / metrics.SlotWidth)
	mu := float64(b.Starts) / float64(slots)
	for _, w := range [...]struct {
		name        string
		meant, sent int64
		bound       int64
	}{{"10 ms", b.Meant10ms, b.Max10ms, metrics.PoissonBound(mu, slots, chanceOfBunch)},
		{"100 ms", b.Meant100ms, b.Max100ms, metrics.PoissonBound(10*mu, slots, chanceOfBunch)}} {
		switch {
		case w.meant >= w.bound:
			return fmt.Sprintf("the generator's schedule bunched: %d starts meant for one %s where independent users at %d a second put at most %d (%d sent)",
				w.meant, w.name, b.Starts, w.bound-1, w.sent)
		case w.sent >= w.bound:
			return fmt.Sprintf("the generator's starts bunched: %d in one %s where independent users at %d a second put at most %d (%d meant)",
				w.sent, w.name, b.Starts, w.bound-1, w.meant)
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
