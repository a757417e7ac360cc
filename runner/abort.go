package runner

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/result"
)

// abort ends the run from inside headroom, for cause: the run's loop
// stops at its next turn, the users stop, and the result (status
// stopped) says why. The first cause wins. Safe from any goroutine.
func (s *session) abort(cause error) { s.cancel(cause) }

// recover, deferred in a goroutine the runner owns, turns a panic there
// into an abort with an *engine.PanicError.
func (s *session) recover(where string) {
	if p := recover(); p != nil {
		s.abort(&engine.PanicError{Where: where, Value: p, Stack: debug.Stack()})
	}
}

// outcome is the status of a run whose loop has ended, and the cause
// when headroom aborted it: stopped (aborted), interrupted (the caller's
// context ended), or completed.
func (s *session) outcome() (string, error) {
	cause := context.Cause(s.ctx)
	var pe *engine.PanicError
	var me *MemoryError
	switch {
	case errors.As(cause, &pe), errors.As(cause, &me):
		return result.Stopped, cause
	case s.parent.Err() != nil:
		return result.Interrupted, nil
	}
	return result.Completed, nil
}

// noteStop adds to the notes why headroom stopped the run, if it did.
func (s *session) noteStop(cause error) {
	var pe *engine.PanicError
	var me *MemoryError
	switch {
	case errors.As(cause, &pe):
		s.res.Notes = append(s.res.Notes, fmt.Sprintf("headroom stopped the run after an internal error, a bug in headroom (please report it with this note): %v", pe))
	case errors.As(cause, &me):
		s.res.Notes = append(s.res.Notes, me.Note())
	}
}

// done is what Run returns as its error besides the result: the internal
// error that stopped the run, if one did, and save's error.
func (s *session) done(cause, saved error) error {
	var pe *engine.PanicError
	if errors.As(cause, &pe) {
		return errors.Join(pe, saved)
	}
	return saved
}
