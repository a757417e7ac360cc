package runner

import (
	"time"

	"github.com/headroom-dev/headroom/control"
	"github.com/headroom-dev/headroom/health"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// Tick is one second of a run: the one event every watcher reads. The
// runner makes it as it collects the second (session.collect), when
// headroom's /metrics (Common.Prom) takes its users set up and its
// generator's lateness; the run's kind adds its own part once it has
// acted on the second (its phase, level, checks and decision), and hands
// it to Common.OnTick: the terminal's progress line and the live page
// (--ui). It is the run's own, read on its goroutine, valid during the
// call only: a watcher must not keep it, nor take long.
type Tick struct {
	Elapsed time.Duration // since the run began
	// Users are running, set up or setting up (the open model: the
	// pool's); Ready past setup; Want what the run asks for now, users
	// or, in the open model, arrivals a second.
	Users, Ready, Want int
	// Last is what the second held: users, requests, errors, timeouts,
	// latencies, arrivals, connections (the result's timeline point).
	Last metrics.Point
	// Interval is the second's figures, per name; Total its requests,
	// all names merged. nil in a tick that holds no second (a run
	// stopping).
	Interval *metrics.Snapshot
	Total    *metrics.Stat
	// Res is the result so far: the timeline, a ceiling's checks and
	// decisions, a step's levels done.
	Res *result.Result
	// Agents are the agents' figures now; nil without agents.
	Agents *result.Agents

	// The kind's own part: one of them, nil in the second collected as
	// the users stop (after the run's last progress).
	Run     *RunTick
	Step    *StepTick
	Ceiling *CeilingTick
}

// Stopping reports whether t says that the run's ticks are over and its
// users are finishing their actions (a tick that holds no second).
func (t Tick) Stopping() bool {
	return t.Run != nil && t.Run.Phase == "stopping" || t.Step != nil && t.Step.Phase == PhaseStopping
}

// RunTick is a bounded run's part of a tick.
type RunTick struct {
	Total time.Duration // the run's length as known now
	Phase string        // "ramp", "setup" (waiting for users to finish setup), "steady", "stopping"
	// The open model: the arrivals per second the schedule asks for now
	// (0 for the closed model) and those that started over the last
	// second; the arrivals dropped and started late so far.
	Rate, Started float64
	Dropped, Late int64
	// The requests so far, and those of them that failed and timed out.
	Requests, Errors, Timeouts int64
}

// Phases of a level, as StepTick reports them.
const (
	PhaseStarting = "starting" // users being added, or still in setup
	PhaseSettling = "settling" // every user set up; not measured yet
	PhaseHolding  = "holding"  // the measured window
	PhaseStopping = "stopping" // the run is over; users finish their actions
)

// StepTick is a step run's part of a tick.
type StepTick struct {
	Level int    // index of the current level in Step.Levels
	Phase string // PhaseStarting, PhaseSettling, PhaseHolding, PhaseStopping
	Left  time.Duration
	// Done is the level that finished holding at this tick, with its
	// figures; nil at other ticks.
	Done *result.StepLevel
}

// CeilingTick is a ceiling run's part of a tick: the second's verdicts.
type CeilingTick struct {
	// Applied is the load really applied: users past setup (the open
	// model: the rate running); Started those running, setting up or past
	// setup (the open model: the rate asked for). Tick.Want is the
	// controller's target.
	Applied, Started int
	Results          []health.Result // the checks', in Ceiling.Checks' order
	Decision         string          // non-empty when the controller changed course
	Estimate         control.Estimate
	Warning          string
}

// publish hands t, completed with what every tick carries, to the
// watchers (Common.OnTick).
func (s *session) publish(t Tick) {
	if s.c.OnTick == nil {
		return
	}
	t.Res = s.res
	if a, ok := s.eng.(agentsFleet); ok {
		t.Agents = a.Agents(s.degradedS)
	}
	s.c.OnTick(t)
}
