package agents

// An agent's absences: its stream's end (leave), its lease (watch), its
// return on a new stream (resume), and its process's end (Exited).

import (
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// resume takes an agent that names its session (h.Resume) back into its
// place, on att, in place of the stream it was on (closed, if the
// coordinator had not seen it break). It refuses a session it does not
// know, a place lost or given up on, and one whose lease has passed: that
// agent is lost now, and returned as such. c.mu held.
func (c *Coordinator) resume(h Hello, att *attachment) (r *remote, w Welcome, lost *remote, err error) {
	for _, o := range c.remotes {
		if o.session == h.Resume {
			r = o
		}
	}
	now := c.now()
	switch {
	case r == nil || r.ended:
		return nil, Welcome{}, nil, errors.New("no agent of that session holds a place in this run: it was lost, or the run is another")
	case r.stopped():
		return nil, Welcome{}, nil, fmt.Errorf("the coordinator gave up on it: %v", r.why)
	case now.Sub(r.heard) > c.lease:
		if !r.away() { // the stalled stream's own handler ends it
			r.stop(fmt.Errorf("stalled: nothing heard from it for %v", now.Sub(r.heard).Round(100*time.Millisecond)))
			return nil, Welcome{}, nil, fmt.Errorf("nothing heard from it for its lease (%v): it is lost", c.lease)
		}
		c.end(r, c.expired(r), r.broke)
		return nil, Welcome{}, r, fmt.Errorf("it did not resume within its lease (%v): it is lost", c.lease)
	}
	if old := r.cur.Swap(att); old != nil {
		close(old.replaced) // a resume is the agent's word that that stream is gone
	}
	r.heard, r.broke = now, time.Time{}
	return r, Welcome{Index: r.index, Session: r.session, Lease: c.lease, Resumed: true}, nil, nil
}

// catchUp sends an agent that resumed, on att, what it may have missed
// while away: its share of users, the last tick's flush if it has not
// answered it, the stop if the run is stopping. Each says a state, so one
// lost or sent twice changes nothing. att.mu held: nothing is sent to the
// agent meanwhile that this could overtake.
func (c *Coordinator) catchUp(r *remote, att *attachment) error {
	c.mu.Lock()
	var out, then []*Frame
	var pacer func() *Frame
	if f := c.fleet; f != nil && !r.sent.IsZero() {
		out = append(out, frame(KindUsers, Users{N: r.want}))
		var open *Frame
		if open, pacer = f.caughtUp(r); open != nil {
			out = append(out, open)
		}
		if r.flushed < f.tick {
			then = append(then, frame(KindFlush, Flush{N: f.tick}))
		}
		if f.stopping {
			then = append(then, frame(KindStop, struct{}{}))
		}
	}
	c.mu.Unlock()
	if pacer != nil {
		out = append(out, pacer())
	}
	for _, f := range append(out, then...) {
		if err := att.s.Send(f); err != nil {
			return err
		}
	}
	return nil
}

// leave ends r's time on att, which ended with err (killed: the
// coordinator gave up on r). A connection that closed under an agent
// running users leaves it away, its users counted, for its lease: it may
// resume (checkLeases loses it if not). Anything else loses it now.
func (c *Coordinator) leave(r *remote, att *attachment, err error, killed bool) error {
	c.mu.Lock()
	if r.cur.Load() != att { // it resumed on another stream meanwhile, or ended
		c.mu.Unlock()
		return err
	}
	if !killed {
		if closed(err) && r.statusN > 0 && r.done == nil && r.exited == nil {
			r.cur.Store(nil)
			r.broke, r.err = c.now(), ended(err)
			c.notify()
			c.mu.Unlock()
			return err
		}
		err = ended(err)
		if r.done != nil && r.done.Leaving {
			err = errLeft
		}
		if r.exited != nil { // its launcher saw the process end first
			err = exitedErr(err, r.exited)
		}
	}
	c.end(r, err, c.now())
	c.mu.Unlock()
	c.tellLost(r)
	return err
}

// errLeft is why an agent that left during the run (Done.Leaving) ended.
var errLeft = errors.New("it left the run, told to stop (SIGTERM): its users stopped and every sample it recorded was delivered")

// end records that r ended at left, for why. c.mu held; tell the fleet
// (tellLost) once it is released.
func (c *Coordinator) end(r *remote, why error, left time.Time) {
	r.ended, r.err, r.left = true, why, left
	r.cur.Store(nil)
	c.notify()
}

// Exited tells the coordinator that the process of the agent named name
// has ended (a --local-agents child its launcher waited for), with why:
// it cannot resume, so it is lost as soon as its stream is gone, not at
// the end of its lease.
func (c *Coordinator) Exited(name string, why error) {
	c.mu.Lock()
	var lost []*remote
	for _, r := range c.remotes {
		if r.hello.Name != name || r.ended || r.done != nil {
			continue
		}
		r.exited = why
		if r.away() {
			c.end(r, exitedErr(r.err, why), r.broke)
			lost = append(lost, r)
		}
	}
	c.mu.Unlock()
	for _, r := range lost {
		c.tellLost(r)
	}
}

// exitedErr is why an agent whose process exited was lost: its stream's
// end (err), and the exit (why).
func exitedErr(err, why error) error { return fmt.Errorf("%v; its process exited (%v)", err, why) }

// tellLost tells the fleet, once the run has begun, that r ended.
func (c *Coordinator) tellLost(r *remote) {
	c.mu.Lock()
	f := c.fleet
	c.mu.Unlock()
	if f != nil {
		f.lost(r)
	}
}

// expired is why an agent away is lost at the end of its lease. c.mu held.
func (c *Coordinator) expired(r *remote) error {
	return fmt.Errorf("%v, and it did not resume within its lease (%v)", r.err, c.lease)
}

// newSession is a new agent's session: 128 random bits, in hex.
func newSession() string { return hex.EncodeToString(nonce()[:16]) }

// watch gives up on agents that outlive their lease, once a second.
func (c *Coordinator) watch() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-t.C:
			c.checkLeases(c.now())
		}
	}
}

// checkLeases loses every agent away past its lease at now, and stops the
// stream of every other agent silent past it, or sent Start startTimeout
// ago and not started.
func (c *Coordinator) checkLeases(now time.Time) {
	c.mu.Lock()
	var lost []*remote
	defer func() {
		c.mu.Unlock()
		for _, r := range lost {
			c.tellLost(r)
		}
	}()
	for _, r := range c.remotes {
		switch {
		case r.ended || r.done != nil:
		case r.away() && r.stopped():
			c.end(r, r.why, r.broke)
			lost = append(lost, r)
		case r.away() && now.Sub(r.heard) > c.lease:
			c.end(r, c.expired(r), r.broke)
			lost = append(lost, r)
		case r.statusN > 0 && now.Sub(r.heard) > c.lease:
			r.stop(fmt.Errorf("stalled: nothing heard from it for %v", now.Sub(r.heard).Round(100*time.Millisecond)))
		case r.statusN == 0 && !r.sent.IsZero() && now.Sub(r.sent) > startTimeout:
			r.stop(fmt.Errorf("did not start within %v of being sent the scenario", startTimeout))
		}
	}
}
