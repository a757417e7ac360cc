package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/metrics/wire"
	starlarkjson "go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// Coordinator accepts agents on a gRPC listener (each proves the token;
// see Accept) and, once they have joined, drives them as one Fleet. An
// agent silent for its lease during the run is lost (faults.go); a new
// agent may then take its place. An agent whose stream breaks keeps its
// place for that lease, its users counted as running: it may resume on a
// new stream (Hello.Resume), and is lost only if it does not.
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

// remote is one agent as its coordinator sees it: one process in one
// place, over the streams it resumes on.
type remote struct {
	index   int
	gen     int // 0 for a place's first agent, +1 for each that took it since
	hello   Hello
	session string // Welcome.Session: what it names to resume
	// cur is the stream it is on; nil while it is away (its stream broke
	// and it has not resumed) and once it ended. Changed under
	// Coordinator.mu; read without it, to send.
	cur    atomic.Pointer[attachment]
	kill   chan struct{}
	killed sync.Once
	why    error // why kill was closed

	// Under Coordinator.mu:
	joined, heard, left time.Time
	broke               time.Time           // when its stream broke, while it is away
	sent                time.Time           // when it was sent Start (zero before)
	status              Status              // its last
	statusN             int                 // statuses received
	peak                int                 // most users it reported
	pending             [][]byte            // snapshots received since the last Drain, encoded
	families            []*dto.MetricFamily // its last Prometheus families (Start.Metrics)
	in                  inbox
	want                int
	pool                engine.OpenModel // its share of the open model's pool; zero before one
	flushed             uint64           // the last tick (Fleet.Drain) it sent its samples for
	done                *Done
	leftWith            int   // the users it was to have set up when it said it leaves (Done.Leaving)
	err                 error // why its stream ended
	ended               bool
	exited              error // its process ended (Exited): it cannot resume
}

// attachment is one stream an agent is on, until it ends or the agent
// resumes on another.
type attachment struct {
	s        Stream
	mu       sync.Mutex    // Stream.Send is not safe for concurrent use
	replaced chan struct{} // closed when the agent resumes on another stream
}

// errAway is a send to an agent whose stream broke and that has not
// resumed: what it missed is sent again when it does (catchUp).
var errAway = errors.New("its stream broke and it has not resumed yet")

func (r *remote) sendFrame(f *Frame) error {
	a := r.cur.Load()
	if a == nil {
		return errAway
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.s.Send(f)
}

func (r *remote) send(k Kind, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return r.sendFrame(&Frame{Kind: k, Body: body})
}

func (r *remote) ack(seq uint64) error { return r.sendFrame(&Frame{Kind: KindAck, Seq: seq}) }

// stop ends r's stream with why: the coordinator gives up on it.
func (r *remote) stop(why error) {
	r.killed.Do(func() {
		r.why = why
		close(r.kill)
	})
}

// running reports whether r runs users for the run now: it has started,
// and neither ended nor finished (an agent away runs them still). Under
// Coordinator.mu.
func (r *remote) running() bool { return r.statusN > 0 && !r.ended && r.done == nil }

// away reports whether r's stream broke and r has not resumed (nor been
// lost) yet. Under Coordinator.mu.
func (r *remote) away() bool { return !r.ended && r.cur.Load() == nil }

// stopped reports whether the coordinator gave up on r (stop).
func (r *remote) stopped() bool {
	select {
	case <-r.kill:
		return true
	default:
		return false
	}
}

func (r *remote) String() string { return fmt.Sprintf("agent %d (%s)", r.index, r.hello.Name) }

// Listen starts a coordinator on addr (host:port; port 0 picks one).
// creds may be nil: no TLS, for loopback (docs/AGENTS.md, "Security").
func Listen(addr string, token []byte, creds credentials.TransportCredentials) (*Coordinator, error) {
	if err := CheckToken(token); err != nil {
		return nil, fmt.Errorf("agents: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	d := newDoor(ln, handshakeTimeout)
	opts := serverOptions(d)
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	c := newCoordinator(token)
	c.srv, c.ln = grpc.NewServer(opts...), d
	g := newGuard()
	register(c.srv, func(ctx context.Context, s Stream) error { return g.serve(ctx, s, c.join) })
	go c.srv.Serve(c.ln)
	go c.watch()
	return c, nil
}

// newCoordinator is a coordinator with no listener: Listen gives it one,
// a test its own streams (join).
func newCoordinator(token []byte) *Coordinator {
	return &Coordinator{token: token, changed: make(chan struct{}), now: time.Now, quit: make(chan struct{}), lease: defaultLease}
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
	if c.srv != nil {
		c.srv.Stop()
	}
}

// notify wakes Await; c.mu held.
func (c *Coordinator) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// join is one agent's stream: the handshake (proved is called once the
// agent has proved the token, before it is placed), then its frames until
// it ends, the coordinator gives up on the agent, or the agent resumes on
// another stream.
func (c *Coordinator) join(s Stream, proved func()) error {
	att := &attachment{s: s, replaced: make(chan struct{})}
	// Nothing else is sent on s before the welcome (and a resume's catch-up).
	att.mu.Lock()
	locked := true
	defer func() {
		if locked {
			att.mu.Unlock()
		}
	}()
	var r, lost *remote // lost: a place this handshake ended
	var w Welcome
	var onJoin func(int, Hello)
	var late *Fleet // the run had begun when r joined: it is r's to start
	_, sealed, err := Accept(s, c.token, func(h Hello) (Welcome, error) {
		proved() // the hello's proof holds, whether a place is found or not
		c.mu.Lock()
		defer c.mu.Unlock()
		var err error
		if h.Resume != "" {
			r, w, lost, err = c.resume(h, att)
		} else {
			r, w, lost, err = c.admit(h, att)
			late = c.fleet
		}
		onJoin = c.onJoin
		c.notify()
		return w, err
	})
	if err == nil {
		att.s, s = sealed, sealed // every frame from here on sealed; att.mu held
	}
	if lost != nil {
		c.tellLost(lost)
	}
	if r == nil {
		return err // refused, or the handshake failed before a place
	}
	if err == nil && w.Resumed {
		err = c.catchUp(r, att)
	}
	att.mu.Unlock()
	locked = false
	killed := false
	if err == nil {
		if !w.Resumed {
			if onJoin != nil {
				onJoin(r.index, r.hello)
			}
			if late != nil {
				late.late(r) // (before, Fleet.Init starts it)
			}
		}
		errc := make(chan error, 1)
		go func() { errc <- c.serve(r, s) }()
		select {
		case err = <-errc:
		case <-r.kill:
			err, killed = r.why, true // returning ends the stream, and so serve's Recv
		case <-att.replaced:
			return errors.New("the agent resumed on another stream")
		}
	}
	return c.leave(r, att, err, killed)
}

// admit places an agent that joins, with its hello h, on att: a new place
// before the run, a lost agent's once it has begun (place). It returns
// the agent away it displaced, if any, as lost. c.mu held.
func (c *Coordinator) admit(h Hello, att *attachment) (r *remote, w Welcome, displaced *remote, err error) {
	h.Cores = max(h.Cores, 1)
	now := c.now()
	r = &remote{hello: h, session: newSession(), kill: make(chan struct{}), joined: now, heard: now}
	r.cur.Store(att)
	if !c.started {
		r.index = len(c.remotes)
		c.remotes = append(c.remotes, r)
	} else {
		i := c.place(h.Name)
		if i < 0 {
			return nil, Welcome{}, nil, fmt.Errorf("%w: the run has all its %d agents; a place frees up when one is lost", ErrLater, len(c.remotes))
		}
		if f := c.fleet; f != nil && f.model != nil && h.Proto < protoOpen {
			return nil, Welcome{}, nil, fmt.Errorf("the run is of the open model, which this agent's headroom (%s) predates on agents: upgrade it", h.Version)
		}
		old := c.remotes[i]
		if old.away() {
			c.end(old, fmt.Errorf("%v, and a new agent of its name joined before it resumed", old.err), old.broke)
			displaced = old
		}
		r.index, r.gen = i, old.gen+1
		c.gone = append(c.gone, old)
		c.remotes[i] = r
	}
	return r, Welcome{Index: r.index, Session: r.session, Lease: c.lease}, displaced, nil
}

// place is the place a late agent takes: a lost agent's or one that left
// (Done.Leaving), the one of the same name first (a Kubernetes pod
// re-created), or -1. An agent away
// keeps its place for its lease unless the new agent has its name: that
// is the same machine or pod started anew (a process that had kept
// running would have resumed instead), and it is lost now. c.mu held.
func (c *Coordinator) place(name string) int {
	free := -1
	for i, r := range c.remotes {
		if r.hello.Name == name && r.away() {
			return i
		}
		if !r.ended || (r.done != nil && !r.done.Leaving) { // running, or at the end of the run
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

// serve takes r's frames on s: statuses, snapshots (merged once each and
// acknowledged), and its last word.
func (c *Coordinator) serve(r *remote, s Stream) error {
	for {
		f, err := s.Recv()
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
			r.flushed = max(r.flushed, st.Flushed)
			r.peak = max(r.peak, st.Users)
			first, fl := r.statusN == 1, c.fleet
			c.notify()
			c.mu.Unlock()
			if first && fl != nil && st.Error == "" {
				fl.rebalance() // a late agent is ready for users
			}
			if fl != nil && st.Error == "" {
				fl.dealIn(r) // a late agent's pool is set up for arrivals
			}
			if st.Error != "" {
				return fmt.Errorf("%s: %s", r, st.Error)
			}
		case KindSnapshot:
			c.mu.Lock()
			r.heard = c.now()
			fresh, err := r.in.fresh(f)
			if fresh {
				// Merged at the next Drain, with every agent's
				// (wire.MergeEncodedAll: a name at a time, while it is
				// in the cache), checked there.
				r.pending = append(r.pending, f.Body)
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
			mfs, err := wire.DecodeFamilies(f.Body)
			if err != nil {
				return fmt.Errorf("%s: bad metrics: %v", r, err)
			}
			c.mu.Lock()
			r.families, r.heard = mfs, c.now()
			c.mu.Unlock()
		case KindDone:
			if err := c.done(r, f); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: a %s frame", r, f.Kind)
		}
	}
}

// done takes r's Done f: the end of its run, or (Leaving) of its part in
// it; a numbered one is acknowledged as a snapshot is.
func (c *Coordinator) done(r *remote, f *Frame) error {
	var d Done
	if err := json.Unmarshal(f.Body, &d); err != nil {
		return fmt.Errorf("%s: a bad done: %v", r, err)
	}
	c.mu.Lock()
	r.heard = c.now()
	fresh, err := true, error(nil)
	if f.Seq > 0 { // numbered after its last snapshot, to be acknowledged
		fresh, err = r.in.fresh(f)
	}
	if fresh {
		r.done = &d
		if d.Leaving { // its share goes to the others from now on: say how much it was
			r.leftWith = r.setUp()
		}
		c.notify()
	}
	seq := r.in.merged
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: %v", r, err)
	}
	if f.Seq > 0 {
		return r.ack(seq)
	}
	return nil
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

// ended is why an agent's stream ended as people read it.
func ended(err error) error {
	if closed(err) {
		return errors.New("its connection closed (its process ended, or the network failed)")
	}
	return err
}

// closed reports whether err is a stream cut: the agent's process died,
// its machine or the network went away (or a proxy reset the connection),
// which shows here as a cancelled or unavailable call. Not a frame the
// stream refused, nor what the agent said.
func closed(err error) bool {
	return err != nil && (errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) ||
		status.Code(err) == codes.Canceled || status.Code(err) == codes.Unavailable)
}
