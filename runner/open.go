package runner

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// Open is the open model of a bounded run (issue 14, docs/OPEN.md):
// arrivals at Rate, each one action run by a user of a bounded pool,
// whatever the target does. The pool's PreUsers are set up first, as a
// closed run's users are (their logins in no figure); the measured
// window begins once they are, and the schedule with it; it lasts as
// long as Rate (the sum of its stages).
type Open struct {
	Rate     engine.Rate    // arrivals per second over time; every stage of finite duration
	Arrivals engine.Spacing // evenly spaced or Poisson
	MaxUsers int            // the pool's bound, >= 1
	// PreUsers are set up before the window, 0..MaxUsers; the pool adds
	// the rest on demand, when arrivals find no user free (and drops
	// those, with MaxWait 0).
	PreUsers int
	// MaxWait is how long an arrival may wait for a user to come free
	// before it is dropped; 0 drops it at once (k6's rule).
	MaxWait time.Duration
	// Connections, if above 0, is how many keep-alive connections the
	// pool's users share (engine.OpenModel.Connections); 0: each its own.
	Connections int
}

// check refuses what the engine would, with the flags' words.
func (o *Open) check() error {
	if _, err := engine.NewSchedule(o.Rate, o.Arrivals, 0); err != nil {
		return fmt.Errorf("rate: %v", err)
	}
	switch l := o.Rate.Length(); {
	case l <= 0:
		return fmt.Errorf("rate: the schedule lasts %v: give it a duration", l)
	case l == engine.Forever:
		return fmt.Errorf("rate: a bounded run needs a schedule of finite duration")
	}
	return o.pool().check()
}

// pool is o's pool of users, as a step or ceiling run of the open model
// has one.
func (o *Open) pool() *OpenLevels {
	return &OpenLevels{Arrivals: o.Arrivals, MaxUsers: o.MaxUsers, PreUsers: o.PreUsers, MaxWait: o.MaxWait, Connections: o.Connections}
}

// config is o as the result records it.
func (o *Open) config() *result.RateConfig {
	c := o.pool().config(o.Rate.Start, o.Rate.Peak())
	for _, st := range o.Rate.Stages {
		c.Stages = append(c.Stages, result.RateStage{TargetPerSecond: st.Target, DurationS: st.Duration.Seconds()})
	}
	return c
}

// DefaultMaxUsers is the pool a rate gets unless told otherwise: enough
// users for every arrival of the peak rate to take up to a second from
// its start to its end (Little's law: users busy = rate × time each), and
// at least 10. A target slower than that, or stalled for longer, drops
// arrivals (counted) rather than hiding the stall; raise --max-users to
// see how long it really takes.
func DefaultMaxUsers(peak float64) int {
	return max(10, int(math.Ceil(peak*defaultBusy.Seconds())))
}

// defaultBusy is how long DefaultMaxUsers lets each arrival take.
const defaultBusy = time.Second

// startOpen puts the run's fleet in the open model. The schedule starts
// when the window begins (beginOpen).
func (r *boundedRun) startOpen() error {
	o := r.Open
	if err := r.s.eng.StartOpen(o.pool().model()); err != nil {
		return err
	}
	r.s.think = 0 // arrivals, not think times
	sc, err := engine.NewSchedule(o.Rate, o.Arrivals, r.s.c.Seed)
	if err != nil {
		return err
	}
	r.schedule = sc
	return nil
}

// beginOpen starts the schedule: from now on arrivals are due.
func (r *boundedRun) beginOpen(now time.Time) error {
	r.paced = now
	return r.s.eng.SetPacer(r.schedule)
}

// openTail is how long past the schedule's end an open run's window
// lasts: the schedule starts a moment after the window (its first tick's
// work), and its last arrivals, due just before its end, may start a
// little late; without it they would land after the window. No arrival
// is due in it, so the rates are over the schedule's length (finish).
const openTail = 100 * time.Millisecond

// tail is how long the window lasts past Duration: openTail for the open
// model, nothing for the closed one.
func (r *boundedRun) tail() time.Duration {
	if r.Open == nil {
		return 0
	}
	return openTail
}

// rateAt is the rate the schedule asks for at now, arrivals per second;
// 0 before the window and for the closed model.
func (r *boundedRun) rateAt(now time.Time) float64 {
	if r.Open == nil || r.paced.IsZero() {
		return 0
	}
	return r.Open.Rate.At(now.Sub(r.paced))
}

// perSecond is n over d, per second; 0 over no time.
func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// finishOpen fills the open model's figures of the result: the arrivals
// and the service times over the window (win long), and a note when
// arrivals were dropped or started late.
func (r *boundedRun) finishOpen(win time.Duration) {
	res := r.s.res
	intended := 0.0
	if win > 0 {
		intended = r.schedule.Expected(win) / win.Seconds()
	}
	res.Arrivals = result.ArrivalsOf(r.steady, win, intended)
	res.ServiceTimes = result.ServiceTimesOf(r.steady, win)
	if note := arrivalsNote(res.Arrivals, r.Open); note != "" {
		res.Notes = append(res.Notes, note)
	}
	if note := latenessShare(res.Arrivals, res.Totals, res.ServiceTimes); note != "" {
		res.Notes = append(res.Notes, note)
	}
}

// latenessShare says, when the generator's own lateness is a visible
// share of the latency from the intended start (a tenth of its p99 or
// more, a millisecond at least), both figures and the service time's: a
// user reading that p99 would blame the server for the generator's delay.
// "" otherwise.
func latenessShare(a *result.Arrivals, latency metrics.Summary, service *result.ServiceTimes) string {
	if a == nil || service == nil || latency.P99Ms <= 0 || a.Lateness.P99Ms < 1 || a.Lateness.P99Ms < 0.1*latency.P99Ms {
		return ""
	}
	return fmt.Sprintf("the generator's own lateness is %.0f%% of the latency's p99: arrivals started up to %.1f ms late (p99) where the latency from the intended start has p99 %.1f ms; "+
		"the service time from the actual send, the target's part, has p99 %.1f ms. Read the service time for the target's latency, "+
		"or give headroom more CPU (fewer arrivals a core) for a latency that is the target's alone",
		100*a.Lateness.P99Ms/latency.P99Ms, a.Lateness.P99Ms, latency.P99Ms, service.Totals.P99Ms)
}

// arrivalsNote says what the arrivals that did not start as scheduled
// mean, or "".
func arrivalsNote(a *result.Arrivals, o *Open) string {
	if a == nil {
		return ""
	}
	var parts []string
	if a.Dropped > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d arrivals (%.1f%%) were dropped: no user of the pool (--max-users %d) was free within --max-wait %v. "+
			"At %.4g/s a pool of %d keeps up while each arrival takes %s or less on average (users busy = rate × time each); "+
			"the target took longer, or stalled: raise --max-users to measure how long",
			a.Dropped, a.Intended, a.DroppedPct, o.MaxUsers, o.MaxWait, o.Rate.Peak(), o.MaxUsers, time.Duration(float64(o.MaxUsers)/o.Rate.Peak()*float64(time.Second)).Round(time.Millisecond)))
	}
	if a.Late > 0 && float64(a.Late) > 0.01*float64(a.Started) {
		parts = append(parts, fmt.Sprintf("%d of %d arrivals started more than %g ms late (p99 %.1f ms, max %.1f ms): headroom's CPU or a wait for a free user held the schedule up; their lateness is in their latency from the intended start",
			a.Late, a.Started, a.LateAfterMs, a.Lateness.P99Ms, a.Lateness.MaxMs))
	}
	return strings.Join(parts, "; ")
}
