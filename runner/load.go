package runner

import (
	"fmt"
	"time"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/result"
)

// OpenLevels makes a step or ceiling run one of the open model (step
// --rates, ceiling --open, docs/OPEN.md): its levels are arrival rates,
// whole arrivals per second, each a constant rate run on one pool of
// users set up before the first level.
type OpenLevels struct {
	Arrivals engine.Spacing // evenly spaced or Poisson
	MaxUsers int            // the pool's bound, >= 1
	PreUsers int            // set up before the first level, 0..MaxUsers
	MaxWait  time.Duration  // how long an arrival may wait for a free user; 0: dropped at once
	// Connections, if above 0, is how many keep-alive connections the
	// pool's users share; 0: each its own.
	Connections int
}

// check refuses a pool the engine would (engine.OpenModel.Check).
func (o *OpenLevels) check() error { return o.model().Check() }

// model is the engine's pool for o.
func (o *OpenLevels) model() engine.OpenModel {
	return engine.OpenModel{PreAllocated: o.PreUsers, MaxUsers: o.MaxUsers, MaxWait: o.MaxWait, Connections: o.Connections}
}

// config is o as the result records it, for levels from first to peak.
func (o *OpenLevels) config(first, peak float64) *result.RateConfig {
	return &result.RateConfig{PerSecond: first, PeakPerSecond: peak, Arrivals: o.Arrivals.String(), Stages: []result.RateStage{},
		MaxUsers: o.MaxUsers, PreUsers: o.PreUsers, MaxWaitS: o.MaxWait.Seconds(), Connections: o.Connections}
}

// sharedConnections is result.Config.Connections for n shared ones.
func sharedConnections(n int) string {
	return fmt.Sprintf("%d keep-alive shared by the pool's users", n)
}

// knob is what a step or ceiling run turns: users (the closed
// model) or an arrival rate (the open model). Both runners read a level
// as reached when applied() == started() == what they asked for.
type knob interface {
	set(n int)    // ask for n users, or n arrivals per second
	applied() int // users past setup; the rate, once the pool is set up
	started() int // users running (set up or not); the rate asked for
	unit() string // result.UnitUsers or result.UnitRate
}

// users is the closed model's knob: the session's users.
type users struct{ s *session }

func (u users) set(n int)    { u.s.setUsers(n) }
func (u users) applied() int { return u.s.eng.Ready() }
func (u users) started() int { return u.s.eng.Users() }
func (users) unit() string   { return result.UnitUsers }

// rates is the open model's knob: a constant rate on the session's
// pool. The first rate starts once the pool's PreUsers are set up (until
// then applied is 0, so the runners wait, as for users' setup); a higher
// rate replaces the schedule at once (engine.SetPacer). A lower one
// starts once the target has finished what it was holding: past its
// capacity the target queues requests, and at a rate just under it the
// queue would drain at only the difference, so the level would be judged
// on the backlog of the one before. Until then (at most drainMax) no
// arrival comes and applied is 0: the level is not reached yet.
type rates struct {
	s    *session
	o    *OpenLevels
	want int
	cur  int  // the rate the schedule runs; 0: none yet
	pool bool // the pool's PreUsers are set up
	// drained, while not zero: arrivals stopped for a lower rate at that
	// time, until no user of the pool is busy.
	drained time.Time
}

// drainMax bounds the wait for the target to finish what it holds before
// a lower rate (requests also end at --timeout).
const drainMax = 30 * time.Second

// openRates starts the session's pool for o.
// knobOf is the knob a step or ceiling run turns: its users, or with o
// the open model's rates on one pool of users (stop ends the schedule).
// On an error s is stopped.
func knobOf(s *session, o *OpenLevels) (ld knob, stop func(), err error) {
	if o == nil {
		return users{s}, func() {}, nil
	}
	r, err := openRates(s, o)
	if err != nil {
		s.stop()
		return nil, nil, err
	}
	return r, r.stop, nil
}

func openRates(s *session, o *OpenLevels) (*rates, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if err := s.eng.StartOpen(o.model()); err != nil {
		return nil, err
	}
	s.think = 0 // arrivals, not think times
	s.res.Config.Users, s.res.Config.Model = 0, result.ModelOpen
	if o.Connections > 0 {
		s.res.Config.Connections = sharedConnections(o.Connections)
	}
	return &rates{s: s, o: o}, nil
}

func (r *rates) set(n int) {
	r.want = n
	if r.s.c.Prom != nil { // the pool adds its own users
		r.s.c.Prom.SetUsers(r.s.eng.Users())
	}
	if !r.pool {
		if r.s.eng.Ready() < r.o.PreUsers {
			return
		}
		r.pool = true
	}
	if n == r.cur && r.drained.IsZero() {
		return
	}
	if n < r.cur && r.drained.IsZero() {
		if err := r.s.eng.SetPacer(nil); err != nil {
			r.s.abort(err)
			return
		}
		r.drained = time.Now()
	}
	if !r.drained.IsZero() {
		if busy(r.s.eng.Doing()) > 0 && time.Since(r.drained) < drainMax {
			return
		}
		r.drained, r.cur = time.Time{}, 0
	}
	var p engine.Pacer
	if n > 0 {
		// A seed of its own per rate: a Poisson level's arrivals are the
		// same whenever that rate is held, and differ between rates.
		sc, err := engine.NewSchedule(engine.Constant(float64(n), engine.Forever), r.o.Arrivals, r.s.c.Seed+uint64(n))
		if err != nil {
			r.s.abort(err)
			return
		}
		p = sc
	}
	if err := r.s.eng.SetPacer(p); err != nil {
		r.s.abort(err)
		return
	}
	r.cur = n
}

func (r *rates) applied() int {
	if !r.pool || !r.drained.IsZero() {
		return 0
	}
	return r.cur
}

func (r *rates) started() int { return r.want }
func (*rates) unit() string   { return result.UnitRate }

// stop ends the arrivals: none while the pool stops.
func (r *rates) stop() { _ = r.s.eng.SetPacer(nil) }

// busy is how many users are doing something (an action or a setup).
func busy(doing map[string]int) int {
	n := 0
	for _, k := range doing {
		n += k
	}
	return n
}
