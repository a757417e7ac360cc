package analysis

import (
	"fmt"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

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
func Untrue(l *result.Lateness, b *result.Burstiness, think time.Duration) string {
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
func unfair(b *result.Burstiness) string {
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

// Unread says why a second whose responses waited, arrived, p99Ms for the
// generator to read them (metrics.PhaseUnread) was untrue, or "": past
// lateLimit, the latencies the checks judged were partly the generator's
// own (a busy core), not the target's.
func Unread(p99Ms float64) string {
	if time.Duration(p99Ms*float64(time.Millisecond)) <= lateLimit {
		return ""
	}
	return fmt.Sprintf("the generator read its responses late: p99 %.0f ms after they arrived, past %v", p99Ms, lateLimit)
}

// lateLimit is the least lateness (p99) that makes load untrue.
const lateLimit = 50 * time.Millisecond

// ScheduleLine says in one line how late and how bunched the generator's
// starts were ("" when there were none): for the terminal and reports.
func ScheduleLine(l *result.Lateness, b *result.Burstiness) string {
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
