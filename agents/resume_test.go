package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/metrics/wire"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/scenario"
)

// testNet is a coordinator's network of links, one per stream dialed.
type testNet struct {
	t     *testing.T
	c     *Coordinator
	joins sync.WaitGroup

	mu     sync.Mutex
	down   bool                           // dials fail: the coordinator cannot be reached
	links  map[string][]*link             // by agent name, in the order dialed
	tune   map[string]func(*AgentOptions) // agent name's options beyond the test's own
	served []error                        // what the coordinator's side of each stream returned
}

// serve is the coordinator's side of l, as gRPC would run it: the stream
// ends when join returns.
func (n *testNet) serve(l *link) {
	n.joins.Go(func() {
		err := n.c.join(linkEnd{l: l}, func() {})
		l.end()
		n.mu.Lock()
		n.served = append(n.served, err)
		n.mu.Unlock()
	})
}

// resent is how many of agent name's snapshots it sent more than once.
func (n *testNet) resent(name string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	times := map[uint64]int{}
	for _, l := range n.links[name] {
		l.mu.Lock()
		for _, f := range l.sent {
			if f.Kind == KindSnapshot {
				times[f.Seq]++
			}
		}
		l.mu.Unlock()
	}
	again := 0
	for _, k := range times {
		if k > 1 {
			again++
		}
	}
	return again
}

// dialer is agent name's way to the coordinator (AgentOptions.Redial): a
// new link, served by the coordinator as gRPC would serve a stream, and
// closed when ctx ends or the coordinator's side returns.
func (n *testNet) dialer(name string) func(context.Context) (Stream, error) {
	return func(ctx context.Context) (Stream, error) {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.down {
			return nil, status.Error(codes.Unavailable, "connection refused")
		}
		l := newLink()
		n.links[name] = append(n.links[name], l)
		context.AfterFunc(ctx, l.cut)
		n.serve(l)
		return linkEnd{l: l, agent: true}, nil
	}
}

// link is the last link agent name dialed, and how many it dialed.
func (n *testNet) link(name string) (*link, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ls := n.links[name]
	return ls[len(ls)-1], len(ls)
}

func (n *testNet) setDown(down bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down = down
}

// agent is `headroom agent`'s loop for agent name: join, serve, and join
// again while Retry says so, a second apart, until the run is over. Its
// Serve errors go to errs, the last (nil: the run ended) to done.
func (n *testNet) agent(ctx context.Context, name string, prom *metrics.Prom, leave <-chan struct{}) (done <-chan error, errs func() []error) {
	d := make(chan error, 1)
	var mu sync.Mutex
	var all []error
	dial := n.dialer(name)
	opt := AgentOptions{Token: []byte(testToken), Name: name, Version: "test", Prom: prom, Redial: dial, Leave: leave}
	if tune := n.tune[name]; tune != nil {
		tune(&opt)
	}
	go func() {
		for {
			sctx, hang := context.WithCancel(ctx)
			s, err := dial(sctx)
			if err == nil {
				err = Serve(ctx, s, opt)
			}
			hang() // the process exits, or drops the stream
			mu.Lock()
			all = append(all, err)
			mu.Unlock()
			if err == nil || !Retry(err) {
				d <- err
				return
			}
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				d <- ctx.Err()
				return
			}
		}
	}()
	return d, func() []error {
		mu.Lock()
		defer mu.Unlock()
		return append([]error(nil), all...)
	}
}

// resumeAs makes one resume handshake as an agent with token naming
// session, and hangs up: the coordinator's answer.
func (n *testNet) resumeAs(token, session string) (Welcome, error) {
	l := newLink()
	n.serve(l)
	defer l.cut()
	w, _, err := Greet(linkEnd{l: l, agent: true}, []byte(token), Hello{Version: "test", Name: "x", Cores: 1, Resume: session})
	return w, err
}

// session is the session the coordinator gave agent name at its first join.
func (n *testNet) session(t *testing.T, name string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.links[name][0]
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.got {
		if f.Kind == KindWelcome {
			var w Welcome
			if err := json.Unmarshal(f.Body, &w); err != nil {
				t.Fatal(err)
			}
			return w.Session
		}
	}
	t.Fatalf("agent %s was never welcomed", name)
	return ""
}

// sent is the merge of every snapshot the agents sent, each number of
// each agent process once: what all their samples recorded add up to,
// whatever reached the coordinator.
func (n *testNet) sent() *metrics.Snapshot {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := metrics.NewSnapshot()
	for _, ls := range n.links {
		seen := map[uint64]bool{}
		for _, l := range ls {
			l.mu.Lock()
			for _, f := range l.sent {
				if f.Kind == KindSnapshot && !seen[f.Seq] {
					seen[f.Seq] = true
					if _, err := wire.MergeEncoded(unsealed(f), out); err != nil {
						n.t.Fatal(err)
					}
				}
			}
			l.mu.Unlock()
		}
	}
	return out
}

// resumeScenario's users act a few times a second, each action a sleep
// of its own length timed as a delivery: samples of many latencies in
// virtual time (where an action's own takes none), and no network.
const resumeScenario = `
def act(user):
    stamp = delivery.stamp()
    sleep(0.001 * user.rand.int(1, 300))
    delivery.record(stamp, name="Slept")

worker = user_type("worker", actions=[action("Act", act)], think_time=think.constant("200ms"))
user_types = [worker]
`

// testRun is a run on agents over a testNet, driven as a runner drives a
// Fleet: a Drain a second, Degraded after each.
type testRun struct {
	t          *testing.T
	ctx        context.Context
	cancel     context.CancelFunc
	n          *testNet
	c          *Coordinator
	f          *Fleet
	done       map[string]<-chan error
	errs       map[string]func() []error
	prom       map[string]*metrics.Prom
	kill       map[string]context.CancelFunc // ends agent name's process
	killed     map[string]bool
	leave      map[string]chan struct{} // closed: agent name leaves, as on SIGTERM
	ticks      int
	total      *metrics.Snapshot   // every Drain merged
	seconds    []*metrics.Snapshot // each tick's Drain
	degraded   []string            // "tick: why" of each degraded second
	degradedAt []int               // their ticks
}

// startRun starts a coordinator (with its lease watch, if watch), the
// agents named, and users among them.
func startRun(t *testing.T, watch bool, users int, names ...string) *testRun {
	return startTuned(t, watch, nil, users, names...)
}

// startTuned is startRun with agents' options changed by tune, by name.
func startTuned(t *testing.T, watch bool, tune map[string]func(*AgentOptions), users int, names ...string) *testRun {
	ctx, cancel := context.WithCancel(context.Background())
	c := newCoordinator([]byte(testToken))
	if watch {
		go c.watch()
	}
	r := &testRun{t: t, ctx: ctx, cancel: cancel, c: c, n: &testNet{t: t, c: c, links: map[string][]*link{}, tune: tune},
		done: map[string]<-chan error{}, errs: map[string]func() []error{}, prom: map[string]*metrics.Prom{},
		kill: map[string]context.CancelFunc{}, killed: map[string]bool{}, leave: map[string]chan struct{}{}, total: metrics.NewSnapshot()}
	for _, name := range names {
		r.join(name)
	}
	if err := c.Await(ctx, len(names)); err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Load(ctx, "resume.star", []byte(resumeScenario), scenario.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	r.f = c.Fleet(engine.Config{Scenario: sc, Recorder: metrics.NewRecorder(0, nil, time.Now), Grace: time.Second},
		Start{Path: "resume.star", Source: []byte(resumeScenario), Hash: sc.Hash, Target: "http://127.0.0.1:1", Seed: 1, Grace: time.Second})
	if err := r.f.Init(ctx); err != nil {
		t.Fatal(err)
	}
	r.f.SetUsersBy(users, 0)
	return r
}

// join starts agent name, which dials the coordinator.
func (r *testRun) join(name string) {
	ctx, kill := context.WithCancel(r.ctx)
	r.prom[name], r.kill[name], r.leave[name] = metrics.NewProm(), kill, make(chan struct{})
	r.done[name], r.errs[name] = r.n.agent(ctx, name, r.prom[name], r.leave[name])
}

// killAgent ends agent name's process, as a SIGKILL does: its stream is
// cut, and the coordinator told that its process exited (as
// --local-agents' launcher tells it), so it is lost at once.
func (r *testRun) killAgent(name string) {
	r.killed[name] = true
	r.kill[name]()
	synctest.Wait()
	r.c.Exited(name, errors.New("signal: killed"))
	synctest.Wait()
}

// tick is a second of the run: the runner's Drain and Degraded.
func (r *testRun) tick() { r.tickAfter(time.Second) }

// tickAfter is a tick d after the last thing the test did.
func (r *testRun) tickAfter(d time.Duration) {
	time.Sleep(d)
	r.ticks++
	s := metrics.NewSnapshot()
	r.f.Drain(s)
	if why := r.f.Degraded(); why != "" {
		r.degraded = append(r.degraded, fmt.Sprintf("%d: %s", r.ticks, why))
		r.degradedAt = append(r.degradedAt, r.ticks)
	}
	r.seconds = append(r.seconds, s)
	r.total.Merge(s)
}

// stop ends the run as a runner does, waits for every agent to finish,
// and ends the coordinator.
func (r *testRun) stop() {
	r.f.SetUsersBy(0, 0)
	r.f.Stop()
	s := metrics.NewSnapshot()
	r.f.Drain(s)
	r.total.Merge(s)
	for name, done := range r.done {
		if err := <-done; err != nil && !errors.Is(err, ErrLeft) && !r.killed[name] {
			r.t.Errorf("agent %s ended with %v (all: %v)", name, err, r.errs[name]())
		}
	}
	r.cancel()
	r.c.Close()
	r.n.joins.Wait()
}

// observed is what agent name's Prometheus metrics counted, apart from
// its snapshots: its actions and its deliveries.
func (r *testRun) observed(name string) (actions, deliveries int64) {
	mfs, err := r.prom[name].Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			switch mf.GetName() {
			case "loadtest_actions_total":
				actions += int64(m.GetCounter().GetValue())
			case "loadtest_delivery_time":
				deliveries += int64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return actions, deliveries
}

// sameFigures fails t unless got's actions and deliveries are want's:
// counts, outcomes, histograms.
func sameFigures(t *testing.T, got, want *metrics.Snapshot) {
	t.Helper()
	for _, k := range []struct {
		kind metrics.Kind
		g, w *metrics.Stat
	}{{metrics.Action, got.Actions["Act"], want.Actions["Act"]}, {metrics.Delivery, got.Deliveries["Slept"], want.Deliveries["Slept"]}} {
		g, w := k.g, k.w
		if g == nil || w == nil || w.Count == 0 {
			t.Fatalf("%v: merged %+v, recorded %+v", k.kind, g, w)
		}
		if g.Count != w.Count || g.Errors != w.Errors || g.Canceled != w.Canceled || !g.Hist().Equals(w.Hist()) {
			t.Errorf("%v: merged %d (%d errors, %d canceled), the agents recorded %d (%d, %d); histograms equal: %v",
				k.kind, g.Count, g.Errors, g.Canceled, w.Count, w.Errors, w.Canceled, g.Hist().Equals(w.Hist()))
		}
		if a, b := got.Summaries(k.kind, time.Second), want.Summaries(k.kind, time.Second); !reflect.DeepEqual(a, b) {
			t.Errorf("%v summaries: merged %+v, recorded %+v", k.kind, a, b)
		}
	}
}

// TestAgentResumesWithinItsLease breaks one agent's stream three ways
// mid-run, and it resumes each time within its lease: its snapshot lost
// on the way, the acknowledgement of one lost, and its connection half
// open (only the agent sees it broken; the resume replaces the stream the
// coordinator still holds). The merged figures are exactly what the
// agents recorded, no second is degraded, no user moves, and the result
// has the two agents it began with.
func TestAgentResumesWithinItsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, true, 20, "a", "b")
		for r.ticks < 12 {
			switch r.ticks {
			case 3: // its answer to the next flush is lost with the link
				l, _ := r.n.link("a")
				l.breakOn(KindSnapshot, true)
			case 6: // the coordinator merges its next snapshot, the ack is lost
				l, _ := r.n.link("a")
				l.breakOn(KindAck, false)
			case 9: // between two ticks, only the agent sees the link break
				time.Sleep(400 * time.Millisecond)
				l, _ := r.n.link("a")
				l.cutAgent()
			}
			r.tick()
		}
		_, links := r.n.link("a")
		r.stop()

		if links != 4 {
			t.Errorf("agent a dialed %d streams, want 4: its first and a resume after each of 3 breaks", links)
		}
		for _, name := range []string{"a", "b"} {
			if _, n := r.n.link(name); name == "b" && n != 1 {
				t.Errorf("agent b dialed %d streams, want 1", n)
			}
			if errs := r.errs[name](); len(errs) != 1 {
				t.Errorf("agent %s served %d times (%v), want once: it resumed rather than joined again", name, len(errs), errs)
			}
		}
		if len(r.degraded) > 0 {
			t.Errorf("degraded seconds: %q", r.degraded)
		}
		if n := r.n.resent("a"); n < 2 {
			t.Errorf("agent a sent %d snapshots again, want 2 or more: the one lost, the one whose ack was", n)
		}
		replaced := 0
		for _, err := range r.n.served {
			if err != nil && strings.Contains(err.Error(), "resumed on another stream") {
				replaced++
			}
		}
		if replaced == 0 {
			t.Errorf("no stream was replaced by a resume (the coordinator's sides ended with %v)", r.n.served)
		}
		sent := r.n.sent()
		sameFigures(t, r.total, sent)
		var actions, deliveries int64
		for _, name := range []string{"a", "b"} {
			a, d := r.observed(name)
			actions, deliveries = actions+a, deliveries+d
		}
		if a, d := r.total.Actions["Act"], r.total.Deliveries["Slept"]; a.Count != actions || d.Count != deliveries {
			t.Errorf("merged %d actions and %d deliveries, the agents' own metrics counted %d and %d", a.Count, d.Count, actions, deliveries)
		}
		res := r.f.Agents(0)
		if len(res.Faults) != 0 || len(res.Agents) != 2 || res.Coverage != 1 {
			t.Fatalf("agents %+v, faults %+v, coverage %v: want the two agents, no fault", res.Agents, res.Faults, res.Coverage)
		}
		for _, a := range res.Agents {
			if a.Lost != "" || a.Peak != 10 {
				t.Errorf("agent %+v: want 10 users at its peak (none moved), not lost", a)
			}
		}
		d := r.total.Deliveries["Slept"]
		t.Logf("%d actions and %d deliveries (%d µs to %d µs) merged over %d s, exactly as recorded",
			r.total.Actions["Act"].Count, d.Count, d.Hist().Min(), d.Hist().Max(), r.ticks)
	})
}

// TestAgentLeavesWithEverySample tells one agent to leave mid-run, as
// SIGTERM does: it stops its users, its last snapshot and a Done go, and
// it ends once they are acknowledged; the coordinator moves its users to
// the other agent. Nothing it recorded is lost: the merged figures are
// exactly what the agents sent, which is what their own metrics counted.
func TestAgentLeavesWithEverySample(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, true, 20, "a", "b")
		for r.ticks < 10 {
			if r.ticks == 4 {
				time.Sleep(300 * time.Millisecond) // mid-second: its users mid-action
				close(r.leave["a"])
			}
			r.tick()
		}
		var left error
		select {
		case left = <-r.done["a"]:
		default:
			t.Fatal("agent a had not ended 6 s after it was told to leave")
		}
		r.done["a"] = closedWith(left)
		r.stop()
		if !errors.Is(left, ErrLeft) {
			t.Errorf("agent a ended with %v, want ErrLeft", left)
		}
		sameFigures(t, r.total, r.n.sent())
		for _, name := range []string{"a", "b"} {
			acts, dels := r.observed(name)
			sent := r.n.sentBy(t, name)
			if sent.Actions["Act"].Count != acts || sent.Deliveries["Slept"].Count != dels {
				t.Errorf("agent %s sent %d actions and %d deliveries; its own metrics counted %d and %d", name,
					sent.Actions["Act"].Count, sent.Deliveries["Slept"].Count, acts, dels)
			}
		}
		res := r.f.Agents(0)
		if len(res.Faults) != 1 || res.Faults[0].Name != "a" || res.Faults[0].Users != 10 || res.Faults[0].To != 1 {
			t.Errorf("faults %+v: want a's 10 users moved to b", res.Faults)
		}
		byName := map[string]result.Agent{}
		for _, a := range res.Agents {
			byName[a.Name] = a
		}
		if a := byName["a"]; !strings.Contains(a.Lost, "left the run") {
			t.Errorf("agent a in the result: %+v; want it said to have left", a)
		}
		if b := byName["b"]; b.Peak != 20 {
			t.Errorf("agent b peaked at %d users, want 20: a's users moved to it", b.Peak)
		}
		t.Logf("agent a left at 4.3 s; %d actions merged, as the agents recorded them; degraded: %q", r.total.Actions["Act"].Count, r.degraded)
	})
}

// TestAgentThatLeftIsReplaced: an agent that left the run (its pod
// deleted: SIGTERM) frees its place, and a new agent of its name (the pod
// the Job makes again) takes it and runs its share again.
func TestAgentThatLeftIsReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, true, 20, "a", "b")
		for r.ticks < 3 {
			r.tick()
		}
		close(r.leave["a"])
		for r.ticks < 6 {
			r.tick()
		}
		select {
		case err := <-r.done["a"]:
			r.done["a"] = closedWith(err)
		default:
			t.Fatal("agent a had not ended 3 s after it was told to leave")
		}
		r.join("a")
		for r.ticks < 12 {
			r.tick()
		}
		users, ready := r.f.Users(), r.f.Ready()
		res := r.f.Agents(0)
		left := -1
		for _, a := range res.Agents {
			if a.Name == "a" && strings.Contains(a.Lost, "left the run") {
				left = a.Index
			}
		}
		var again bool
		for _, a := range res.Agents {
			if a.Name == "a" && a.JoinedS > 3 && a.Index == left && a.Peak > 0 && a.Lost == "" {
				again = true
			}
		}
		if !again { // refused a place, it would dial again until its wait ends
			r.killed["a"] = true
			r.kill["a"]()
		}
		r.stop()
		if len(res.Agents) != 3 || !again {
			t.Errorf("agents %+v: want a (left), b, and a again in a's place, with users", res.Agents)
		}
		if users != 20 || ready != 20 {
			t.Errorf("at the end %d users, %d ready: want 20", users, ready)
		}
	})
}

// closedWith is a channel that yields err once.
func closedWith(err error) <-chan error {
	c := make(chan error, 1)
	c <- err
	return c
}

// TestAgentPastItsLeaseRejoins cuts an agent off for longer than its
// lease: it cannot resume, the coordinator loses it (its users move, the
// seconds are degraded), a resume of its session is refused afterwards,
// and the agent stops its users and joins again as a new agent, in its
// own place.
func TestAgentPastItsLeaseRejoins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, true, 20, "a", "b")
		for r.ticks < 3 {
			r.tick()
		}
		session := r.n.session(t, "a")
		r.n.setDown(true)
		l, _ := r.n.link("a")
		l.cut()
		for r.ticks < 10 { // past the lease (5 s) and the agent's own try
			r.tick()
		}
		if _, err := r.n.resumeAs(testToken, session); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "no agent of that session") {
			t.Errorf("a resume past the lease: %v, want refused", err)
		}
		r.n.setDown(false)
		for r.ticks < 16 {
			r.tick()
		}
		users, ready := r.f.Users(), r.f.Ready()
		res := r.f.Agents(0)
		r.stop()

		errs := r.errs["a"]()
		if len(errs) < 2 || !strings.Contains(errs[0].Error(), "could not resume within its lease") {
			t.Errorf("agent a's runs ended with %v, want the first: could not resume within its lease", errs)
		}
		if len(res.Faults) != 1 {
			t.Fatalf("faults %+v, want agent a's", res.Faults)
		}
		ft := res.Faults[0]
		if ft.Name != "a" || ft.Users != 10 || ft.To != 1 || !strings.Contains(ft.Reason, "did not resume within its lease") || ft.RecoveredT <= ft.T {
			t.Errorf("fault %+v: want a's 10 users moved to b, a not resumed within its lease", ft)
		}
		if len(r.degraded) == 0 {
			t.Error("no second degraded while agent a was away and lost")
		}
		if len(r.degradedAt) > 0 && r.degradedAt[0] <= 3 {
			t.Errorf("degraded before the cut: %q", r.degraded)
		}
		var late bool
		for _, a := range res.Agents {
			if a.Name == "a" && a.JoinedS > ft.T && a.Index == ft.Index && a.Peak > 0 && a.Lost == "" {
				late = true
			}
		}
		if len(res.Agents) != 3 || !late {
			t.Errorf("agents %+v: want a, b, and a again in a's place, with users", res.Agents)
		}
		if users != 20 || ready != 20 {
			t.Errorf("at the end %d users, %d ready: want 20", users, ready)
		}
		t.Logf("degraded: %q", r.degraded)
	})
}

// TestResumeRefused: a resume with the wrong token, or naming a session
// the coordinator does not know, is refused and leaves the agent's place
// as it was; one whose lease has passed (no lease watch here: the resume
// itself finds it) is refused, and the agent is lost then.
func TestResumeRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRun(t, false, 20, "a", "b")
		r.tick()
		session := r.n.session(t, "a")
		r.c.mu.Lock()
		held := r.c.remotes[0].cur.Load()
		r.c.mu.Unlock()
		for _, tc := range []struct{ token, session, why string }{
			{"fedcba9876543210fedc", session, "the agent's token does not match"},
			{testToken, "0123456789abcdef0123456789abcdef", "no agent of that session"},
		} {
			if _, err := r.n.resumeAs(tc.token, tc.session); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("a resume with token %q of session %q: %v, want refused: %s", tc.token, tc.session, err, tc.why)
			}
		}
		r.tick()
		r.c.mu.Lock()
		if r.c.remotes[0].cur.Load() != held || r.c.remotes[0].ended {
			t.Error("a refused resume moved agent a off its stream")
		}
		r.c.mu.Unlock()
		if len(r.degraded) > 0 {
			t.Errorf("degraded %q", r.degraded)
		}

		// Agent a is cut off; without a lease watch, the coordinator keeps
		// its place until a resume finds the lease passed.
		r.n.setDown(true)
		l, _ := r.n.link("a")
		l.cut()
		for r.ticks < 9 {
			r.tick()
		}
		if res := r.f.Agents(0); len(res.Faults) != 0 {
			t.Fatalf("agent a lost %+v with no watch nor resume", res.Faults)
		}
		if _, err := r.n.resumeAs(testToken, session); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "did not resume within its lease") {
			t.Errorf("a resume past the lease: %v, want refused", err)
		}
		synctest.Wait() // the coordinator tells its fleet once it has answered
		res := r.f.Agents(0)
		if len(res.Faults) != 1 || res.Faults[0].Name != "a" || res.Faults[0].Users != 10 || res.Faults[0].To != 1 {
			t.Errorf("faults %+v: want agent a lost by the late resume, its 10 users moved to b", res.Faults)
		}
		r.n.setDown(false)
		r.tick()
		r.tick()
		r.stop()
	})
}
