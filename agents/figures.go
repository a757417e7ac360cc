package agents

import (
	"fmt"
	"slices"
	"time"

	"github.com/headroom-dev/headroom/result"
)

// Agents is the run's agents for its result: each one's share, figures
// and coverage, the faults survived, and which agent's latency departs
// from the others'. degraded is the seconds the runner marked degraded.
func (f *Fleet) Agents(degraded float64) *result.Agents {
	c := f.c
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	span := now.Sub(f.began).Seconds()
	out := &result.Agents{DegradedS: degraded, LateSeconds: f.lateTicks, Coverage: 1}
	places := map[int]float64{} // seconds each place was held
	for _, r := range f.all() {
		from := r.joined
		if from.Before(f.began) {
			from = f.began
		}
		to := now
		a := result.Agent{Index: r.index, Name: r.hello.Name, Cores: r.hello.Cores, JoinedS: r.joined.Sub(f.began).Seconds(),
			Users: r.status.Users, Peak: r.peak, Requests: r.status.Requests, Errors: r.status.Errors,
			Arrivals: r.status.Arrivals, Dropped: r.status.Dropped,
			P50Ms: r.status.P50Ms, P99Ms: r.status.P99Ms,
			CPUS: r.status.CPUSeconds, RSSMB: r.status.PeakRSSMB, Late: r.status.Late, Lateness: r.status.Lateness, Burstiness: r.status.Burstiness}
		if r.ended && (r.done == nil || r.done.Leaving) {
			to = r.left
			a.LeftS = r.left.Sub(f.began).Seconds()
			a.Lost = "its stream ended"
			if r.err != nil {
				a.Lost = r.err.Error()
			}
		}
		alive := max(to.Sub(from).Seconds(), 0)
		places[r.index] += alive
		if span > 0 {
			a.Coverage = min(alive/span, 1)
		}
		if alive > 0 {
			a.RPS = float64(a.Requests) / alive
			a.CPUPct = 100 * a.CPUS / alive / float64(a.Cores)
		}
		a.Overload = a.CPUPct > 90 // its lateness and bunching are judged on the merged seconds, what the target received
		out.Agents = append(out.Agents, a)
	}
	slices.SortStableFunc(out.Agents, func(a, b result.Agent) int { return a.Index - b.Index })
	if span > 0 && len(c.remotes) > 0 {
		held := 0.0
		for _, s := range places {
			held += min(s, span)
		}
		out.Coverage = held / (span * float64(len(c.remotes)))
	}
	outliers(out.Agents)
	for _, ft := range f.faults {
		out.Faults = append(out.Faults, ft.Fault)
	}
	return out
}

// Outlier thresholds: an agent whose median latency is this many times
// the median of the other agents' medians, and this much slower, over at
// least minOutlierRequests, is flagged: the same target answers every
// agent alike, so the difference is the agent's (its CPU, its network).
const (
	outlierRatio       = 1.5
	outlierGap         = time.Millisecond
	minOutlierRequests = 200
)

// outliers flags the agents whose latency departs from the others'.
func outliers(as []result.Agent) {
	for i := range as {
		a := &as[i]
		if a.Requests < minOutlierRequests {
			continue
		}
		var others []float64
		for j, b := range as {
			if j != i && b.Requests >= minOutlierRequests {
				others = append(others, b.P50Ms)
			}
		}
		if len(others) == 0 {
			continue
		}
		slices.Sort(others)
		m := others[len(others)/2]
		if len(others)%2 == 0 {
			m = (others[len(others)/2-1] + others[len(others)/2]) / 2
		}
		if a.P50Ms > outlierRatio*m && a.P50Ms-m > ms(outlierGap.Microseconds()) {
			a.Outlier = fmt.Sprintf("median latency %.1f ms against %.1f ms on the other agents: this agent, not the target, may be slow (CPU %.0f%%, %d late wake-ups)",
				a.P50Ms, m, a.CPUPct, a.Late)
		}
	}
}

// ms is microseconds as milliseconds.
func ms(us int64) float64 { return float64(us) / 1000 }
