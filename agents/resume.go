package agents

// An agent's side of a stream that broke mid-run: dialing again within
// the coordinator's lease, taking its place up on the new stream, and
// sending again what the old one lost.

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// resumeEvery is how often an agent whose stream broke dials again.
const resumeEvery = 250 * time.Millisecond

// resume dials the coordinator again after the stream broke (cause), for
// the lease the coordinator gave, and takes this agent's place up again on
// the new stream: its users ran on meanwhile, and every snapshot not
// acknowledged is sent again, in order (the coordinator takes each number
// once). It returns cause, its users to be stopped, when the agent cannot
// resume: no Redial, the lease passed, or the coordinator refused (it lost
// the agent already: the agent may join again as a new one, Retry).
func (a *agent) resume(ctx context.Context, cause error) error {
	if a.opt.Redial == nil || a.session == "" || a.lease <= 0 {
		return cause
	}
	deadline := time.Now().Add(a.lease)
	for {
		err := a.redial(ctx, deadline)
		switch {
		case err == nil:
			return a.catchUp()
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrRefused):
			return fmt.Errorf("%w; resuming its place was refused: %v", cause, err)
		}
		wait := min(resumeEvery, time.Until(deadline))
		if wait <= 0 {
			return fmt.Errorf("%w; it could not resume within its lease (%v): %v", cause, a.lease, err)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// redial opens a new stream and resumes on it, or gives it up at deadline.
func (a *agent) redial(ctx context.Context, deadline time.Time) error {
	sctx, hang := context.WithCancel(ctx)
	s, err := a.opt.Redial(sctx)
	if err != nil {
		hang()
		return err
	}
	late := time.AfterFunc(time.Until(deadline), hang) // a handshake that hangs ends with the lease
	h := a.hello
	h.Resume = a.session
	_, s, err = Greet(s, a.opt.Token, h)
	if !late.Stop() && err == nil {
		err = errors.New("resumed past its lease")
	}
	if err != nil {
		hang()
		return err
	}
	a.attach(s, hang)
	return nil
}

// catchUp sends, on a stream just resumed, every snapshot not yet
// acknowledged, in order, then what follows a snapshot (tell; Done
// last): what the old stream lost, and the tick answered, for the
// coordinator's Drain.
func (a *agent) catchUp() error {
	for _, f := range a.out.unacked() {
		if f.Kind != KindSnapshot {
			continue
		}
		if err := a.send(f); err != nil {
			return err
		}
	}
	return a.tell()
}
