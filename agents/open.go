package agents

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/headroom-dev/headroom/engine"
)

// The open model on agents (docs/OPEN.md, "On agents"):
//
//   - The pool is split by the running agents' cores (split): its bound,
//     its users set up in advance and its shared connections, each agent
//     at least one user (and one connection, if they are shared), so the
//     fleet may hold a few more than asked. An agent's share only grows
//     (engine.GrowOpen).
//   - Every agent runs the same schedule, and takes its share of the
//     arrivals by a repeating pattern (pattern: by cores, highest
//     averages): numbering the schedule's arrivals from an anchor, of every
//     cycle of them the agent takes those at its positions (engine.Stride).
//     The union of the agents' arrivals is the schedule's, each once.
//   - Each agent starts its share when its frame arrives, so agents'
//     clocks differ by the frames' transit, a few milliseconds on a LAN:
//     an arrival may start that much early or late against the
//     coordinator's clock (and its latency from the intended start is
//     the agent's).
//   - When the running agents change (one lost, or a late one that took a
//     lost one's place), the pool's shares are given again (a survivor's
//     grows by its part of the lost one's) and the arrivals are dealt
//     again among the running agents, from the arrival due then, with
//     the schedule's time carried on (an offset since it began: a ramp is
//     not restarted, and arrivals due before are not replayed). The lost
//     agent's arrivals from its loss until then are lost with it, in
//     seconds the fleet marks degraded.

// pacing is the schedule the agents run between them, as the coordinator
// keeps it.
type pacing struct {
	spec  Pacer     // the schedule's description, with no share
	began time.Time // when SetPacer started it: agents' offsets count from here

	mu sync.Mutex       // sc's: Index draws a Poisson schedule's gaps
	sc *engine.Schedule // the coordinator's own copy, for Index

	// The last deal, under Coordinator.mu: numbering the schedule's
	// arrivals from anchor, of every cycle each agent's positions.
	dealt  bool
	anchor int64
	cycle  int64
	pos    map[*remote][]int64
}

func newPacing(sc *engine.Schedule) (*pacing, error) {
	p := &pacing{spec: schedulePacer(sc)}
	own, err := p.spec.schedule() // not sc: its runner may read it meanwhile
	if err != nil {
		return nil, err
	}
	p.sc = own
	return p, nil
}

// index is the number of the schedule's first arrival due at offset or later.
func (p *pacing) index(offset time.Duration) int64 {
	if offset <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sc.Index(offset)
}

// deal shares the schedule's arrivals among agents of the given weights
// (0: none) from the first due at offset into it on: one Pacer each,
// the pattern anchored at that arrival. It returns the anchor too.
func (p *pacing) deal(weights []int, offset time.Duration) (anchor, cycle int64, out []Pacer) {
	anchor = p.index(offset)
	cycle, pos := pattern(weights)
	for i := range weights {
		out = append(out, p.share(anchor, cycle, pos[i], anchor, offset))
	}
	return anchor, cycle, out
}

// share is one agent's Pacer.
func (p *pacing) share(anchor, cycle int64, pos []int64, from int64, offset time.Duration) Pacer {
	s := p.spec
	s.Anchor, s.Cycle, s.Positions, s.From, s.Offset = anchor, cycle, pos, from, offset
	return s
}

// offset is how far into the schedule it is at now.
func (p *pacing) offset(now time.Time) time.Duration { return max(now.Sub(p.began), 0) }

// StartOpen gives each running agent its share of m's pool (by cores,
// pools), which it starts (engine.StartOpen). It refuses a model the
// engine would, and agents of a headroom that predates the open model
// (Hello.Proto).
func (f *Fleet) StartOpen(m engine.OpenModel) error {
	if err := m.Check(); err != nil {
		return err
	}
	c := f.c
	c.mu.Lock()
	if f.model != nil {
		c.mu.Unlock()
		return errors.New("open model: started already")
	}
	var old []string
	for _, r := range c.remotes {
		if r.running() && r.hello.Proto < protoOpen {
			old = append(old, fmt.Sprintf("%s (headroom %s)", r, r.hello.Version))
		}
	}
	if len(old) > 0 {
		c.mu.Unlock()
		return fmt.Errorf("the open model does not run on %s: its headroom predates the open model on agents; upgrade it", strings.Join(old, ", "))
	}
	f.model = &m
	pooled := f.pools()
	c.mu.Unlock()
	f.reshape(pooled, false)
	return nil
}

// SetPacer starts p's schedule now on every running agent, each its share
// of the arrivals (by cores, pattern), in place of any other; nil stops
// the arrivals. p must be an *engine.Schedule: agents are sent its
// description (Rate, Spacing, Seed) and make it again.
func (f *Fleet) SetPacer(p engine.Pacer) error {
	var next *pacing
	if p != nil {
		sc, ok := p.(*engine.Schedule)
		if !ok {
			return fmt.Errorf("agents run an engine.Schedule's arrivals between them, not a %T's", p)
		}
		var err error
		if next, err = newPacing(sc); err != nil {
			return err
		}
	}
	c := f.c
	c.mu.Lock()
	if f.model == nil {
		c.mu.Unlock()
		return engine.ErrNotOpen
	}
	if next != nil {
		next.began = c.now()
	}
	f.pacing = next
	c.mu.Unlock()
	f.reshape(nil, true)
	return nil
}

// pools gives each running agent its share of the open model's pool, by
// cores, and returns those whose share changed, to be told. A share never
// shrinks (nor does an engine's pool): after a loss the survivors' shares
// are the whole pool's split among them, and an agent that takes a lost
// one's place gets its share of the whole besides. Each agent gets at
// least one user and, with shared connections, one connection; its
// connections are given once (a lost agent's do not move). c.mu held.
func (f *Fleet) pools() []*remote {
	m := f.model
	if m == nil {
		return nil
	}
	remotes := f.c.remotes
	weights := make([]int, len(remotes))
	for i, r := range remotes {
		if r.running() {
			weights[i] = r.hello.Cores
		}
	}
	bound, pre, conns := split(m.MaxUsers, weights), split(m.PreAllocated, weights), split(m.Connections, weights)
	var changed []*remote
	for i, r := range remotes {
		if weights[i] == 0 {
			continue
		}
		s := r.pool
		if s.MaxUsers == 0 { // its first share
			s = engine.OpenModel{MaxWait: m.MaxWait, Name: m.Name}
			if m.Connections > 0 {
				s.Connections = max(conns[i], 1)
			}
		}
		s.MaxUsers = max(s.MaxUsers, bound[i], 1)
		s.PreAllocated = max(s.PreAllocated, pre[i])
		if s != r.pool {
			r.pool = s
			changed = append(changed, r)
		}
	}
	return changed
}

// reshape sends the open model's frames: to each agent of pooled its
// share of the pool, then, if deal, to every running agent its share of
// the arrivals, dealt again among them by their cores from the arrival
// due now (stop, if no schedule runs). Calls are taken one at a time, so
// an agent's last frames are the last shares.
func (f *Fleet) reshape(pooled []*remote, deal bool) {
	f.shaping.Lock()
	defer f.shaping.Unlock()
	c := f.c
	c.mu.Lock()
	type out struct {
		r *remote
		k Kind
		v any
	}
	var sends []out
	for _, r := range pooled {
		sends = append(sends, out{r, KindOpen, openOf(r.pool)})
	}
	p := f.pacing
	var running []*remote
	var weights []int
	var offset time.Duration
	if deal {
		for _, r := range c.remotes {
			if r.running() && r.pool.MaxUsers > 0 && (p == nil || !p.dealt || p.pos[r] != nil || f.poolReady(r)) {
				running = append(running, r)
				weights = append(weights, r.hello.Cores)
			}
		}
		if p != nil && p.dealt {
			offset = p.offset(c.now())
		}
	}
	if deal && p != nil && p.dealt && len(running) == len(p.pos) && !slices.ContainsFunc(running, func(r *remote) bool { return p.pos[r] == nil }) {
		deal = false // the same agents: a deal again would only add its skew
	}
	c.mu.Unlock()
	if deal && p == nil {
		for _, r := range running {
			sends = append(sends, out{r, KindPacer, Pacer{Stop: true}})
		}
	}
	if deal && p != nil {
		anchor, cycle, shares := p.deal(weights, offset)
		c.mu.Lock()
		p.dealt, p.anchor, p.cycle, p.pos = true, anchor, cycle, map[*remote][]int64{}
		for i, r := range running {
			p.pos[r] = shares[i].Positions
		}
		c.mu.Unlock()
		for i, r := range running {
			sends = append(sends, out{r, KindPacer, shares[i]})
		}
	}
	for _, s := range sends {
		_ = s.r.send(s.k, s.v) // a broken stream shows in serve; an agent away is sent them again (catchUp)
	}
}

// poolReady reports whether r's share of the pool is set up. An agent
// that starts once the schedule runs (a late agent in a lost one's place)
// is dealt arrivals only then (dealIn): before, they would find no user
// free. c.mu held.
func (f *Fleet) poolReady(r *remote) bool {
	return r.pool.MaxUsers > 0 && r.status.Ready >= r.pool.PreAllocated
}

// dealIn deals the arrivals again when r, running with no share of them,
// has its share of the pool set up (a late agent). Called with each of its
// statuses.
func (f *Fleet) dealIn(r *remote) {
	f.c.mu.Lock()
	p := f.pacing
	waits := p != nil && p.dealt && p.pos[r] == nil && r.running() && f.poolReady(r)
	f.c.mu.Unlock()
	if waits {
		f.reshape(nil, true)
	}
}

// caughtUp is what an agent that resumed, r, is sent again of the open
// model: its share of the pool, and of the arrivals from the one due now
// (or stop). c.mu held; pacerOf, with it released, makes the pacer.
func (f *Fleet) caughtUp(r *remote) (open *Frame, pacerOf func() *Frame) {
	if f.model == nil || r.pool.MaxUsers == 0 {
		return nil, nil
	}
	open = frame(KindOpen, openOf(r.pool))
	p := f.pacing
	switch {
	case p == nil:
		return open, func() *Frame { return frame(KindPacer, Pacer{Stop: true}) }
	case !p.dealt || p.pos[r] == nil:
		return open, nil // not dealt to it yet: reshape will
	}
	anchor, cycle, pos, offset := p.anchor, p.cycle, p.pos[r], p.offset(f.c.now())
	return open, func() *Frame {
		return frame(KindPacer, p.share(anchor, cycle, pos, max(anchor, p.index(offset)), offset))
	}
}

// frame is v as a frame of kind k.
func frame(k Kind, v any) *Frame {
	body, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("agents: encoding a %s frame: %v", k, err)) // plain structs: never
	}
	return &Frame{Kind: k, Body: body}
}
