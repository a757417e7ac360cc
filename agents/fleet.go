package agents

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/metrics/wire"
)

// Fleet is the coordinator's agents as one runner.Fleet. Its Init runs
// the scenario's init here, with local, and starts every agent on start
// with what it returned; its figures are the agents' added up, and Drain
// merges their snapshots exactly (wire.MergeEncoded).
func (c *Coordinator) Fleet(local engine.Config, start Start) *Fleet {
	return &Fleet{c: c, local: local, start: start}
}

// Fleet drives a coordinator's agents; see Coordinator.Fleet.
type Fleet struct {
	c     *Coordinator
	local engine.Config // for init, and its recorder for init's samples
	start Start
	eng   *engine.Engine
	began time.Time // when Init sent Start: the run's agent-seconds count from here

	// Under c.mu:
	want      int               // the run's users
	stopping  bool              // Stop was called: an agent that ends is not lost
	faults    []*fault          // agents lost, in order
	open      *fault            // the fault whose users are not yet set up again
	tick      uint64            // Drains so far: the flush each asked for
	missed    []string          // running agents whose samples the last Drain did not get in time
	lateTicks int               // Drains that missed an agent's samples so
	model     *engine.OpenModel // the open model's whole pool (StartOpen); nil: the closed model
	pacing    *pacing           // the schedule the agents run (SetPacer); nil: none

	// shaping orders the open model's frames (reshape), so that each
	// agent's last are the last shares.
	shaping sync.Mutex

	// flushWait bounds the wait, in each Drain, for the agents' samples.
	flushWait time.Duration
}

// defaultFlushWait: an agent answers a flush in a round trip and the time
// to encode its second (~1 ms for 1,000 request names); one that takes
// longer is late, and its second is marked degraded.
const defaultFlushWait = 500 * time.Millisecond

// startTimeout bounds the wait for every agent to load the scenario.
const startTimeout = 60 * time.Second

func (f *Fleet) Init(ctx context.Context) error {
	f.eng = engine.New(f.local)
	if err := f.eng.Init(ctx); err != nil {
		return err
	}
	if v := f.eng.Shared(); v != nil {
		b, err := toJSON(v)
		if err != nil {
			return fmt.Errorf("init returned what agents cannot be sent (plain data only: dicts, lists, strings, numbers, bools, None): %v", err)
		}
		f.start.Shared = b
	}
	c := f.c
	c.mu.Lock()
	c.started, c.fleet, f.began = true, f, c.now()
	remotes := slices.Clone(c.remotes)
	f.start.Agents = len(remotes)
	f.start.Weights = nil
	for _, r := range remotes {
		r.sent = f.began
		f.start.Weights = append(f.start.Weights, r.hello.Cores)
	}
	c.mu.Unlock()
	if len(remotes) == 0 {
		return errors.New("no agent joined")
	}
	for _, r := range remotes {
		if err := r.send(KindStart, f.start); err != nil {
			return fmt.Errorf("%s: %v", r, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	err := c.await(ctx, func() bool {
		for _, r := range remotes {
			if r.statusN == 0 && !r.ended {
				return false
			}
		}
		return true
	})
	var failed []string
	c.mu.Lock()
	for _, r := range remotes {
		switch {
		case r.status.Error != "":
			failed = append(failed, fmt.Sprintf("%s: %s", r, r.status.Error))
		case r.ended:
			failed = append(failed, fmt.Sprintf("%s left: %v", r, r.err))
		case r.statusN == 0:
			failed = append(failed, fmt.Sprintf("%s did not start within %s", r, startTimeout))
		}
	}
	c.mu.Unlock()
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "\n"))
	}
	return err
}

// SetUsersBy shares n users among the running agents by their cores;
// they add their share in batches of their own.
func (f *Fleet) SetUsersBy(n, _ int) int {
	f.c.mu.Lock()
	f.want = n
	changed := f.share()
	f.c.mu.Unlock()
	for _, r := range changed {
		_ = r.send(KindUsers, Users{N: r.want}) // a broken stream shows in serve
	}
	return n
}

// share splits f.want among the running agents and returns those whose
// share changed, to be told. c.mu held.
func (f *Fleet) share() []*remote {
	remotes := f.c.remotes
	weights := make([]int, len(remotes))
	for i, r := range remotes {
		if r.running() {
			weights[i] = r.hello.Cores
		}
	}
	shares := split(f.want, weights)
	var changed []*remote
	for i, r := range remotes {
		if r.want != shares[i] && !r.ended {
			r.want = shares[i]
			changed = append(changed, r)
		}
	}
	return changed
}

// sum adds up what fn reads from the last status of each agent: those
// running now if live, else all that ever ran (counts since the start).
func (f *Fleet) sum(live bool, fn func(*Status) int64) int64 {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	var n int64
	for _, r := range f.all() {
		if !live || !r.ended {
			n += fn(&r.status)
		}
	}
	return n
}

// all is every agent that joined, those whose place another took
// included. c.mu held.
func (f *Fleet) all() []*remote { return append(slices.Clone(f.c.remotes), f.c.gone...) }

func (f *Fleet) Users() int   { return int(f.sum(true, func(s *Status) int64 { return int64(s.Users) })) }
func (f *Fleet) Ready() int   { return int(f.sum(true, func(s *Status) int64 { return int64(s.Ready) })) }
func (f *Fleet) Began() int64 { return f.sum(false, func(s *Status) int64 { return s.Began }) }
func (f *Fleet) SetUp() int64 { return f.sum(false, func(s *Status) int64 { return s.SetUp }) }
func (f *Fleet) Late() int64  { return f.sum(false, func(s *Status) int64 { return s.Late }) }

func (f *Fleet) Doing() map[string]int {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	out := map[string]int{}
	for _, r := range f.c.remotes {
		if r.ended {
			continue
		}
		for k, n := range r.status.Doing {
			out[k] += n
		}
	}
	return out
}

func (f *Fleet) Overflowed() bool {
	return f.sum(false, func(s *Status) int64 {
		if s.Overflowed {
			return 1
		}
		return 0
	}) > 0
}

// Drain asks every running agent for its samples (a flush at this tick,
// so the agents' second is the coordinator's), waits for them up to
// flushWait, and merges them, whatever else arrived since the last Drain,
// and init's samples, into into. An agent that did not answer in time
// makes the second degraded (Degraded); its samples come with a later one.
func (f *Fleet) Drain(into *metrics.Snapshot) {
	c := f.c
	c.mu.Lock()
	f.tick++
	n := f.tick
	var asked []*remote
	for _, r := range c.remotes {
		if r.running() {
			asked = append(asked, r)
		}
	}
	c.mu.Unlock()
	for _, r := range asked {
		_ = r.send(KindFlush, Flush{N: n}) // a broken stream shows in serve
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.wait())
	_ = c.await(ctx, func() bool {
		for _, r := range asked {
			if r.flushed < n && !r.ended {
				return false
			}
		}
		return true
	})
	cancel()

	f.local.Recorder.Drain(into)
	// The window is this process's clock's: the agents' samples are those
	// recorded up to this tick.
	start, end := into.Start, into.End
	defer func() { into.Start, into.End = start, end }()
	c.mu.Lock()
	f.missed = f.missed[:0]
	for _, r := range asked {
		if r.flushed < n && !r.ended {
			f.missed = append(f.missed, r.String())
		}
	}
	if len(f.missed) > 0 {
		f.lateTicks++
	}
	var encs [][]byte
	var from []*remote
	for _, r := range f.all() {
		for _, b := range r.pending {
			encs, from = append(encs, b), append(from, r)
		}
		r.pending = nil
	}
	c.mu.Unlock()
	_, errs := wire.MergeEncodedAll(encs, into)
	for i, err := range errs {
		if err != nil { // left out whole: the agent sends what recording never makes
			from[i].stop(fmt.Errorf("sent a snapshot headroom cannot merge: %v", err))
		}
	}
}

// Hold is not carried to agents yet (the wire has no message for it):
// their users act once set up. The command line refuses ceiling
// --warm-up with agents rather than warm up with load.
func (f *Fleet) Hold(bool) {}

// Abort asks every agent to stop adding users and remove them; in the
// open model, to start no more arrivals (its pool stays until Stop).
func (f *Fleet) Abort(string) {
	f.SetUsersBy(0, 0)
	f.c.mu.Lock()
	open := f.model != nil
	f.c.mu.Unlock()
	if open {
		_ = f.SetPacer(nil)
	}
}

// stopWait bounds the wait for agents' last snapshots beyond the grace period.
const stopWait = 15 * time.Second

// Stop stops every agent's users and waits for their last snapshots.
func (f *Fleet) Stop() {
	c := f.c
	c.mu.Lock()
	f.stopping = true
	remotes := slices.Clone(c.remotes)
	c.mu.Unlock()
	for _, r := range remotes {
		_ = r.send(KindStop, struct{}{})
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.local.Grace+stopWait)
	defer cancel()
	_ = c.await(ctx, func() bool {
		for _, r := range remotes {
			if r.done == nil && !r.ended {
				return false
			}
		}
		return true
	})
	// Then each agent hangs up once its last snapshots are acknowledged. A
	// coordinator that ended first could cut those acknowledgements off in
	// flight, and the agent, not knowing its figures arrived, exited 1 after
	// a completed run (seen once under the whole test command's load).
	ctx, cancel = context.WithTimeout(context.Background(), hangUpWait)
	defer cancel()
	_ = c.await(ctx, func() bool {
		for _, r := range remotes {
			if !r.ended {
				return false
			}
		}
		return true
	})
}

// hangUpWait bounds the wait for agents to hang up after their Done.
const hangUpWait = 5 * time.Second

// UsersByType adds up the agents' users by type, as their Done said.
func (f *Fleet) UsersByType() map[string]int {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	out := map[string]int{}
	for _, r := range f.all() {
		if r.done != nil {
			for k, n := range r.done.UsersByType {
				out[k] += n
			}
		}
	}
	return out
}

// late starts r, which joined once the run had begun, in a lost agent's
// place: with the run's scenario, and ids past its place's earlier ones.
// Its share of users comes with its first status (rebalance).
func (f *Fleet) late(r *remote) {
	f.c.mu.Lock()
	st := f.start
	st.From = r.gen * placeIDs
	r.sent = f.c.now()
	f.c.mu.Unlock()
	if err := r.send(KindStart, st); err != nil {
		r.stop(fmt.Errorf("could not be sent the scenario: %v", err))
	}
}

// rebalance shares the run's users again among the running agents (one
// has just started: a late agent in a lost one's place is ready for
// users); in the open model, the pool and the arrivals.
func (f *Fleet) rebalance() {
	f.c.mu.Lock()
	changed := f.share()
	pooled, open := f.pools(), f.model != nil
	f.c.mu.Unlock()
	for _, r := range changed {
		_ = r.send(KindUsers, Users{N: r.want})
	}
	if open {
		f.reshape(pooled, true)
	}
}

// Metrics is the sum of the agents' last Prometheus families: what one
// process running every user would expose (metrics.SumFamilies). A lost
// agent's counters and histograms stay in it (a sum must not fall back,
// or rate() sees a reset), its gauges do not: its connections are gone.
func (f *Fleet) Metrics() []*dto.MetricFamily {
	f.c.mu.Lock()
	sets := make([][]*dto.MetricFamily, 0, len(f.c.remotes))
	for _, r := range f.all() {
		if !r.ended {
			sets = append(sets, r.families)
			continue
		}
		var kept []*dto.MetricFamily
		for _, mf := range r.families {
			if mf.GetType() != dto.MetricType_GAUGE {
				kept = append(kept, mf)
			}
		}
		sets = append(sets, kept)
	}
	f.c.mu.Unlock()
	return metrics.SumFamilies(sets...)
}

// wait is how long a Drain waits for the agents' samples.
func (f *Fleet) wait() time.Duration {
	if f.flushWait > 0 {
		return f.flushWait
	}
	return defaultFlushWait
}
