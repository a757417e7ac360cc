package runner

import (
	"time"

	"github.com/headroom-dev/headroom/result"
)

// The one lifecycle of a run. Each kind (bounded.go, step.go, ceiling.go)
// checks its config, opens a session, sets its state value up and hands it
// to drive, which owns the rest: the server's profiles, the ticks, the
// outcome, the users stopped, the stop noted, a run that measured nothing
// failed, the server's figures and the result saved.

// runKind is one run kind's part of the lifecycle.
type runKind interface {
	// onTick is one tick of the run; false ends it.
	onTick(now time.Time) bool
	// stopping comes once the ticks end (at end), before the users stop:
	// a last tick, a last progress line. It returns the run's status,
	// which it may refine (a step run its rule stopped is Stopped).
	stopping(end time.Time, status string) string
	// finish closes the kind's figures once every user has stopped.
	finish(status string) ending
}

// ending is what a kind hands back once its users have stopped.
type ending struct {
	phases []profilePhase // what the server's profiles are split into
	// failed says why the run measured nothing ("" when it did, or when
	// the status does not ask); nil: nothing to check.
	failed func() string
	server func()                                  // the whole run's server figures; nil: none
	write  func(w result.Writer, dir string) error // the result's files
}

// drive runs k on s every `every` until it ends, then closes the run.
func (s *session) drive(k runKind, every time.Duration) (*result.Result, error) {
	prof := s.startProfiles()
	ticks(s.ctx, every, k.onTick)
	status, cause := s.outcome()
	status = k.stopping(time.Now(), status)
	s.stop()
	e := k.finish(status)
	s.profiles(prof, e.phases...)
	s.noteStop(cause)
	if e.failed != nil {
		if why := e.failed(); why != "" {
			s.markFailed(why)
		}
	}
	if e.server != nil {
		e.server()
	}
	return s.res, s.done(cause, s.save(e.write))
}
