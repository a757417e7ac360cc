package runner

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/analysis"
	"github.com/headroom-dev/headroom/control"
	"github.com/headroom-dev/headroom/health"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// truth follows whether the load a search applied was the load it meant
// to send (issue 28). A second whose starts fired late or bunched
// (analysis.Untrue: the generator stalled, on a busy machine or in its
// collector) taints the checks' windows that see it; an evaluation that
// fired while tainted is kept out of the search, as a degraded second is,
// and counted at its level with the reason. Evaluations that passed count
// as ever: bunched load is harsher than meant, so a target healthy under
// it is healthy. Not safe for concurrent use.
//
// A second whose responses waited to be read (analysis.Unread: a busy
// generator) taints only the checks on headroom's own latencies
// (latency): a firing of those alone is kept out; an error check's counts,
// since a response read late is no less an error.
type truth struct {
	think     time.Duration // the scenario's mean think time (0: the open model)
	window    time.Duration // the checks' longest window: how long a second weighs on them
	until     time.Time     // evaluations before it see an untrue second
	why       string        // that second's reason
	readUntil time.Time     // evaluations before it see a second of responses read late
	readWhy   string        // that second's reason
	latency   map[string]bool
	kept      map[int]*keptOut
	cpu       string // why the generator's CPU may have been the limit, if it was saturated
}

// latencyChecks names the checks on headroom's own latency series
// (loadtest_http_request_time), which a response read late inflates.
func latencyChecks(checks []health.Check) map[string]bool {
	out := map[string]bool{}
	for _, ch := range checks {
		if slices.ContainsFunc(ch.Metrics(), func(m string) bool { return strings.HasPrefix(m, "loadtest_http_request_time") }) {
			out[ch.Name] = true
		}
	}
	return out
}

// checksWindow is the longest window of checks.
func checksWindow(checks []health.Check) time.Duration {
	var w time.Duration
	for _, ch := range checks {
		w = max(w, ch.Window())
	}
	return w
}

// keptOut is what a level's untrue load kept out of the search.
type keptOut struct {
	n   int    // evaluations
	why string // the last untrue second's reason
}

func newTruth(think, window time.Duration) *truth {
	return &truth{think: think, window: max(window, time.Second), kept: map[int]*keptOut{}}
}

// second takes the generator's figures of the second that ended at now
// (a sealed snapshot's Wakes, nil if it started nothing; its requests'
// unread phase, nil if the kernel stamped none).
func (t *truth) second(now time.Time, w *metrics.Wakes, unread *metrics.Snapshot) {
	if why := analysis.Untrue(result.LatenessOf(w), result.BurstinessOf(w), t.think); why != "" {
		t.until, t.why = now.Add(t.window), why
	}
	if unread != nil {
		if st := unread.Total(metrics.Request, metrics.NewStat()); st.Count > 0 {
			if why := analysis.Unread(st.Summarize("unread", time.Second).P99Ms); why != "" {
				t.readUntil, t.readWhy = now.Add(t.window), why
			}
		}
	}
}

// counts reports whether an evaluation at now, at users, with the checks
// fired (none: it passed) counts towards the search; a firing one that
// sees an untrue second does not, nor one that sees responses read late
// with latency checks alone fired; either is counted at users as kept out.
func (t *truth) counts(now time.Time, users int, fired []string) bool {
	why := ""
	switch {
	case len(fired) == 0:
		return true
	case now.Before(t.until):
		why = t.why
	case now.Before(t.readUntil) && !slices.ContainsFunc(fired, func(name string) bool { return !t.latency[name] }):
		why = t.readWhy
	default:
		return true
	}
	k := t.kept[users]
	if k == nil {
		k = &keptOut{}
		t.kept[users] = k
	}
	k.n++
	k.why = why
	return false
}

// level is l for the result, with the generator's figures over the
// seconds held at its user count (h, nil if none) and what its untrue
// load kept out.
func (t *truth) level(l control.Level, h *levelFigures) result.Level {
	r := result.Level{Users: l.Users, Start: l.Start, JudgeStart: l.JudgeStart, End: l.End, Evaluations: l.Evaluations,
		Unhealthy: l.Unhealthy, Fired: l.Fired, Pressure: l.Pressure, Verdict: l.Verdict, SetUp: l.SetUp,
		Undecided: l.Undecided, Hold: l.Hold, Why: l.Why, SetupBound: l.SetupBound, SetupPerS: l.SetupPerS, Unknown: l.Unknown}
	if h != nil {
		r.Lateness, r.Burstiness = result.LatenessOf(h.snap.Wakes), result.BurstinessOf(h.snap.Wakes)
	}
	if k := t.kept[l.Users]; k != nil {
		r.KeptOut, r.Untrue = k.n, k.why
	}
	return r
}

// untrusted says why a search's answer rests on untrue load, or "": a
// level that bounds it (at the answer, the hold, the first unhealthy one
// above) kept out as many evaluations as it judged.
func (t *truth) untrusted(ci *result.Ceiling) string {
	est := ci.SupportedUsers
	check := func(l *result.Level) string {
		if l == nil || l.KeptOut == 0 || l.KeptOut < l.Evaluations {
			return ""
		}
		return fmt.Sprintf("at %s the generator's load was untrue for %d evaluations that fired, %d judged (%s): the verdict rests on little",
			result.Amount(float64(l.Users), ci.Unit), l.KeptOut, l.Evaluations, l.Untrue)
	}
	if why := check(ci.Hold); why != "" {
		return why
	}
	for i := range ci.Levels {
		l := &ci.Levels[i]
		if u := float64(l.Users); u == est.Value || u == est.Low || u == est.High {
			if why := check(l); why != "" {
				return why
			}
		}
	}
	return ""
}

// drift adds to a contradiction between verdicts (Estimate.Drift) which
// party moved: the generator, when the load at either level was untrue;
// else the target, with the generator's figures that say it did not.
func (t *truth) drift(ci *result.Ceiling) {
	d := ci.SupportedUsers.Drift
	if len(d) != 2 {
		return
	}
	var at [2]*result.Level
	for i := range ci.Levels {
		for j, u := range d {
			if l := &ci.Levels[i]; l.Users == u && (at[j] == nil || l.KeptOut > at[j].KeptOut) {
				at[j] = l
			}
		}
	}
	for _, l := range at {
		if l == nil {
			continue
		}
		why := l.Untrue
		if why == "" {
			why = analysis.Untrue(l.Lateness, l.Burstiness, t.think)
		}
		if why != "" {
			ci.SupportedUsers.Why += fmt.Sprintf("; the generator's load moved, not necessarily the target's capacity: at %s %s",
				result.Amount(float64(l.Users), ci.Unit), why)
			return
		}
	}
	figures := func(l *result.Level) string {
		if l == nil || l.Lateness == nil || l.Burstiness == nil {
			return "no figures"
		}
		return fmt.Sprintf("p99 %.1f ms late, at most %d starts in 100 ms for %d meant", l.Lateness.P99Ms, l.Burstiness.Max100ms, l.Burstiness.Meant100ms)
	}
	ci.SupportedUsers.Why += fmt.Sprintf("; the generator's figures did not move (%s at %d, %s at %d): the target's capacity moved during the search (growing state, caches, a slower phase)",
		figures(at[0]), d[0], figures(at[1]), d[1])
}

// unreadShare says, when the responses' wait to be read (the unread phase:
// arrived in the kernel, not yet read by a busy headroom) is a visible
// share of the latency's p99 (a tenth or more, and 5 ms at least: a
// process woken from idle reads a millisecond late, which is noise),
// both figures: that part of every latency is the generator's, in either
// model. "" otherwise, and where the kernel stamped no response.
func unreadShare(ps result.Phases, latency metrics.Summary) string {
	u := ps[metrics.PhaseNames[metrics.PhaseUnread]]
	if u == nil || latency.P99Ms <= 0 || u.Totals.P99Ms < 5 || u.Totals.P99Ms < 0.1*latency.P99Ms {
		return ""
	}
	return fmt.Sprintf("responses waited, arrived, up to %.1f ms (p99; p50 %.2f ms) for headroom to read them, %.0f%% of the latency's p99 of %.1f ms: "+
		"that part of each latency is headroom's own (its process busy, or stalled), not the target's (the unread phase, docs/HTTP.md). "+
		"Give headroom more cores, or fewer users or arrivals a core, for latencies that are the target's alone",
		u.Totals.P99Ms, u.Totals.P50Ms, 100*u.Totals.P99Ms/latency.P99Ms, latency.P99Ms)
}
