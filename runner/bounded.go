// Package runner drives runs: it owns the clock of a run, tells the engine
// how many users to run (or, in the open model, at what rate arrivals
// come), collects the metrics every second and writes the result. A
// bounded run is a fixed number of users, reached by a linear ramp, held
// for a duration, or a rate held or ramped for its stages (Bounded.Open);
// a ceiling run lets a controller choose the user count from health
// checks.
package runner

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/headroom-dev/headroom/analysis"
	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/serverstats"
)

// Bounded configures a bounded run.
type Bounded struct {
	Common
	Users    int           // > 0
	Ramp     time.Duration // users are added linearly over the ramp
	Duration time.Duration // how long all users are held once set up; the measured window
	// SetupTimeout is how long after the ramp the window waits for every
	// user to finish setup; past it the window begins without the rest,
	// and the result says so. Default 1 minute.
	SetupTimeout time.Duration
	// Open, if set, makes the run one of the open model: arrivals at its
	// rate on a pool of users, for as long as its stages last. Users,
	// Ramp and Duration are then not used.
	Open *Open
}

// Run runs until the duration is over or ctx is done, and returns the
// result (also written to Out). A cancelled ctx gives an "interrupted"
// result with what ran, not an error. A panic in a goroutine of the run
// stops it with a "stopped" result and an *engine.PanicError; a result
// Out cannot take gives a *WriteError (see Common.FallbackDir).
//
// The measured window begins as soon as, after the ramp, every user has
// finished setup (or SetupTimeout after the ramp, with a
// note) and lasts the duration (or until the interrupt). What ended
// before it is counted apart (result.RampTotals), as is what ended after
// it while users finished their actions within the grace period
// (result.StoppingTotals); setup's own requests are in none of these but
// in result.Setup.
func (b *Bounded) Run(ctx context.Context) (*result.Result, error) {
	users := b.Users
	if b.Open != nil {
		if err := b.Open.check(); err != nil {
			return nil, err
		}
		// The window is the schedule; the pool's users set up before it
		// are what the window waits for, as a ramp's users are.
		users, b.Ramp, b.Duration = b.Open.PreUsers, 0, b.Open.Rate.Length()
	} else if users <= 0 {
		return nil, fmt.Errorf("users must be at least 1, got %d", b.Users)
	}
	if b.SetupOnly {
		if b.Open != nil {
			return nil, fmt.Errorf("setup only: the open model's users are its pool, set up on demand; measure setups with users (closed model)")
		}
		b.Duration = 0 // the run ends once every user is set up: what it measures is how fast
	}
	s, err := b.open(ctx, "run")
	if err != nil {
		return nil, err
	}
	res := s.res
	res.Config.Users, res.Config.RampS, res.Config.DurationS, res.Config.Model = b.Users, b.Ramp.Seconds(), b.Duration.Seconds(), result.ModelClosed
	res.Config.SetupOnly = b.SetupOnly
	if b.SetupTimeout <= 0 {
		b.SetupTimeout = time.Minute
	}
	r := &boundedRun{Bounded: b, s: s, users: users, total: b.Ramp + b.Duration, prev: s.start, started: s.mark(s.start),
		ramp: metrics.NewSnapshot(), steady: metrics.NewSnapshot(), draining: metrics.NewSnapshot(), sofar: metrics.NewStat()}
	if b.Open != nil {
		res.Config.Users, res.Config.Model, res.Config.Rate = 0, result.ModelOpen, b.Open.config()
		if b.Open.Connections > 0 {
			res.Config.Connections = sharedConnections(b.Open.Connections)
		}
		if err := r.startOpen(); err != nil {
			s.stop()
			return nil, err
		}
	}
	r.nextTick, r.nextSave = s.start.Add(b.Tick), s.start.Add(b.Save)
	return s.drive(r, min(b.Tick, 100*time.Millisecond))
}

func (r *boundedRun) onTick(now time.Time) bool { return r.step(r.s.ctx, now) }

// stopping: the window ends here, with the duration or the interrupt, and
// what finished since the last tick is its last part; no arrival comes
// while the pool stops (an interrupt comes before the schedule's end).
func (r *boundedRun) stopping(end time.Time, status string) string {
	r.end = end
	want, phase := r.want(end)
	r.tick(context.Background(), end, want, phase)
	r.s.publish(Tick{Elapsed: time.Since(r.s.start), Users: r.s.eng.Users(), Run: &RunTick{Total: r.total, Phase: "stopping"}})
	if r.Open != nil {
		_ = r.s.eng.SetPacer(nil)
	}
	return status
}

// finish closes the window's figures; what finished while stopping is
// stopping_totals'.
func (r *boundedRun) finish(status string) ending {
	s := r.s
	r.draining.Merge(s.interval)
	r.finishWindow(status)
	end := r.end
	return ending{
		phases: r.profilePhases(end),
		failed: func() string {
			switch {
			case status == result.Interrupted && r.steady.Start.IsZero():
				s.res.Notes = append(s.res.Notes, "interrupted during the ramp or setup: the measured window is empty; ramp_totals has what ran")
			case status == result.Completed && r.SetupOnly: // what it measures is setup
				return s.noneSetUp()
			case status == result.Completed:
				return s.nothingMeasured(r.steady, "in the measured window")
			}
			return ""
		},
		server: func() {
			s.server(r.from, s.mark(end))
			s.serverSetup(r.started, r.from)
		},
		write: r.write,
	}
}

// boundedRun is a bounded run in progress.
type boundedRun struct {
	*Bounded
	s                      *session
	users                  int               // the users the window waits for: Users, or the open model's PreUsers
	total                  time.Duration     // ramp + duration
	ramp, steady, draining *metrics.Snapshot // draining: what finished while the users stopped (stopping_totals)
	measured               time.Duration     // the seconds merged into steady
	holes                  bool              // degraded seconds were left out of the window
	nextTick, nextSave     time.Time
	from                   *serverstats.Mark // the server's state when the measured window began
	started                *serverstats.Mark // and when the run began: users' setup is started..from
	marked                 bool
	prev                   time.Time // the previous tick
	// window is when the measured window began (zero until then): the
	// first tick after the ramp with every user set up.
	window     time.Time
	setupShort string  // why the window began with users not set up, if it did
	setupPerS  float64 // users set up a second, from the start to the window (result.Setup.PerS)

	// The open model: the schedule, and when it began (the window's start).
	schedule      *engine.Schedule
	paced         time.Time
	dropped, late int64         // arrivals so far, for the ticks
	sofar         *metrics.Stat // the requests so far, for the ticks

	end time.Time // when the ticks ended: the window's end
}

// want is the users wanted at now, and the phase.
func (r *boundedRun) want(now time.Time) (int, string) {
	el := now.Sub(r.s.start)
	switch {
	case el < r.Ramp:
		return int(math.Ceil(float64(r.users) * el.Seconds() / r.Ramp.Seconds())), "ramp"
	case r.window.IsZero():
		return r.users, "setup"
	}
	return r.users, "steady"
}

// step runs every 100 ms or so; it returns false once the duration is over.
func (r *boundedRun) step(ctx context.Context, now time.Time) bool {
	if !r.window.IsZero() && now.Sub(r.window) >= r.Duration+r.tail() {
		return false
	}
	want, phase := r.want(now)
	if r.Open == nil {
		r.s.setUsers(want)
	} else if r.s.c.Prom != nil { // the pool adds its own users
		r.s.c.Prom.SetUsers(r.s.eng.Users())
	}
	// Read once: users may leave before the window begins (an agent
	// past its --max-memory removes its own), and the note must say why
	// the window began as it was judged.
	if ready := r.s.eng.Ready(); r.window.IsZero() && phase != "ramp" && (ready >= r.users || now.Sub(r.s.start) >= r.Ramp+r.SetupTimeout) {
		// The window begins now, on a tick of its own: what came before
		// is the ramp's.
		r.tick(ctx, now, want, phase)
		r.begin(now, ready)
		r.nextTick = now.Add(r.Tick)
		if r.Open != nil {
			if err := r.beginOpen(now); err != nil {
				r.s.abort(err)
				return false
			}
		}
	}
	if !now.Before(r.nextTick) {
		r.tick(ctx, now, want, phase)
		r.nextTick = r.nextTick.Add(r.Tick)
	}
	if !now.Before(r.nextSave) {
		r.finishWindow(result.Running)
		r.s.server(r.from, r.s.mark(now))
		r.s.serverSetup(r.started, r.from)
		r.s.checkpoint(r.write)
		r.nextSave = r.nextSave.Add(r.Save)
	}
	return true
}

// tick collects what users recorded since the previous tick and files it
// under the ramp or the window.
func (r *boundedRun) tick(ctx context.Context, now time.Time, want int, phase string) {
	s := r.s
	t := s.collect()
	p := t.Last
	if !r.window.IsZero() {
		if !r.marked { // the window began at the previous tick, with its scrape
			r.from, r.marked = s.mark(r.prev), true
		}
		if p.Degraded { // in s.degraded instead
			r.holes = true
		} else {
			r.steady.Merge(s.interval)
			r.measured += s.interval.End.Sub(s.interval.Start)
		}
	} else {
		if !p.Degraded { // else in s.degraded
			r.ramp.Merge(s.interval)
		}
		if el := now.Sub(s.start); el >= r.Ramp {
			r.total = el + r.Duration // at the earliest: the window has not begun
		}
	}
	s.scrape(ctx, now)
	r.prev = now
	r.dropped, r.late = r.dropped+p.Dropped, r.late+p.Late
	if s.c.OnTick != nil {
		tot := s.all.Total(metrics.Request, r.sofar)
		t.Elapsed, t.Want = now.Sub(s.start), want
		t.Run = &RunTick{Total: r.total, Phase: phase, Requests: tot.Count, Errors: tot.Errors, Timeouts: tot.Timeouts, Rate: r.rateAt(now),
			Started: perSecond(p.Arrivals, s.interval.End.Sub(s.interval.Start)), Dropped: r.dropped, Late: r.late}
		s.publish(t)
	}
}

// begin begins the measured window at now, with ready users set up:
// every user, or SetupTimeout has passed since the ramp without them
// (said in a note).
func (r *boundedRun) begin(now time.Time, ready int) {
	if ready < r.users {
		r.setupShort = fmt.Sprintf("only %d of %d users had finished setup %v after the ramp (--setup-timeout): the window began without the rest",
			ready, r.users, r.SetupTimeout)
	}
	r.window, r.total = now, now.Sub(r.s.start)+r.Duration
	r.setupPerS = float64(ready) / max(now.Sub(r.s.start).Seconds(), 1e-9)
}

func (r *boundedRun) write(w result.Writer, dir string) error {
	return w.Write(dir, r.s.res, withSetup(r.steady, r.s.all))
}

// finish fills the figures of the result from the snapshots.
func (r *boundedRun) finishWindow(status string) {
	s, res, steady := r.s, r.s.res, r.steady
	res.Status, res.EndedAt = status, time.Now()
	win := steady.End.Sub(steady.Start)
	if r.holes { // degraded seconds are not in it
		win = r.measured
	}
	if r.Open != nil {
		// The window ends a tail and up to a tick after the schedule's
		// end: time with no arrival, which would lower every rate.
		win = min(win, r.Duration)
	}
	if !steady.Start.IsZero() {
		res.Window = result.Window{Start: steady.Start.Sub(res.StartedAt).Seconds(), End: steady.End.Sub(res.StartedAt).Seconds(), Seconds: win.Seconds()}
	}
	scratch := metrics.NewStat()
	res.Totals = steady.Total(metrics.Request, scratch).Summarize("all requests", win)
	res.RampTotals = r.ramp.Total(metrics.Request, scratch).Summarize("ramp", r.ramp.End.Sub(r.ramp.Start))
	if !r.draining.Start.IsZero() {
		res.StoppingTotals = r.draining.Total(metrics.Request, scratch).Summarize("stopping", r.draining.End.Sub(r.draining.Start))
	}
	res.Requests = steady.Summaries(metrics.Request, win)
	res.Phases = result.PhasesOf(steady, win)
	res.Actions = steady.Summaries(metrics.Action, win)
	res.Connected = result.ConnectedOf(steady, win)
	res.Setup = setupOf(s.all, s.eng.Began(), res.EndedAt.Sub(res.StartedAt))
	if res.Setup != nil && r.Open == nil {
		res.Setup.PerS = r.setupPerS
	}
	res.Notes = s.notes()
	if note := unreadShare(res.Phases, res.Totals); note != "" {
		res.Notes = append(res.Notes, note)
	}
	if r.setupShort != "" {
		res.Notes = append(res.Notes, r.setupShort)
	}
	if r.Open != nil {
		r.finishOpen(win)
	} else {
		res.Omission = analysis.OmissionOf(steady, meanThink(s.c.Scenario))
	}
	if note := s.generator(steady); note != "" {
		res.Notes = append(res.Notes, note)
	}
	if note := s.namesNote(); note != "" {
		res.Notes = append(res.Notes, note)
	}
}

// profilePhases are the run's phases for the target's profiles: users'
// setup (the ramp, from the start to the window; all of a run that never
// reached its window), per user set up, and the window, per request.
func (r *boundedRun) profilePhases(end time.Time) []profilePhase {
	res := r.s.res
	var users int64
	if res.Setup != nil {
		users = res.Setup.Users
	}
	if r.window.IsZero() {
		return []profilePhase{{name: "setup", from: r.s.start, to: end, unit: "user set up", units: users}}
	}
	return []profilePhase{{name: "setup", from: r.s.start, to: r.window, unit: "user set up", units: users},
		{name: "window", from: r.window, to: end, unit: "request", units: res.Totals.Count}}
}
