package agents

import (
	"fmt"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/result"
)

// An agent is lost when it is silent past its lease (stalled:
// Coordinator.checkLeases), when its stream breaks (its process died, its
// machine or the network went away) and it does not resume within that
// lease, or at once when the coordinator gives up on it. Its users then
// go to the agents still running, and the seconds from the loss until
// they are all set up again are degraded: the runners keep their figures
// apart (runner.Fleet's Degraded), since the lost agent's last seconds
// were never sent and its users were missing meanwhile (the seconds it
// was away before, its flushes unanswered, are degraded already). An
// agent that joins later takes the lost one's place (Coordinator.join)
// and a share of the users again; one that resumes in time loses nothing,
// and nothing about it is degraded but a second it did not answer in time.

// fault is one agent lost, and what the fleet did about it.
type fault struct {
	result.Fault
	at   time.Time
	need map[*remote]int // each running agent's share once the users moved
	seen map[*remote]int // its statuses then: the answer must be newer
	done bool            // every agent had set up its share again
}

// lost hears that r's stream ended. Unless the run is stopping or r had
// finished, its users are shared among the others and the seconds until
// they are set up again are degraded.
func (f *Fleet) lost(r *remote) {
	c := f.c
	c.mu.Lock()
	if f.stopping || (r.done != nil && !r.done.Leaving) || r.sent.IsZero() {
		c.mu.Unlock()
		return
	}
	why := "its stream ended"
	if r.err != nil {
		why = r.err.Error()
	}
	users := r.setUp()
	if r.done != nil { // it left (Done.Leaving): its share may have moved already
		users = r.leftWith
	}
	ft := &fault{Fault: result.Fault{T: r.left.Sub(f.began).Seconds(), Index: r.index, Name: r.hello.Name,
		Reason: why, Users: users}, at: r.left}
	r.want = 0
	changed, pooled := f.share(), f.pools()
	ft.need, ft.seen = map[*remote]int{}, map[*remote]int{}
	for _, o := range c.remotes {
		if o.running() {
			ft.need[o], ft.seen[o] = o.setUp(), o.statusN
		}
	}
	ft.To = len(ft.need)
	f.faults = append(f.faults, ft)
	f.open = ft
	open := f.model != nil
	c.mu.Unlock()
	for _, o := range changed {
		_ = o.send(KindUsers, Users{N: o.want})
	}
	if open { // its pool and its arrivals move too
		f.reshape(pooled, true)
	}
}

// setUp is how many users r is to have set up: its share of the closed
// model's users, or of the open model's pool set up in advance. c.mu held.
func (r *remote) setUp() int { return r.want + r.pool.PreAllocated }

// Degraded says why the samples of the last Drain are not the whole
// fleet's, or "": an agent was lost and its users are not yet all set up
// again elsewhere, or a running agent did not send its second in time
// (it may be stalling, and is lost at its lease). The runners call it
// once after each Drain.
func (f *Fleet) Degraded() string {
	c := f.c
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	var why []string
	if len(f.missed) > 0 {
		why = append(why, fmt.Sprintf("%s did not send its second within %v", strings.Join(f.missed, ", "), f.wait()))
	}
	if ft := f.open; ft != nil {
		why = append(why, fmt.Sprintf("agent %d (%s) lost at %.1f s: %s", ft.Index, ft.Name, ft.T, ft.Reason))
		if f.recovered(ft) {
			f.open = nil
			for _, o := range f.faults { // an earlier fault's users moved again with ft's
				if !o.done {
					o.done, o.RecoveredT = true, now.Sub(f.began).Seconds()
				}
			}
		}
	}
	return strings.Join(why, "; ")
}

// recovered reports whether every agent that took ft's users has said,
// since, that its share is set up. c.mu held.
func (f *Fleet) recovered(ft *fault) bool {
	if len(ft.need) == 0 {
		return false // no agent is left to take them
	}
	for r, n := range ft.need {
		if r.ended {
			continue // lost too: its own fault is open
		}
		if r.statusN <= ft.seen[r] || r.status.Ready < min(n, r.setUp()) {
			return false
		}
	}
	return true
}

// Stopped is why the run must stop, or nil: an agent's memory passed its
// --max-memory, and it cancelled its users (Status.Memory). The runners
// call it once a tick, and stop the run with it as one process's run
// stops with its own.
func (f *Fleet) Stopped() error {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	for _, r := range f.c.remotes {
		if m := r.status.Memory; m != nil {
			e := *m
			e.Agent = r.String()
			return &e
		}
	}
	return nil
}
