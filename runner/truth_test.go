package runner

import (
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/analysis"
	"github.com/headroom-dev/headroom/control"
	"github.com/headroom-dev/headroom/health"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// fired is an evaluation's fired checks: one of any kind.
var fired = []string{"client 5xx errors (%)"}

// second makes a sealed second of 300 starts, n of them woken together
// by a stall of the generator at its middle.
func second(t0 time.Time, bunched int) *metrics.Snapshot {
	s := metrics.NewSnapshot()
	s.Start, s.End = t0, t0.Add(time.Second)
	rec := metrics.NewRecorder(1, nil, func() time.Time { return t0 })
	for i := range 300 {
		want := t0.Add(time.Duration(i) * time.Second / 300)
		at := want
		if i >= 150-bunched && i < 150 {
			at = t0.Add(500 * time.Millisecond)
		}
		rec.Shard(0).Wake(want, at)
	}
	rec.Drain(s)
	s.Start, s.End = t0, t0.Add(time.Second)
	s.Seal()
	return s
}

// A firing evaluation that sees a bunched second (within the checks'
// window) is kept out and counted at its level; a passing one, or one
// past the window, counts.
func TestTruthKeepsOutWhatUntrueLoadFired(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	tr := newTruth(time.Second, 5*time.Second)
	tr.second(t0, second(t0, 0).Wakes, nil)
	if !tr.counts(t0, 100, fired) {
		t.Fatal("a firing on true load kept out")
	}
	t1 := t0.Add(time.Second)
	tr.second(t1, second(t1, 60).Wakes, nil)
	if !tr.counts(t1, 100, nil) {
		t.Error("a passing evaluation on bunched load kept out")
	}
	if tr.counts(t1.Add(4*time.Second), 100, fired) {
		t.Error("a firing 4 s after a bunched second, within the 5 s window, counted")
	}
	if !tr.counts(t1.Add(5*time.Second), 100, fired) {
		t.Error("a firing past the window kept out")
	}
	l := tr.level(control.Level{Users: 100, Evaluations: 1, Verdict: "unhealthy"}, &levelFigures{snap: second(t0, 60)})
	if l.KeptOut != 1 || !strings.Contains(l.Untrue, "bunched: 63 in one 10 ms") || l.Burstiness == nil || l.Burstiness.Max10ms < 60 || l.Lateness.Starts != 300 {
		t.Errorf("level: %+v", l)
	}

	ci := &result.Ceiling{Unit: result.UnitUsers, SupportedUsers: result.Supported{Value: 90, Low: 90, High: 100, Found: true, Drift: []int{100, 90}},
		Levels: []result.Level{l, tr.level(control.Level{Users: 90, Evaluations: 5, Verdict: "healthy"}, &levelFigures{snap: second(t0, 0)})}}
	if why := tr.untrusted(ci); !strings.Contains(why, "at 100 users the generator's load was untrue for 1 evaluations that fired, 1 judged") {
		t.Errorf("untrusted: %q", why)
	}
	tr.drift(ci)
	if why := ci.SupportedUsers.Why; !strings.Contains(why, "the generator's load moved") || strings.Contains(why, "capacity moved") {
		t.Errorf("drift with untrue load: %q", why)
	}

	// The same contradiction on true load is the target's.
	tr = newTruth(time.Second, 5*time.Second)
	ci.Levels = []result.Level{tr.level(control.Level{Users: 100, Evaluations: 5, Verdict: "healthy"}, &levelFigures{snap: second(t0, 0)}),
		tr.level(control.Level{Users: 90, Evaluations: 5, Verdict: "unhealthy"}, &levelFigures{snap: second(t0, 0)})}
	ci.SupportedUsers.Why = ""
	tr.drift(ci)
	if why := ci.SupportedUsers.Why; !strings.Contains(why, "the generator's figures did not move") || !strings.Contains(why, "the target's capacity moved") {
		t.Errorf("drift on true load: %q", why)
	}
	if why := tr.untrusted(ci); why != "" {
		t.Errorf("untrusted on true load: %q", why)
	}
}

func TestUntrue(t *testing.T) {
	for _, c := range []struct {
		l     *result.Lateness
		b     *result.Burstiness
		think time.Duration
		want  string
	}{
		{nil, nil, time.Second, ""},
		{&result.Lateness{P99Ms: 0.2}, &result.Burstiness{Max10ms: 9, Meant10ms: 8, Max100ms: 40, Meant100ms: 38}, time.Second, ""},
		{nil, &result.Burstiness{Max10ms: 21, Meant10ms: 8, Max100ms: 50, Meant100ms: 38}, time.Second, "21 in one 10 ms"},
		{nil, &result.Burstiness{Max10ms: 12, Meant10ms: 8, Max100ms: 90, Meant100ms: 38}, time.Second, "90 in one 100 ms"},
		{nil, &result.Burstiness{Max10ms: 6, Meant10ms: 1}, time.Second, ""}, // a few: chance
		{&result.Lateness{P99Ms: 150}, nil, time.Second, "p99 150 ms behind"},
		{&result.Lateness{P99Ms: 150}, nil, 5 * time.Second, ""},
		{&result.Lateness{P99Ms: 150}, nil, 0, "past 50ms"},
		{&result.Lateness{P99Ms: 30}, nil, 100 * time.Millisecond, ""}, // made up on the next pause
		{nil, &result.Burstiness{Max10ms: 12, Meant10ms: 8, Max100ms: 62, Meant100ms: 38}, time.Second, "62 in one 100 ms"},
	} {
		got := analysis.Untrue(c.l, c.b, c.think)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("Untrue(%+v, %+v, %v) = %q, want %q", c.l, c.b, c.think, got, c.want)
		}
	}
}

// collapsed makes a sealed second of 300 starts sent when they were
// meant, n of them meant for one instant: a schedule that collapsed, the
// generator on time (issue 50).
func collapsed(t0 time.Time, n int) *metrics.Snapshot {
	s := metrics.NewSnapshot()
	rec := metrics.NewRecorder(1, nil, func() time.Time { return t0 })
	for i := range 300 {
		want := t0.Add(time.Duration(i) * time.Second / 300)
		if i < n {
			want = t0.Add(500 * time.Millisecond)
		}
		rec.Shard(0).Wake(want, want)
	}
	rec.Drain(s)
	s.Start, s.End = t0, t0.Add(time.Second)
	s.Seal()
	return s
}

// A schedule bunched beyond the fair one, sent as meant, is untrue load:
// a firing evaluation that sees it is kept out, the level re-held until
// the checks' window holds only fair seconds, and an answer that rests on
// the level is not trustworthy, naming it and the schedule.
func TestTruthKeepsOutACollapsedSchedule(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	tr := newTruth(time.Second, 5*time.Second)
	tr.second(t0, collapsed(t0, 0).Wakes, nil)
	if !tr.counts(t0, 250, fired) {
		t.Fatal("a firing on a fair schedule kept out")
	}
	t1 := t0.Add(time.Second)
	tr.second(t1, collapsed(t1, 30).Wakes, nil) // 30 meant for one 10 ms at 300 a second: random phases put ~8
	if tr.counts(t1, 250, fired) || tr.counts(t1.Add(4*time.Second), 250, fired) {
		t.Error("a firing on a collapsed schedule, within the checks' window, counted")
	}
	for s := 2; s <= 6; s++ { // spread again: fair seconds
		ts := t0.Add(time.Duration(s) * time.Second)
		tr.second(ts, collapsed(ts, 0).Wakes, nil)
	}
	if !tr.counts(t1.Add(5*time.Second), 250, fired) {
		t.Error("a firing once the window holds only fair seconds kept out: the level is never judged")
	}
	l := tr.level(control.Level{Users: 250, Evaluations: 2, Verdict: "unhealthy"}, &levelFigures{snap: collapsed(t1, 30)})
	if l.KeptOut != 2 || !strings.Contains(l.Untrue, "the generator's schedule bunched: 33 starts meant for one 10 ms") { // 30, and the slot's own 3
		t.Errorf("level: kept out %d, untrue %q", l.KeptOut, l.Untrue)
	}
	ci := &result.Ceiling{Unit: result.UnitUsers, SupportedUsers: result.Supported{Value: 242, Low: 242, High: 250, Found: true},
		Levels: []result.Level{l, tr.level(control.Level{Users: 242, Evaluations: 5, Verdict: "healthy"}, &levelFigures{snap: collapsed(t0, 0)})}}
	if why := tr.untrusted(ci); !strings.Contains(why, "at 250 users") || !strings.Contains(why, "schedule bunched") {
		t.Errorf("untrusted: %q", why)
	}
}

// unread is a second's unread phase: n requests whose responses waited
// each for d to be read.
func unread(n int, d time.Duration) *metrics.Snapshot {
	s := metrics.NewSnapshot()
	rec := metrics.NewRecorder(1, nil, time.Now)
	for range n {
		rec.Shard(0).Record(metrics.Sample{Kind: metrics.Request, Name: "GET /", Latency: d})
	}
	rec.Drain(s)
	return s
}

// A second whose responses waited to be read past 50 ms at p99 (a busy
// generator: its latencies partly its own) keeps out a firing of the
// latency checks alone, within the checks' window; an error check's firing
// counts (a response read late is no less an error). 20 ms, or no stamped
// response, taints nothing.
func TestTruthKeepsOutWhatUnreadResponsesFired(t *testing.T) {
	checks := []health.Check{{Name: "mean latency (s)", Query: meanLatency, Threshold: 0.1},
		{Name: "5xx (%)", Query: `sum(rate(loadtest_http_errors_total[5s]))`, Threshold: 1}}
	latency, errs := []string{"mean latency (s)"}, []string{"5xx (%)"}
	t0 := time.Unix(1_700_000_000, 0)
	tr := newTruth(time.Second, 5*time.Second)
	tr.latency = latencyChecks(checks)
	if len(tr.latency) != 1 || !tr.latency["mean latency (s)"] {
		t.Fatalf("latency checks %v, want the mean latency's alone", tr.latency)
	}
	tr.second(t0, second(t0, 0).Wakes, unread(100, 20*time.Millisecond))
	tr.second(t0, second(t0, 0).Wakes, nil)
	if !tr.counts(t0, 100, latency) {
		t.Fatal("a latency check's firing with responses read 20 ms late kept out")
	}
	t1 := t0.Add(time.Second)
	tr.second(t1, second(t1, 0).Wakes, unread(100, 80*time.Millisecond))
	if !tr.counts(t1, 100, errs) || !tr.counts(t1, 100, append(latency, errs...)) {
		t.Error("an error check's firing with responses read 80 ms late kept out")
	}
	if tr.counts(t1.Add(4*time.Second), 100, latency) {
		t.Error("a latency check's firing 4 s after responses read 80 ms late, within the 5 s window, counted")
	}
	if !tr.counts(t1.Add(5*time.Second), 100, latency) {
		t.Error("a firing past the window kept out")
	}
	l := tr.level(control.Level{Users: 100, Evaluations: 1, Verdict: "unhealthy"}, nil)
	if l.KeptOut != 1 || !strings.Contains(l.Untrue, "the generator read its responses late: p99 80 ms after they arrived, past 50ms") {
		t.Errorf("level: %+v", l)
	}
}
