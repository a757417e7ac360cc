package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"runtime"
	"time"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/internal/memlimit"
	"github.com/headroom-dev/headroom/internal/rusage"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/metrics/wire"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/scenario"
	starlarkjson "go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// AgentOptions are an agent's own settings; the run's come from its coordinator.
type AgentOptions struct {
	Token   []byte
	Name    string // host or pod name
	Version string
	Print   func(user int, msg string) // the scenario's print(); nil drops it
	// Prom, if set, observes every sample of every run this agent serves:
	// the agent's own --metrics-listen.
	Prom *metrics.Prom
	// Redial, if set, opens a new stream to the same coordinator, to live
	// until its context ends: an agent whose stream breaks during the run
	// resumes on one, its users running on, within the lease its
	// coordinator gave it (Welcome.Lease). Nil: it stops its users, and
	// Serve returns (Retry says to join again).
	Redial func(context.Context) (Stream, error)
	// Leave, once closed (SIGTERM), makes the agent leave the run in good
	// order: its users stop (each within the grace period), its last
	// snapshot and a Done saying it leaves go, and Serve returns ErrLeft
	// once the coordinator has acknowledged them all (at most ackWait
	// later; past it, an error counting what was not delivered). The
	// coordinator moves its users to the other agents. Nil: never.
	Leave <-chan struct{}
	// MaxMemory, in bytes, is how much memory this agent may use (its
	// --max-memory): past it, its users are cancelled and its status
	// says so (Status.Memory), for the coordinator to stop the run. 0: no
	// limit.
	MaxMemory uint64
	// Log, if set, takes what the agent's operator should read in its own
	// log (a pod's): why it cancelled its users.
	Log       func(msg string)
	memEvery  time.Duration // between memory samples; 0: memlimit's default
	memSample func() uint64 // bytes in use; nil: memlimit.Used
}

// Serve is an agent's side of one stream: the handshake, then the run its
// coordinator starts, until the coordinator stops it (nil), the stream
// breaks and it cannot resume (see AgentOptions.Redial), or ctx ends (its
// users are stopped either way).
func Serve(ctx context.Context, s Stream, opt AgentOptions) error {
	h := Hello{Version: opt.Version, Name: opt.Name, Cores: runtime.GOMAXPROCS(0), Proto: protoBound}
	w, s, err := Greet(s, opt.Token, h)
	if err != nil {
		return err
	}
	var st Start
	started := make(chan error, 1)
	go func() { started <- recv(s, KindStart, &st) }()
	select {
	case err := <-started:
		if err != nil {
			return err
		}
	case <-opt.Leave: // nothing ran here yet: nothing to deliver
		return fmt.Errorf("%w (before its run began)", ErrLeft)
	}
	prom := opt.Prom
	if prom == nil && st.Metrics {
		prom = metrics.NewProm()
	}
	var obs metrics.Observer
	if prom != nil {
		obs = prom
	}
	rec := metrics.NewRecorder(0, obs, time.Now)
	e, err := st.engine(ctx, w.Index, rec, opt.Print)
	if err != nil {
		_ = send(s, KindStatus, Status{Error: err.Error()})
		return err
	}
	a := &agent{e: e, rec: rec, snap: metrics.NewSnapshot(), total: metrics.NewStat(), wakes: metrics.NewWakes(), cpu0: rusage.CPU(), prom: prom, families: st.Metrics,
		opt: opt, hello: h, session: w.Session, lease: w.Lease, in: make(chan delivery), quit: make(chan struct{}), memory: make(chan *memlimit.Error)}
	defer e.Stop()
	defer a.close()
	if opt.MaxMemory > 0 {
		defer a.watchMemory(ctx)()
	}
	a.attach(s, nil)
	return a.run(ctx)
}

// watchMemory starts the agent's --max-memory watch: past the limit, its
// users are cancelled and the run's loop is told (a.memory), to say so in
// every status from then on. The returned function ends the watch and
// restores the runtime's soft limit.
func (a *agent) watchMemory(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	restore := memlimit.Apply(a.opt.MaxMemory, a.e.Users)
	start := time.Now()
	w := memlimit.Watch{Limit: a.opt.MaxMemory, Every: a.opt.memEvery, Sample: a.opt.memSample}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, func(used uint64) {
			e := &memlimit.Error{Used: used, Limit: w.Limit, At: time.Since(start), Users: a.e.Users(), Doing: a.e.Doing()}
			a.e.Abort("headroom's memory passed --max-memory")
			select {
			case a.memory <- e:
			case <-ctx.Done():
			}
		})
	}()
	return func() {
		cancel()
		<-done
		restore()
	}
}

// errBroken is a run's stream ending before the coordinator stopped it:
// the coordinator gave up on this agent, or the network or the
// coordinator went away, and the agent could not resume. The agent may
// join again (Retry).
var errBroken = errors.New("the coordinator's stream broke off during the run")

// Retry reports whether an agent that got err from Join or Serve may dial
// again: the coordinator did not answer, had no place for it yet, or the
// run's stream broke off. Not when it was refused (a token that does not
// match) or could not run the scenario.
func Retry(err error) bool {
	switch {
	case errors.Is(err, ErrLater), errors.Is(err, errBroken):
		return true
	case errors.Is(err, ErrRefused):
		return false
	}
	// Unavailable: no connection, or no handshake slot now; DeadlineExceeded:
	// the coordinator cut a handshake that outlasted HandshakeTimeout (a
	// link or a machine that slow now may not be so in a moment).
	return status.Code(err) == codes.Unavailable || status.Code(err) == codes.DeadlineExceeded
}

// engine loads the scenario st carries, checks it is the coordinator's,
// and makes the engine that runs this agent's users.
func (st *Start) engine(ctx context.Context, index int, rec *metrics.Recorder, print func(int, string)) (*engine.Engine, error) {
	files := map[string][]byte{}
	for _, f := range st.Files {
		files[f.Path] = f.Content
	}
	sc, err := scenario.Load(ctx, st.Path, st.Source, scenario.Limits{MaxSteps: st.MaxSteps, LoadTimeout: st.LoadTimeout,
		MaxData: st.MaxData, Vars: st.Vars, Files: files})
	if err != nil {
		return nil, fmt.Errorf("the scenario did not load on this agent: %w", err)
	}
	if sc.Hash != st.Hash {
		return nil, fmt.Errorf("the scenario loaded to %s on this agent, not the coordinator's %s", sc.Hash, st.Hash)
	}
	if st.Agents < 1 || index < 0 || index >= st.Agents || st.From < 0 {
		return nil, fmt.Errorf("agent %d of %d", index, st.Agents)
	}
	if len(st.Weights) != st.Agents {
		return nil, fmt.Errorf("%d weights for %d agents", len(st.Weights), st.Agents)
	}
	sc.ShareRows(func(n int) (lo, hi int) { // pick="unique": this place's block
		parts := split(n, st.Weights)
		for _, p := range parts[:index] {
			lo += p
		}
		return lo, lo + parts[index]
	})
	target, err := url.Parse(st.Target)
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	var addrs []netip.Addr
	for _, a := range st.SourceAddrs {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return nil, fmt.Errorf("source address: %w", err)
		}
		addrs = append(addrs, ip)
	}
	set, err := st.Client.Settings()
	if err != nil {
		return nil, err
	}
	e := engine.New(engine.Config{Scenario: sc, Target: target, Seed: st.Seed, Timeout: st.Timeout, Grace: st.Grace,
		Settings: set, FreshSessions: st.FreshSessions, SetupOnly: st.SetupOnly, SetupRetries: st.SetupRetries, MaxBody: st.MaxBody, SourceAddrs: addrs, Recorder: rec, Print: print, IDs: ids(index, st.Agents, st.From)})
	if len(st.Shared) > 0 {
		v, err := fromJSON(st.Shared)
		if err != nil {
			return nil, fmt.Errorf("what init returned: %w", err)
		}
		e.SetShared(v)
	}
	return e, nil
}

// agent is a running agent: its engine, and the snapshots it owes.
type agent struct {
	e     *engine.Engine
	rec   *metrics.Recorder
	snap  *metrics.Snapshot
	total *metrics.Stat // every request of the run, for its Status
	// The open model's arrivals of the run that started, and that were
	// dropped, for its Status.
	arrivals, dropped int64
	out               outbox
	want              int  // the users the coordinator wants here (the closed model)
	open              bool // its engine runs the open model (KindOpen): want does not apply
	cpu0              time.Duration
	prom              *metrics.Prom  // nil: nobody reads this agent's Prometheus metrics
	wakes             *metrics.Wakes // the generator's starts over the run: their lateness, the worst second's burstiness
	// families: send prom's families with each snapshot (Start.Metrics).
	families bool
	flushed  uint64       // the coordinator's last tick answered (KindFlush)
	stopping bool         // told to stop: its users stopped, it waits for acks
	leaving  bool         // stopping because it leaves the run (AgentOptions.Leave)
	beat     *time.Ticker // a status when nothing else was sent for a second
	acked    *time.Timer  // once stopping: the wait for the last acknowledgements
	done     *Frame       // its Done, once numbered
	// The --max-memory watch's report, once (memory), and from then on
	// in every status (over): its users were cancelled.
	memory chan *memlimit.Error
	over   *memlimit.Error

	// The stream, and how to get another.
	opt     AgentOptions
	hello   Hello  // as it joined
	session string // Welcome.Session: "" if the coordinator cannot resume it
	lease   time.Duration
	s       Stream
	gen     int           // the stream's number: frames of an earlier one are stale
	hang    func()        // ends s, if this agent opened it (resume)
	in      chan delivery // what every stream's reader receives
	quit    chan struct{} // closed when Serve returns: the readers stop
}

// delivery is a frame, or the error that ended stream gen.
type delivery struct {
	gen int
	f   *Frame
	err error
}

// attach makes s the agent's stream, with a reader of its own; hang, if
// set, ends it.
func (a *agent) attach(s Stream, hang func()) {
	if a.hang != nil {
		a.hang()
	}
	a.s, a.hang = s, hang
	a.gen++
	gen := a.gen
	go func() {
		for {
			f, err := s.Recv()
			select {
			case a.in <- delivery{gen: gen, f: f, err: err}:
			case <-a.quit:
				return
			}
			if err != nil {
				return
			}
		}
	}()
}

// close ends the stream the agent opened, if any, and its readers.
func (a *agent) close() {
	close(a.quit)
	if a.hang != nil {
		a.hang()
	}
}

// ackWait bounds the wait, once stopped, for the acknowledgement of the
// last snapshots.
const ackWait = 10 * time.Second

// run serves the coordinator's frames until it stops the agent and has
// acknowledged every snapshot. A broken stream is resumed (resume).
func (a *agent) run(ctx context.Context) error {
	a.beat = time.NewTicker(time.Second)
	defer a.beat.Stop()
	adding := time.NewTimer(time.Hour)
	defer adding.Stop()
	a.acked = time.NewTimer(ackWait)
	a.acked.Stop() // until stopping
	defer a.acked.Stop()
	err := a.status()
	leave := a.opt.Leave
	for {
		if errors.Is(err, errBroken) {
			err = a.resume(ctx, err)
		}
		if err != nil {
			return err
		}
		if a.stopping && len(a.out.pending) == 0 {
			if a.leaving {
				return ErrLeft
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-leave:
			leave = nil
			if !a.stopping {
				a.leaving = true
				err = a.stop()
			}
		case d := <-a.in:
			switch {
			case d.gen != a.gen: // a stream left behind
			case d.err != nil:
				err = fmt.Errorf("%w: %w", errBroken, d.err)
			default:
				err = a.handle(d.f)
			}
		case m := <-a.memory: // its users were cancelled: they go (below), and none comes back
			a.over, a.want = m, 0
			if a.opt.Log != nil {
				a.opt.Log(fmt.Sprintf("%v: its users cancelled (%d); the coordinator stops the run", m, m.Users))
			}
			err = a.status()
		case <-a.beat.C: // a heartbeat: the seconds' figures go when asked (KindFlush)
			if !a.stopping {
				err = a.status()
			}
		case <-adding.C:
		case <-a.acked.C:
			return fmt.Errorf("the coordinator did not acknowledge the last %d snapshots (Done included) within %v: what they held is not in its figures", len(a.out.pending), ackWait)
		}
		// Users are added in batches, between frames, as a runner does.
		if !a.stopping && !a.open && a.e.SetUsersBy(a.want, 256) != a.want {
			adding.Reset(time.Millisecond)
		}
	}
}

// handle is one frame from the coordinator.
func (a *agent) handle(f *Frame) error {
	if f.Kind == KindAck {
		a.out.ack(f.Seq)
		return nil
	}
	if a.stopping {
		return nil // stopped: only the acknowledgements matter now
	}
	if a.over != nil && (f.Kind == KindUsers || f.Kind == KindOpen || f.Kind == KindPacer) {
		// Its users were cancelled (--max-memory) and the run is stopping:
		// a share of users or of the pool dealt meanwhile (an agent lost
		// elsewhere) gets none back, and is no fault of this agent's.
		return nil
	}
	switch f.Kind {
	case KindUsers:
		var u Users
		if err := json.Unmarshal(f.Body, &u); err != nil {
			return fmt.Errorf("agents: a bad users frame: %v", err)
		}
		a.want = max(u.N, 0)
	case KindFlush:
		var fl Flush
		if err := json.Unmarshal(f.Body, &fl); err != nil {
			return fmt.Errorf("agents: a bad flush frame: %v", err)
		}
		if fl.N <= a.flushed { // asked again after a resume: answered already
			return a.status()
		}
		a.flushed = fl.N
		return a.flush()
	case KindOpen:
		var o Open
		if err := json.Unmarshal(f.Body, &o); err != nil {
			return fmt.Errorf("agents: a bad open frame: %v", err)
		}
		var err error
		if a.open {
			err = a.e.GrowOpen(o.MaxUsers, o.PreAllocated)
		} else if err = a.e.StartOpen(o.model()); err == nil {
			a.open = true
		}
		if err != nil {
			return a.fail(fmt.Errorf("its share of the open model's pool (%+v): %v", o, err))
		}
	case KindPacer:
		var p Pacer
		if err := json.Unmarshal(f.Body, &p); err != nil {
			return fmt.Errorf("agents: a bad pacer frame: %v", err)
		}
		pacer, err := p.pacer()
		if err == nil {
			err = a.e.SetPacer(pacer) // engine.ErrNotOpen before an open frame
		}
		if err != nil {
			return a.fail(fmt.Errorf("its share of the arrivals: %v", err))
		}
	case KindStop:
		return a.stop()
	default:
		return fmt.Errorf("agents: a %s frame during the run", f.Kind)
	}
	return nil
}

// stop stops every user (each within the grace period), then sends the
// last snapshot and Done; run awaits the acknowledgement of all.
func (a *agent) stop() error {
	a.stopping = true
	a.e.Stop()
	a.acked.Reset(ackWait)
	return a.flush()
}

// ErrLeft is Serve's error for an agent that left the run (Leave) with
// every snapshot acknowledged.
var ErrLeft = errors.New("left the run as told, every sample delivered")

// flush numbers what was recorded since the last flush as the next
// snapshot, and sends it and the rest (tell).
func (a *agent) flush() error {
	a.snap.Reset()
	a.rec.Drain(a.snap)
	f := a.out.add(KindSnapshot, wire.AppendSnapshot(nil, a.snap))
	if a.snap.Wakes != nil {
		a.snap.Seal()
		a.wakes.Merge(a.snap.Wakes)
	}
	for _, st := range a.snap.Requests {
		a.total.Merge(st)
	}
	for _, st := range a.snap.Arrivals {
		a.arrivals += st.Count
		a.dropped += st.Dropped
	}
	if a.prom != nil {
		a.prom.SetUsers(a.e.Users())
		a.prom.SetReady(a.e.Ready())
		a.prom.AddWakes(a.snap.Wakes)
	}
	a.beat.Reset(time.Second)
	if err := a.send(f); err != nil {
		return err
	}
	return a.tell()
}

// tell sends what follows a snapshot: the metric families (if asked),
// the status (which says the coordinator's tick it answers, a.flushed),
// and Done once stopping: numbered, if the coordinator can resume this
// agent, so that it is acknowledged (and sent again after a resume) as
// the snapshots are.
func (a *agent) tell() error {
	if a.families {
		mfs, err := a.prom.Registry().Gather()
		if err != nil {
			return fmt.Errorf("agents: gathering its metrics: %v", err)
		}
		// The users are the coordinator's to count (from statuses).
		b, err := wire.EncodeFamilies(mfs, "loadtest_users_active", "loadtest_users_ready")
		if err != nil {
			return err
		}
		if err := a.send(&Frame{Kind: KindMetrics, Body: b}); err != nil {
			return err
		}
	}
	if err := a.status(); err != nil {
		return err
	}
	if !a.stopping {
		return nil
	}
	if a.session == "" { // a coordinator of before: it acknowledges no Done
		return a.sendMsg(KindDone, Done{UsersByType: a.e.UsersByType(), Leaving: a.leaving})
	}
	if a.done == nil {
		body, err := json.Marshal(Done{UsersByType: a.e.UsersByType(), Leaving: a.leaving})
		if err != nil {
			return err
		}
		a.done = a.out.add(KindDone, body)
	}
	return a.send(a.done)
}

// fail tells the coordinator why this agent cannot go on (its last
// status, with Error), and returns err: the agent ends.
func (a *agent) fail(err error) error {
	st := a.state()
	st.Error = err.Error()
	_ = a.sendMsg(KindStatus, st)
	return err
}

func (a *agent) status() error { return a.sendMsg(KindStatus, a.state()) }

// state is the agent's Status now.
func (a *agent) state() Status {
	st := Status{Users: a.e.Users(), Ready: a.e.Ready(), Began: a.e.Began(), SetUp: a.e.SetUp(),
		Late: a.e.Late(), Doing: a.e.Doing(), Overflowed: a.rec.Overflowed(), Flushed: a.flushed, Requests: a.total.Count, Errors: a.total.Errors,
		Arrivals: a.arrivals, Dropped: a.dropped, CPUSeconds: (rusage.CPU() - a.cpu0).Seconds(), PeakRSSMB: rusage.PeakRSSMB(),
		Memory: a.over, Lateness: result.LatenessOf(a.wakes), Burstiness: result.BurstinessOf(a.wakes)}
	if a.total.Count > 0 {
		st.P50Ms = float64(a.total.Hist().ValueAtQuantile(50)) / 1000
		st.P99Ms = float64(a.total.Hist().ValueAtQuantile(99)) / 1000
	}
	return st
}

// send sends f on the stream; its failure is the stream's, an errBroken.
func (a *agent) send(f *Frame) error {
	if err := a.s.Send(f); err != nil {
		return fmt.Errorf("%w: %w", errBroken, err)
	}
	return nil
}

// sendMsg sends a control message as a frame of kind k (see send).
func (a *agent) sendMsg(k Kind, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return a.send(&Frame{Kind: k, Body: body})
}

// fromJSON is JSON as a frozen Starlark value, as the scenario's json.decode reads it.
func fromJSON(b []byte) (starlark.Value, error) {
	v, err := starlark.Call(&starlark.Thread{Name: "shared"}, starlarkjson.Module.Members["decode"], starlark.Tuple{starlark.String(b)}, nil)
	if err != nil {
		return nil, err
	}
	v.Freeze()
	return v, nil
}
