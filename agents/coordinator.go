package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/headroom-dev/headroom/metrics"
	starlarkjson "go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// Coordinator accepts agents on a gRPC listener (each proves the token;
// see Accept) and, once they have joined, drives them as one Fleet. An
// agent silent for its lease during the run, or whose stream breaks, is
// lost (faults.go); a new agent may then take its place.
type Coordinator struct {
	token []byte
	srv   *grpc.Server
	ln    net.Listener
	now   func() time.Time
	quit  chan struct{} // closed by Close: ends the lease watch

	mu      sync.Mutex
	remotes []*remote     // one per place: remotes[i] has index i
	gone    []*remote     // agents whose place another took, for the result
	changed chan struct{} // closed and replaced when an agent joins or leaves
	started bool          // the run began: an agent joins only in a lost one's place
	fleet   *Fleet        // once the run began: told of agents lost and joined
	// Lease is how long an agent that has started may stay silent (it
	// sends a status every second) before it is lost.
	lease time.Duration
	// OnJoin, if set, hears of each agent that joins, for the CLI.
	onJoin func(index int, h Hello)
}

// defaultLease: a stalled agent is noticed within 5 s.
const defaultLease = 5 * time.Second

// remote is one agent as its coordinator sees it.
type remote struct {
	index  int
	gen    int // 0 for a place's first agent, +1 for each that took it since
	hello  Hello
	s      Stream
	sendMu sync.Mutex // Stream.Send is not safe for concurrent use
	kill   chan struct{}
	killed sync.Once
	why    error // why kill was closed

	// Under Coordinator.mu:
	joined, heard, left time.Time
	sent                time.Time           // when it was sent Start (zero before)
	status              Status              // its last
	statusN             int                 // statuses received
	peak                int                 // most users it reported
	pending             *metrics.Snapshot   // merged since the last Drain
	total               *metrics.Stat       // every request it reported, for its figures
	families            []*dto.MetricFamily // its last Prometheus families (Start.Metrics)
	in                  inbox
	want                int
	done                *Done
	err                 error // why its stream ended
	ended               bool
}

func (r *remote) send(k Kind, v any) error {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	return send(r.s, k, v)
}

func (r *remote) ack(seq uint64) error {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	return r.s.Send(&Frame{Kind: KindAck, Seq: seq})
}

// stop ends r's stream with why: the coordinator gives up on it.
func (r *remote) stop(why error) {
	r.killed.Do(func() {
		r.why = why
		close(r.kill)
	})
}

// running reports whether r runs users for the run now: it has started,
// and neither ended nor finished. Under Coordinator.mu.
func (r *remote) running() bool { return r.statusN > 0 && !r.ended && r.done == nil }

func (r *remote) String() string { return fmt.Sprintf("agent %d (%s)", r.index, r.hello.Name) }

// Listen starts a coordinator on addr (host:port; port 0 picks one).
// creds may be nil: no TLS, for loopback (docs/AGENTS.md, "Security").
func Listen(addr string, token []byte, creds credentials.TransportCredentials) (*Coordinator, error) {
	if len(token) == 0 {
		return nil, errors.New("agents: an empty token")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	opts := ServerOptions()
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	c := &Coordinator{token: token, srv: grpc.NewServer(opts...), ln: ln, changed: make(chan struct{}),
		now: time.Now, quit: make(chan struct{}), lease: defaultLease}
	Register(c.srv, c.join)
	go c.srv.Serve(ln)
	go c.watch()
	return c, nil
}

// Addr is where the coordinator listens.
func (c *Coordinator) Addr() string { return c.ln.Addr().String() }

// OnJoin sets a function told of each agent that joins (its place, its
// hello), called with no lock held.
func (c *Coordinator) OnJoin(fn func(index int, h Hello)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onJoin = fn
}

// Close stops listening and ends every agent's stream.
func (c *Coordinator) Close() {
	c.mu.Lock()
	select {
	case <-c.quit:
	default:
		close(c.quit)
	}
	c.mu.Unlock()
	c.srv.Stop()
}

// notify wakes Await; c.mu held.
func (c *Coordinator) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// join is one agent's stream: the handshake, then its frames until it
// ends or the coordinator gives up on it.
func (c *Coordinator) join(s Stream) error {
	var r *remote
	var onJoin func(int, Hello)
	_, err := Accept(s, c.token, func(h Hello) (Welcome, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		h.Cores = max(h.Cores, 1)
		now := c.now()
		r = &remote{hello: h, s: s, pending: metrics.NewSnapshot(), total: metrics.NewStat(), kill: make(chan struct{}),
			joined: now, heard: now}
		if !c.started {
			r.index = len(c.remotes)
			c.remotes = append(c.remotes, r)
		} else {
			i := c.place(h.Name)
			if i < 0 {
				return Welcome{}, fmt.Errorf("%w: the run has all its %d agents; a place frees up when one is lost", ErrLater, len(c.remotes))
			}
			old := c.remotes[i]
			r.index, r.gen = i, old.gen+1
			c.gone = append(c.gone, old)
			c.remotes[i] = r
		}
		onJoin = c.onJoin
		c.notify()
		return Welcome{Index: r.index}, nil
	})
	if err != nil {
		return err
	}
	if onJoin != nil {
		onJoin(r.index, r.hello)
	}
	c.mu.Lock()
	f := c.fleet
	c.mu.Unlock()
	if f != nil {
		f.late(r) // the run has begun: start it
	}
	errc := make(chan error, 1)
	go func() { errc <- c.serve(r) }()
	select {
	case err = <-errc:
		err = ended(err)
	case <-r.kill:
		err = r.why // returning ends the stream, and so serve's Recv
	}
	c.mu.Lock()
	r.ended, r.err, r.left = true, err, c.now()
	f = c.fleet
	c.notify()
	c.mu.Unlock()
	if f != nil {
		f.lost(r)
	}
	return err
}

// place is the place a late agent takes: a lost agent's, the one of the
// same name first (a Kubernetes pod re-created), or -1. c.mu held.
func (c *Coordinator) place(name string) int {
	free := -1
	for i, r := range c.remotes {
		if !r.ended || r.done != nil {
			continue
		}
		if r.hello.Name == name {
			return i
		}
		if free < 0 {
			free = i
		}
	}
	return free
}

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

// checkLeases stops the stream of every agent silent past its lease at
// now, or sent Start startTimeout ago and not started.
func (c *Coordinator) checkLeases(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.remotes {
		switch {
		case r.ended || r.done != nil:
		case r.statusN > 0 && now.Sub(r.heard) > c.lease:
			r.stop(fmt.Errorf("stalled: nothing heard from it for %v", now.Sub(r.heard).Round(100*time.Millisecond)))
		case r.statusN == 0 && !r.sent.IsZero() && now.Sub(r.sent) > startTimeout:
			r.stop(fmt.Errorf("did not start within %v of being sent the scenario", startTimeout))
		}
	}
}

// serve takes r's frames: statuses, snapshots (merged once each and
// acknowledged), and its last word.
func (c *Coordinator) serve(r *remote) error {
	for {
		f, err := r.s.Recv()
		if err != nil {
			return err
		}
		switch f.Kind {
		case KindStatus:
			var st Status
			if err := json.Unmarshal(f.Body, &st); err != nil {
				return fmt.Errorf("%s: a bad status: %v", r, err)
			}
			c.mu.Lock()
			r.status, r.statusN, r.heard = st, r.statusN+1, c.now()
			r.peak = max(r.peak, st.Users)
			first, fl := r.statusN == 1, c.fleet
			c.notify()
			c.mu.Unlock()
			if first && fl != nil && st.Error == "" {
				fl.rebalance() // a late agent is ready for users
			}
			if st.Error != "" {
				return fmt.Errorf("%s: %s", r, st.Error)
			}
		case KindSnapshot:
			c.mu.Lock()
			r.heard = c.now()
			fresh, err := r.in.fresh(f)
			if fresh {
				_, err = metrics.MergeEncoded(f.Body, r.pending)
			}
			seq := r.in.merged
			c.mu.Unlock()
			if err != nil {
				return fmt.Errorf("%s: %v", r, err)
			}
			if err := r.ack(seq); err != nil {
				return err
			}
		case KindMetrics:
			mfs, err := metrics.DecodeFamilies(f.Body)
			if err != nil {
				return fmt.Errorf("%s: bad metrics: %v", r, err)
			}
			c.mu.Lock()
			r.families, r.heard = mfs, c.now()
			c.mu.Unlock()
		case KindDone:
			var d Done
			if err := json.Unmarshal(f.Body, &d); err != nil {
				return fmt.Errorf("%s: a bad done: %v", r, err)
			}
			c.mu.Lock()
			r.done, r.heard = &d, c.now()
			c.notify()
			c.mu.Unlock()
		default:
			return fmt.Errorf("%s: a %s frame", r, f.Kind)
		}
	}
}

// await waits until cond (called with c.mu held) is true, or ctx ends.
func (c *Coordinator) await(ctx context.Context, cond func() bool) error {
	for {
		c.mu.Lock()
		ok, changed := cond(), c.changed
		c.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Await waits until n agents have joined.
func (c *Coordinator) Await(ctx context.Context, n int) error {
	return c.await(ctx, func() bool { return len(c.remotes) >= n })
}

// toJSON is a Starlark value as JSON, as the scenario's json.encode writes it.
func toJSON(v starlark.Value) ([]byte, error) {
	s, err := starlark.Call(&starlark.Thread{Name: "shared"}, starlarkjson.Module.Members["encode"], starlark.Tuple{v}, nil)
	if err != nil {
		return nil, err
	}
	return []byte(string(s.(starlark.String))), nil
}

// Joined is how many agents have joined so far.
func (c *Coordinator) Joined() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.remotes)
}

// ended is why an agent's stream ended as people read it: a stream cut
// (the agent's process died, its machine or the network went away) shows
// here as a cancelled or unavailable call.
func ended(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF), errors.Is(err, context.Canceled),
		status.Code(err) == codes.Canceled, status.Code(err) == codes.Unavailable:
		return errors.New("its connection closed (its process ended, or the network failed)")
	}
	return err
}
