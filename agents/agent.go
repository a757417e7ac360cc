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
	"github.com/headroom-dev/headroom/internal/rusage"
	"github.com/headroom-dev/headroom/metrics"
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
}

// Serve is an agent's side of one stream: the handshake, then the run its
// coordinator starts, until the coordinator stops it (nil), the stream
// breaks or ctx ends (its users are stopped either way).
func Serve(ctx context.Context, s Stream, opt AgentOptions) error {
	w, err := Greet(s, opt.Token, Hello{Version: opt.Version, Name: opt.Name, Cores: runtime.GOMAXPROCS(0)})
	if err != nil {
		return err
	}
	var st Start
	if err := recv(s, KindStart, &st); err != nil {
		return err
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
	a := &agent{s: s, e: e, rec: rec, snap: metrics.NewSnapshot(), cpu0: rusage.CPU(), prom: prom, families: st.Metrics}
	defer e.Stop()
	return a.run(ctx)
}

// errBroken is a run's stream ending before the coordinator stopped it:
// the coordinator gave up on this agent, or the network or the
// coordinator went away. The agent may join again (Retry).
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
	return status.Code(err) == codes.Unavailable
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
	if st.Agents < 1 || index < 0 || index >= st.Agents || st.From < 0 {
		return nil, fmt.Errorf("agent %d of %d", index, st.Agents)
	}
	e := engine.New(engine.Config{Scenario: sc, Target: target, Seed: st.Seed, Timeout: st.Timeout, Grace: st.Grace,
		Insecure: st.Insecure, MaxBody: st.MaxBody, SourceAddrs: addrs, Recorder: rec, Print: print, IDs: ids(index, st.Agents, st.From)})
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
	s    Stream
	e    *engine.Engine
	rec  *metrics.Recorder
	snap *metrics.Snapshot
	out  outbox
	want int // the users the coordinator wants here
	cpu0 time.Duration
	prom *metrics.Prom // nil: nobody reads this agent's Prometheus metrics
	// families: send prom's families with each snapshot (Start.Metrics).
	families bool
}

func (a *agent) run(ctx context.Context) error {
	frames, broken := make(chan *Frame), make(chan error, 1)
	go func() {
		for {
			f, err := a.s.Recv()
			if err != nil {
				broken <- err
				return
			}
			select {
			case frames <- f:
			case <-ctx.Done():
				return
			}
		}
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	adding := time.NewTimer(time.Hour)
	defer adding.Stop()
	if err := a.status(); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-broken:
			return fmt.Errorf("%w: %w", errBroken, err)
		case <-tick.C:
			if err := a.flush(); err != nil {
				return err
			}
		case <-adding.C:
		case f := <-frames:
			switch f.Kind {
			case KindAck:
				a.out.ack(f.Seq)
			case KindUsers:
				var u Users
				if err := json.Unmarshal(f.Body, &u); err != nil {
					return fmt.Errorf("agents: a bad users frame: %v", err)
				}
				a.want = max(u.N, 0)
			case KindStop:
				return a.stop(ctx, frames, broken)
			default:
				return fmt.Errorf("agents: a %s frame during the run", f.Kind)
			}
		}
		// Users are added in batches, between frames, as a runner does.
		if a.e.SetUsersBy(a.want, 256) != a.want {
			adding.Reset(time.Millisecond)
		}
	}
}

// flush sends what was recorded since the last flush, numbered, and the status.
func (a *agent) flush() error {
	a.snap.Reset()
	a.rec.Drain(a.snap)
	if err := a.s.Send(a.out.add(metrics.AppendSnapshot(nil, a.snap))); err != nil {
		return err
	}
	if a.prom != nil {
		a.prom.SetUsers(a.e.Users())
		a.prom.SetReady(a.e.Ready())
	}
	if a.families {
		mfs, err := a.prom.Registry().Gather()
		if err != nil {
			return fmt.Errorf("agents: gathering its metrics: %v", err)
		}
		// The users are the coordinator's to count (from statuses).
		b, err := metrics.EncodeFamilies(mfs, "loadtest_users_active", "loadtest_users_ready")
		if err != nil {
			return err
		}
		if err := a.s.Send(&Frame{Kind: KindMetrics, Body: b}); err != nil {
			return err
		}
	}
	return a.status()
}

func (a *agent) status() error {
	return send(a.s, KindStatus, Status{Users: a.e.Users(), Ready: a.e.Ready(), Began: a.e.Began(), SetUp: a.e.SetUp(),
		Late: a.e.Late(), Doing: a.e.Doing(), Overflowed: a.rec.Overflowed(),
		CPUSeconds: (rusage.CPU() - a.cpu0).Seconds(), PeakRSSMB: rusage.PeakRSSMB()})
}

// stop stops every user (each within the grace period), sends the last
// snapshot and Done, and waits, a while, for the acknowledgement of all.
func (a *agent) stop(ctx context.Context, frames <-chan *Frame, broken <-chan error) error {
	a.e.Stop()
	if err := a.flush(); err != nil {
		return err
	}
	if err := send(a.s, KindDone, Done{UsersByType: a.e.UsersByType()}); err != nil {
		return err
	}
	wait := time.NewTimer(10 * time.Second)
	defer wait.Stop()
	for len(a.out.unacked()) > 0 {
		select {
		case f := <-frames:
			if f.Kind == KindAck {
				a.out.ack(f.Seq)
			}
		case err := <-broken:
			return fmt.Errorf("the coordinator's stream broke before it acknowledged the last snapshot: %w", err)
		case <-wait.C:
			return errors.New("the coordinator did not acknowledge the last snapshot within 10 s")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
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
