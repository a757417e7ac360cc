package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/metrics"
	starlarkjson "go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Coordinator accepts agents on a gRPC listener (each proves the token;
// see Accept) and, once they have joined, drives them as one Fleet.
type Coordinator struct {
	token []byte
	srv   *grpc.Server
	ln    net.Listener

	mu      sync.Mutex
	remotes []*remote     // joined, in order: remotes[i] has index i
	changed chan struct{} // closed and replaced when an agent joins or leaves
	started bool          // the run began: no more agents join (for now)
}

// remote is one agent as its coordinator sees it.
type remote struct {
	index  int
	hello  Hello
	s      Stream
	sendMu sync.Mutex // Stream.Send is not safe for concurrent use

	// Under Coordinator.mu:
	status  Status
	statusN int               // statuses received
	pending *metrics.Snapshot // merged since the last Drain
	in      inbox
	want    int
	done    *Done
	err     error // why its stream ended
	ended   bool
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
	c := &Coordinator{token: token, srv: grpc.NewServer(opts...), ln: ln, changed: make(chan struct{})}
	Register(c.srv, c.join)
	go c.srv.Serve(ln)
	return c, nil
}

// Addr is where the coordinator listens.
func (c *Coordinator) Addr() string { return c.ln.Addr().String() }

// Close stops listening and ends every agent's stream.
func (c *Coordinator) Close() { c.srv.Stop() }

// notify wakes Await; c.mu held.
func (c *Coordinator) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// join is one agent's stream: the handshake, then its frames until it ends.
func (c *Coordinator) join(s Stream) error {
	var r *remote
	_, err := Accept(s, c.token, func(h Hello) (Welcome, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.started {
			return Welcome{}, errors.New("the run has begun: this coordinator takes no more agents")
		}
		h.Cores = max(h.Cores, 1)
		r = &remote{index: len(c.remotes), hello: h, s: s, pending: metrics.NewSnapshot()}
		c.remotes = append(c.remotes, r)
		c.notify()
		return Welcome{Index: r.index}, nil
	})
	if err != nil {
		return err
	}
	err = c.serve(r)
	c.mu.Lock()
	r.ended, r.err = true, err
	c.notify()
	c.mu.Unlock()
	return err
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
			r.status, r.statusN = st, r.statusN+1
			c.notify()
			c.mu.Unlock()
			if st.Error != "" {
				return fmt.Errorf("%s: %s", r, st.Error)
			}
		case KindSnapshot:
			c.mu.Lock()
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
		case KindDone:
			var d Done
			if err := json.Unmarshal(f.Body, &d); err != nil {
				return fmt.Errorf("%s: a bad done: %v", r, err)
			}
			c.mu.Lock()
			r.done = &d
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

// Fleet is the coordinator's agents as one runner.Fleet. Its Init runs
// the scenario's init here, with local, and starts every agent on start
// with what it returned; its figures are the agents' added up, and Drain
// merges their snapshots exactly (metrics.MergeEncoded).
func (c *Coordinator) Fleet(local engine.Config, start Start) *Fleet {
	return &Fleet{c: c, local: local, start: start}
}

// Fleet drives a coordinator's agents; see Coordinator.Fleet.
type Fleet struct {
	c     *Coordinator
	local engine.Config // for init, and its recorder for init's samples
	start Start
	eng   *engine.Engine
	want  int
}

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
	c.started = true
	remotes := c.remotes
	c.mu.Unlock()
	if len(remotes) == 0 {
		return errors.New("no agent joined")
	}
	f.start.Agents = len(remotes)
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

// SetUsersBy shares n users among the agents by their cores; they add
// their share in batches of their own.
func (f *Fleet) SetUsersBy(n, _ int) int {
	c := f.c
	c.mu.Lock()
	remotes := c.remotes
	weights := make([]int, len(remotes))
	for i, r := range remotes {
		weights[i] = r.hello.Cores
	}
	shares := split(n, weights)
	var changed []*remote
	for i, r := range remotes {
		if r.want != shares[i] && !r.ended {
			r.want = shares[i]
			changed = append(changed, r)
		}
	}
	c.mu.Unlock()
	for _, r := range changed {
		_ = r.send(KindUsers, Users{N: r.want}) // a broken stream shows in serve
	}
	f.want = n
	return n
}

// sum adds up what fn reads from each agent's last status.
func (f *Fleet) sum(fn func(*Status) int64) int64 {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	var n int64
	for _, r := range f.c.remotes {
		n += fn(&r.status)
	}
	return n
}

func (f *Fleet) Users() int   { return int(f.sum(func(s *Status) int64 { return int64(s.Users) })) }
func (f *Fleet) Ready() int   { return int(f.sum(func(s *Status) int64 { return int64(s.Ready) })) }
func (f *Fleet) Began() int64 { return f.sum(func(s *Status) int64 { return s.Began }) }
func (f *Fleet) SetUp() int64 { return f.sum(func(s *Status) int64 { return s.SetUp }) }
func (f *Fleet) Late() int64  { return f.sum(func(s *Status) int64 { return s.Late }) }

func (f *Fleet) Doing() map[string]int {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	out := map[string]int{}
	for _, r := range f.c.remotes {
		for k, n := range r.status.Doing {
			out[k] += n
		}
	}
	return out
}

func (f *Fleet) Overflowed() bool {
	return f.sum(func(s *Status) int64 {
		if s.Overflowed {
			return 1
		}
		return 0
	}) > 0
}

// Drain merges what the agents sent since the last Drain, and init's
// samples, into into.
func (f *Fleet) Drain(into *metrics.Snapshot) {
	f.local.Recorder.Drain(into)
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	for _, r := range f.c.remotes {
		into.Merge(r.pending)
		r.pending.Reset()
	}
}

// Abort asks every agent to stop adding users and remove them.
func (f *Fleet) Abort(string) { f.SetUsersBy(0, 0) }

// stopWait bounds the wait for agents' last snapshots beyond the grace period.
const stopWait = 15 * time.Second

// Stop stops every agent's users and waits for their last snapshots.
func (f *Fleet) Stop() {
	c := f.c
	c.mu.Lock()
	remotes := c.remotes
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
}

// UsersByType adds up the agents' users by type, as their Done said.
func (f *Fleet) UsersByType() map[string]int {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	out := map[string]int{}
	for _, r := range f.c.remotes {
		if r.done != nil {
			for k, n := range r.done.UsersByType {
				out[k] += n
			}
		}
	}
	return out
}

// Agents are the joined agents' last statuses, for the result.
func (f *Fleet) Agents() []AgentStatus {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	out := make([]AgentStatus, len(f.c.remotes))
	for i, r := range f.c.remotes {
		out[i] = AgentStatus{Index: r.index, Name: r.hello.Name, Cores: r.hello.Cores, Status: r.status}
		if r.err != nil && r.done == nil {
			out[i].Lost = r.err.Error()
		}
	}
	return out
}

// AgentStatus is one agent at the end of a run.
type AgentStatus struct {
	Index int
	Name  string
	Cores int
	Status
	Lost string // why its stream ended before its last word, if it did
}

// toJSON is a Starlark value as JSON, as the scenario's json.encode writes it.
func toJSON(v starlark.Value) ([]byte, error) {
	s, err := starlark.Call(&starlark.Thread{Name: "shared"}, starlarkjson.Module.Members["encode"], starlark.Tuple{v}, nil)
	if err != nil {
		return nil, err
	}
	return []byte(string(s.(starlark.String))), nil
}
