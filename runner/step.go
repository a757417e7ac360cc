package runner

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/headroom-dev/headroom/analysis"
	"github.com/headroom-dev/headroom/internal/rusage"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/serverstats"
)

// Step configures a step run: each level's user count in turn, held for
// Hold once every user of the level has finished setup and Settle has
// passed. Setup and settling are excluded from every figure; the result
// has one table per level and the knee (analysis.FindKnee).
type Step struct {
	Common
	Levels []int         // user counts, increasing, each at least 1; see CheckLevels
	Hold   time.Duration // measured window of each level; > 0
	// Settle starts once every user of a level is past setup; what is
	// recorded during it counts in no level. >= 0.
	Settle time.Duration
	// RampRate is how many users per second are added at most when a level
	// starts (logins are costly); 0 adds them all at once.
	RampRate float64
	// SetupTimeout is how long a level's users may take to finish setup
	// once the last of them has started; past it the run stops there, with
	// the levels held so far. Default 1 minute.
	SetupTimeout time.Duration
	Rule         result.KneeRule // zero: analysis.DefaultKneeRule()
	// Open, if set, makes it step --rates: Levels are arrival rates
	// (whole arrivals per second), each a constant rate on one pool of
	// users set up before the first level; RampRate does not apply.
	Open *OpenLevels
}

// DefaultStepSettle is a step level's settle time when none is given:
// 10 s, or a quarter of the hold if that is shorter.
func DefaultStepSettle(hold time.Duration) time.Duration { return min(10*time.Second, hold/4) }

// CheckLevels says what is wrong with a list of levels, if anything:
// there must be at least one, each at least 1 user, strictly increasing.
func CheckLevels(levels []int) error {
	if len(levels) == 0 {
		return fmt.Errorf("no levels: give the user counts to hold, in increasing order, e.g. 48,96,162,240")
	}
	for i, n := range levels {
		if n < 1 {
			return fmt.Errorf("level %d is %d users: each level must be at least 1 user", i+1, n)
		}
		if i > 0 && n <= levels[i-1] {
			return fmt.Errorf("levels must increase: %d comes after %d; write them in increasing order, e.g. 48,96,162,240", n, levels[i-1])
		}
	}
	return nil
}

func (st *Step) check() error {
	if err := CheckLevels(st.Levels); err != nil {
		return err
	}
	switch {
	case st.Hold <= 0:
		return fmt.Errorf("hold must be positive, got %v", st.Hold)
	case st.Settle < 0:
		return fmt.Errorf("settle must be 0 or more, got %v", st.Settle)
	case st.RampRate < 0 || math.IsNaN(st.RampRate) || math.IsInf(st.RampRate, 0):
		return fmt.Errorf("ramp rate must be 0 (all at once) or a positive number of users per second, got %g", st.RampRate)
	}
	return nil
}

// Run holds every level in turn, or until ctx is done, and returns the
// result (also written to Out, with a checkpoint every Save). A cancelled
// ctx gives an "interrupted" result with the levels held so far, the
// current one marked incomplete; not an error.
func (st *Step) Run(ctx context.Context) (*result.Result, error) {
	if err := st.check(); err != nil {
		return nil, err
	}
	if st.SetupTimeout <= 0 {
		st.SetupTimeout = time.Minute
	}
	rule := st.Rule
	if rule == (result.KneeRule{}) {
		rule = analysis.DefaultKneeRule()
	}
	s, err := st.open(ctx, "step")
	if err != nil {
		return nil, err
	}
	res := s.res
	res.Config.Users, res.Config.DurationS = st.Levels[len(st.Levels)-1], st.Hold.Seconds()
	ld, stopKnob, err := knobOf(s, st.Open)
	if err != nil {
		return nil, err
	}
	defer stopKnob()
	if st.Open != nil {
		st.RampRate = 0 // a rate is started at once
		res.Config.Rate = st.Open.config(float64(st.Levels[0]), float64(st.Levels[len(st.Levels)-1]))
	}
	res.Step = &result.Step{Unit: ld.unit(), Planned: slices.Clone(st.Levels), HoldS: st.Hold.Seconds(), SettleS: st.Settle.Seconds(), RampRate: st.RampRate}
	r := &stepRun{Step: st, s: s, ld: ld, rule: rule, excluded: metrics.NewSnapshot(), held: metrics.NewSnapshot(),
		nextTick: s.start.Add(st.Tick), nextSave: s.start.Add(st.Save)}
	r.begin(0, s.start)
	return s.drive(r, min(st.Tick, 100*time.Millisecond))
}

// onTick ramps the level's users at every tick and, each Tick, collects
// the second, moves through the levels, reports and checkpoints.
func (r *stepRun) onTick(now time.Time) bool {
	st, s := r.Step, r.s
	r.ramp(now)
	if now.Before(r.nextTick) {
		return true
	}
	for !r.nextTick.After(now) {
		r.nextTick = r.nextTick.Add(st.Tick)
	}
	t := s.collect()
	s.scrape(s.ctx, now)
	r.degraded = t.Last.Degraded
	done, more := r.advance(now)
	if s.c.OnTick != nil {
		s.publish(r.tick(now, t, done))
	}
	if !now.Before(r.nextSave) {
		r.finishLevels(result.Running)
		s.checkpoint(r.write)
		r.nextSave = r.nextSave.Add(st.Save)
	}
	return more
}

// stopping: a run its rule stopped is Stopped, and says so last.
func (r *stepRun) stopping(_ time.Time, status string) string {
	if status == result.Completed && r.stopped != "" {
		status = result.Stopped
	}
	r.s.publish(Tick{Elapsed: time.Since(r.s.start), Want: r.Levels[r.i], Users: r.s.eng.Users(), Step: &StepTick{Level: r.i, Phase: PhaseStopping}})
	return status
}

// finish closes the levels. What finished while stopping was started in
// the last window; like a level's in-flight requests at its end, it
// counts in no level.
func (r *stepRun) finish(status string) ending {
	r.exclude()
	r.finishLevels(status)
	return ending{
		phases: r.s.levelPhases(r.s.res),
		failed: func() string {
			if status != result.Completed && (status != result.Stopped || r.stopped == "") {
				return ""
			}
			return r.s.nothingMeasured(r.held, "in the held levels")
		},
		write: r.write,
	}
}

// stepRun is a step run in progress.
type stepRun struct {
	*Step
	s        *session
	ld       knob // users, or the open model's rate
	rule     result.KneeRule
	excluded *metrics.Snapshot // setup, settling, stopping: ramp_totals
	exclTime time.Duration
	held     *metrics.Snapshot // every level's held window
	degraded bool              // the last tick was degraded (Fleet.Degraded)
	levels   []*stepLevel      // begun so far; the last is the current one
	i        int               // index of the current level
	phase    string
	stopped  string
	// nextTick, nextSave: when the next second is collected, the next
	// checkpoint written.
	nextTick, nextSave time.Time
}

// stepLevel is one level as it runs.
type stepLevel struct {
	users      int
	prev       int       // users of the previous level, where a ramp starts
	start      time.Time // users first asked for
	allStarted time.Time // every user asked for (zero until then)
	settle     time.Time // every user past setup
	hold, end  time.Time // the held window
	snap       *metrics.Snapshot
	setup      *metrics.Snapshot // while its users were being added and set up: their setups' samples
	held       time.Duration
	cpu0, cpu  time.Duration
	complete   bool
	from, to   *serverstats.Mark // the server's state at the start and end of the hold (--scrape)
}

func (r *stepRun) cur() *stepLevel { return r.levels[r.i] }

// begin starts level i at now.
func (r *stepRun) begin(i int, now time.Time) {
	prev := 0
	if i > 0 {
		prev = r.Levels[i-1]
	}
	r.i, r.phase = i, PhaseStarting
	r.levels = append(r.levels, &stepLevel{users: r.Levels[i], prev: prev, start: now, snap: metrics.NewSnapshot(), setup: metrics.NewSnapshot()})
	r.ramp(now)
}

// ramp asks for the current level's users, at most RampRate a second
// more than the previous level's.
func (r *stepRun) ramp(now time.Time) {
	l := r.cur()
	want := l.users
	if r.RampRate > 0 {
		want = min(l.users, l.prev+int(math.Ceil(r.RampRate*now.Sub(l.start).Seconds())))
		want = max(want, l.prev+1)
	}
	r.ld.set(want)
	if r.ld.started() == l.users && l.allStarted.IsZero() {
		l.allStarted = now
	}
}

// exclude files the last interval under what no level counts.
func (r *stepRun) exclude() {
	r.excluded.Merge(r.s.interval)
	r.exclTime += r.s.interval.End.Sub(r.s.interval.Start)
}

// advance files the interval just collected and moves the current level
// through its phases. It returns the level that finished holding, if one
// did, and whether the run goes on.
func (r *stepRun) advance(now time.Time) (*stepLevel, bool) {
	s, l := r.s, r.cur()
	switch r.phase {
	case PhaseStarting:
		r.exclude()
		l.setup.Merge(&metrics.Snapshot{Setup: s.interval.Setup}) // the setups only
		ready := r.ld.applied()
		switch {
		case !l.allStarted.IsZero() && ready == l.users && r.ld.started() == l.users:
			l.settle, r.phase = now, PhaseSettling
			if r.Settle <= 0 {
				r.startHold(now)
			}
		case !l.allStarted.IsZero() && now.Sub(l.allStarted) > r.SetupTimeout:
			r.stopped = fmt.Sprintf("at %d users only %d had finished setup %v after the last one started, so the run stopped there: "+
				"is setup failing? The result's setup section has the errors", l.users, ready, r.SetupTimeout)
			if r.Open != nil {
				r.stopped = fmt.Sprintf("only %d of the pool's %d users had finished setup %v after it started, so the run stopped before its first rate: "+
					"is setup failing? The result's setup section has the errors", s.eng.Ready(), r.Open.PreUsers, r.SetupTimeout)
			}
			return nil, false
		}
	case PhaseSettling:
		r.exclude()
		if now.Sub(l.settle) >= r.Settle-r.Tick/2 {
			r.startHold(now)
		}
	case PhaseHolding:
		if !r.degraded { // else in s.degraded: the level is measured without it
			l.snap.Merge(s.interval)
			r.held.Merge(s.interval)
			l.held += s.interval.End.Sub(s.interval.Start)
		}
		l.end, l.cpu, l.to = s.interval.End, rusage.CPU()-l.cpu0, s.mark(now)
		if now.Sub(l.hold) >= r.Hold-r.Tick/2 {
			l.complete = true
			if r.i+1 == len(r.Levels) {
				return l, false
			}
			r.begin(r.i+1, now)
			return l, true
		}
	}
	return nil, true
}

func (r *stepRun) startHold(now time.Time) {
	l := r.cur()
	l.hold, l.cpu0, l.from, r.phase = now, rusage.CPU(), r.s.mark(now), PhaseHolding
}

// tick adds the step's part to the second's tick t: the level, its
// phase and time left, the level done at it.
func (r *stepRun) tick(now time.Time, t Tick, done *stepLevel) Tick {
	l := r.cur()
	x := &StepTick{Level: r.i, Phase: r.phase}
	t.Elapsed, t.Want, t.Users, t.Ready, t.Step = now.Sub(r.s.start), l.users, r.s.eng.Users(), r.s.eng.Ready(), x
	switch r.phase {
	case PhaseSettling:
		x.Left = max(0, r.Settle-now.Sub(l.settle))
	case PhaseHolding:
		x.Left = max(0, r.Hold-now.Sub(l.hold))
	}
	if done != nil {
		sl := r.summary(done)
		x.Done = &sl
	}
	return t
}

// summary reduces a level to its part of the result.
func (r *stepRun) summary(l *stepLevel) result.StepLevel {
	since := func(t time.Time) float64 { return t.Sub(r.s.start).Seconds() }
	out := result.StepLevel{Users: l.users, Complete: l.complete, StartS: since(l.start), SettleS: since(l.settle),
		Window:    result.Window{Start: since(l.hold), End: since(l.end), Seconds: l.held.Seconds()},
		Totals:    l.snap.Total(metrics.Request, metrics.NewStat()).Summarize("all requests", l.held),
		Requests:  l.snap.Summaries(metrics.Request, l.held),
		Actions:   l.snap.Summaries(metrics.Action, l.held),
		Connected: result.ConnectedOf(l.snap, l.held),
	}
	added := int64(l.users - l.prev)
	if r.Open != nil {
		out.Arrivals = result.ArrivalsOf(l.snap, l.held, float64(l.users))
		out.ServiceTimes = result.ServiceTimesOf(l.snap, l.held)
		added = 0 // the pool's users: set up before the first level, or on demand
		if l.prev == 0 {
			added = int64(r.Open.PreUsers)
		}
	} else {
		out.Omission = analysis.OmissionOf(l.snap, meanThink(r.s.c.Scenario))
	}
	if !l.settle.IsZero() && added > 0 {
		out.Setup = setupOf(l.setup, added, l.settle.Sub(l.start))
		if out.Setup != nil {
			out.Setup.PerS = float64(out.Setup.Users) / max(l.settle.Sub(l.start).Seconds(), 1e-9)
		}
	}
	if l.held > 0 {
		out.GeneratorCPUPercent = 100 * l.cpu.Seconds() / l.held.Seconds()
	}
	out.Lateness, out.Burstiness = result.LatenessOf(l.snap.Wakes), result.BurstinessOf(l.snap.Wakes)
	out.Untrue = analysis.Untrue(out.Lateness, out.Burstiness, r.s.think)
	if r.s.watch != nil && l.held > 0 {
		out.Server = r.s.watch.Windows(l.from, l.to)
	}
	return out
}

// finish fills the result from the levels held so far.
func (r *stepRun) finishLevels(status string) {
	res, sr := r.s.res, r.s.res.Step
	res.Status, res.EndedAt = status, time.Now()
	sr.Levels, sr.Stopped = sr.Levels[:0], r.stopped
	var win time.Duration
	var from, to *serverstats.Mark
	res.Window = result.Window{}
	for _, l := range r.levels {
		if l.held == 0 {
			continue
		}
		sl := r.summary(l)
		if len(sr.Levels) == 0 {
			res.Window.Start, from = sl.Window.Start, l.from
		}
		res.Window.End, to = sl.Window.End, l.to
		win += l.held
		sr.Levels = append(sr.Levels, sl)
	}
	res.Window.Seconds = win.Seconds()
	sr.Knee = analysis.FindKneeIn(sr.Levels, r.rule, sr.Unit)
	if len(sr.Levels) > 0 {
		r.s.server(from, to) // from the first hold to the end of the last: settling in between included
	}

	scratch := metrics.NewStat()
	res.Totals = r.held.Total(metrics.Request, scratch).Summarize("all requests", win)
	res.Requests = r.held.Summaries(metrics.Request, win)
	res.Phases = result.PhasesOf(r.held, win)
	res.Actions = r.held.Summaries(metrics.Action, win)
	res.Connected = result.ConnectedOf(r.held, win)
	res.RampTotals = r.excluded.Total(metrics.Request, scratch).Summarize("setup and settling", r.exclTime)
	res.Setup = setupOf(r.s.all, r.s.eng.Began(), res.EndedAt.Sub(res.StartedAt))

	res.Notes = r.s.notes()
	if note := r.s.generator(nil); note != "" {
		res.Notes = append(res.Notes, note)
	}
	if note := unreadShare(res.Phases, res.Totals); note != "" {
		res.Notes = append(res.Notes, note)
	}
	if note := r.s.namesNote(); note != "" {
		res.Notes = append(res.Notes, note)
	}
	cores := float64(res.Generator.GOMAXPROCS)
	for _, l := range sr.Levels {
		if l.Untrue != "" {
			res.Notes = append(res.Notes, fmt.Sprintf("at %s the load was not what headroom meant to send (%s): the level is left out of the knee",
				result.Amount(float64(l.Users), sr.Unit), l.Untrue))
		}
		if l.GeneratorCPUPercent > 90*cores {
			res.Notes = append(res.Notes, fmt.Sprintf("at %s headroom used %.0f%% of %.0f cores while holding: that level's latencies may be the generator's, not the target's",
				result.Amount(float64(l.Users), sr.Unit), l.GeneratorCPUPercent, cores))
		}
	}
	if r.stopped != "" {
		res.Notes = append(res.Notes, r.stopped)
	}
	if status == result.Interrupted {
		n := 0
		for _, l := range sr.Levels {
			if l.Complete {
				n++
			}
		}
		res.Notes = append(res.Notes, fmt.Sprintf("interrupted: %d of %d levels held completely; a level cut short has complete=false and is left out of the knee", n, len(r.Levels)))
	}
}

// write writes the result and the histograms of every level held into dir.
func (r *stepRun) write(w result.Writer, dir string) error {
	levels := map[int]*metrics.Snapshot{}
	for _, l := range r.levels {
		if l.held > 0 {
			levels[l.users] = l.snap
		}
	}
	return w.WriteStep(dir, r.s.res, withSetup(r.held, r.s.all), levels)
}
