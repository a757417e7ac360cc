package agents

import (
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/metrics"
)

// sink is a Stream that keeps what the coordinator sends an agent.
type sink struct {
	mu     sync.Mutex
	frames []*Frame
}

func (s *sink) Send(f *Frame) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frames = append(s.frames, f)
	return nil
}

func (s *sink) Recv() (*Frame, error) { select {} }

// users is the last share the coordinator sent, or -1.
func (s *sink) users(t *testing.T) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.frames) - 1; i >= 0; i-- {
		if s.frames[i].Kind == KindUsers {
			var u Users
			if err := json.Unmarshal(s.frames[i].Body, &u); err != nil {
				t.Fatal(err)
			}
			return u.N
		}
	}
	return -1
}

// fleetOf is a coordinator of n started agents of one core each, on a
// clock the test moves, with no network: the fault logic alone.
func fleetOf(n int) (*Coordinator, *Fleet, *time.Time, []*sink) {
	now := time.Unix(1000, 0)
	c := &Coordinator{now: func() time.Time { return now }, lease: defaultLease, changed: make(chan struct{}), started: true}
	f := &Fleet{c: c, began: now, local: engine.Config{Recorder: metrics.NewRecorder(0, nil, time.Now)}}
	c.fleet = f
	var sinks []*sink
	for i := range n {
		s := &sink{}
		sinks = append(sinks, s)
		r := &remote{index: i, hello: Hello{Name: string(rune('a' + i)), Cores: 1}, kill: make(chan struct{}),
			joined: now, heard: now, sent: now, statusN: 1}
		r.cur.Store(&attachment{s: s})
		c.remotes = append(c.remotes, r)
	}
	return c, f, &now, sinks
}

// report is agent i's status arriving at the coordinator.
func report(c *Coordinator, i, users, ready int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.remotes[i]
	r.status, r.statusN, r.heard = Status{Users: users, Ready: ready}, r.statusN+1, c.now()
}

// lose ends agent i's stream as join does.
func lose(c *Coordinator, f *Fleet, i int, why string) {
	c.mu.Lock()
	r := c.remotes[i]
	c.end(r, ended(errString(why)), c.now())
	c.mu.Unlock()
	f.lost(r)
}

type errString string

func (e errString) Error() string { return string(e) }

// TestLostAgentsUsersMove: a lost agent's users go to the others, and the
// seconds until those report them set up are degraded, not longer.
func TestLostAgentsUsersMove(t *testing.T) {
	c, f, now, sinks := fleetOf(3)
	f.SetUsersBy(30, 0)
	for i := range 3 {
		if got := sinks[i].users(t); got != 10 {
			t.Fatalf("agent %d was given %d users, want 10", i, got)
		}
		report(c, i, 10, 10)
	}
	if why := f.Degraded(); why != "" {
		t.Fatalf("degraded %q with every agent heard from", why)
	}
	*now = now.Add(4 * time.Second)
	for i := range 3 {
		report(c, i, 10, 10)
	}
	lose(c, f, 1, "boom")
	if a, b := sinks[0].users(t), sinks[2].users(t); a+b != 30 || a != 15 {
		t.Fatalf("after the loss the others were given %d and %d users, want 15 each", a, b)
	}
	if why := f.Degraded(); !strings.Contains(why, "agent 1 (b) lost at 4.0 s: boom") {
		t.Fatalf("the second of the loss: degraded %q", why)
	}
	// A status from before the move, or one with the users not yet set
	// up, does not end it.
	*now = now.Add(time.Second)
	report(c, 0, 15, 12)
	report(c, 2, 15, 15)
	if why := f.Degraded(); why == "" {
		t.Fatal("not degraded while agent 0 has 3 users setting up")
	}
	*now = now.Add(time.Second)
	report(c, 0, 15, 15)
	report(c, 2, 15, 15)
	if why := f.Degraded(); why == "" {
		t.Fatal("the second the users were set up is degraded too: it held the setups")
	}
	if why := f.Degraded(); why != "" {
		t.Fatalf("still degraded after the users were set up: %q", why)
	}
	a := f.Agents(2)
	if len(a.Faults) != 1 || a.Faults[0].Users != 10 || a.Faults[0].To != 2 || a.Faults[0].RecoveredT != 6 {
		t.Errorf("faults %+v: want agent 1's 10 users moved to 2, set up again at 6 s", a.Faults)
	}
	if a.Agents[1].Lost == "" || a.Agents[1].LeftS != 4 || math.Abs(a.Coverage-16.0/18) > 1e-9 {
		t.Errorf("agent 1 %+v, coverage %v: want it lost at 4 s of 6, coverage 16 agent-seconds of 18", a.Agents[1], a.Coverage)
	}
}

// TestLeases: an agent that does not send its second when asked makes
// the second degraded; past its lease its stream is stopped; one that has
// not started is given startTimeout.
func TestLeases(t *testing.T) {
	c, f, now, _ := fleetOf(2)
	c.remotes[1].statusN = 0 // sent Start, still loading
	f.flushWait = 10 * time.Millisecond
	*now = now.Add(time.Second)
	report(c, 0, 0, 0)
	f.Drain(metrics.NewSnapshot())
	if why := f.Degraded(); !strings.Contains(why, "agent 0 (a) did not send its second within 10ms") {
		t.Fatalf("agent 0 did not answer the flush: degraded %q", why)
	}
	c.mu.Lock()
	c.remotes[0].flushed = f.tick + 1 // it answers the next
	c.mu.Unlock()
	f.Drain(metrics.NewSnapshot())
	if why := f.Degraded(); why != "" {
		t.Fatalf("degraded %q once agent 0 answered", why)
	}
	if a := f.Agents(1); a.LateSeconds != 1 || len(a.Faults) != 0 {
		t.Errorf("late seconds %d, faults %v: want the one late second, no agent lost", a.LateSeconds, a.Faults)
	}
	*now = now.Add(2 * time.Second)
	*now = now.Add(3500 * time.Millisecond)
	c.checkLeases(c.now())
	select {
	case <-c.remotes[0].kill:
		if !strings.Contains(c.remotes[0].why.Error(), "stalled: nothing heard from it for 5.5s") {
			t.Errorf("why: %v", c.remotes[0].why)
		}
	default:
		t.Fatal("agent 0, silent 5.5 s, was not stopped")
	}
	select {
	case <-c.remotes[1].kill:
		t.Fatal("agent 1, loading its scenario for 6.5 s, was stopped")
	default:
	}
	*now = now.Add(startTimeout)
	c.checkLeases(c.now())
	select {
	case <-c.remotes[1].kill:
	default:
		t.Fatalf("agent 1 had not started %v after Start and was not stopped", startTimeout)
	}
}

// TestLateAgentTakesALostPlace: once the run has begun an agent joins
// only in a lost one's place, the one of its own name first, and its
// users' ids go on past that place's.
func TestLateAgentTakesALostPlace(t *testing.T) {
	c, f, _, _ := fleetOf(3)
	if i := c.place("z"); i != -1 {
		t.Fatalf("a place (%d) with every agent running", i)
	}
	lose(c, f, 0, "x")
	lose(c, f, 2, "y")
	if i := c.place("c"); i != 2 {
		t.Errorf("agent c came back to place %d, want its own, 2", i)
	}
	if i := c.place("z"); i != 0 {
		t.Errorf("a new agent took place %d, want the first free, 0", i)
	}
	first, next := ids(2, 3, 0), ids(2, 3, 1*placeIDs)
	if first(1) != 3 || first(2) != 6 || next(1) <= first(placeIDs-1) || (next(1)-3)%3 != 0 {
		t.Errorf("ids: first agent %d, %d; its successor begins at %d", first(1), first(2), next(1))
	}
}

// TestLostAgentsGaugesGo: a lost agent's counters stay in the fleet's
// metrics (they must not fall back), its gauges (open connections) go.
func TestLostAgentsGaugesGo(t *testing.T) {
	c, f, _, _ := fleetOf(2)
	for _, r := range c.remotes {
		p := metrics.NewProm()
		p.Observe(metrics.Sample{Kind: metrics.Request, Name: "GET /", Status: 200, Latency: time.Millisecond})
		p.Observe(metrics.Sample{Kind: metrics.Opened, Name: "WS /ws"})
		mfs, err := p.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		r.families = mfs
	}
	read := func() (requests, conns float64) {
		for _, mf := range f.Metrics() {
			switch mf.GetName() {
			case "loadtest_http_request_time":
				requests = float64(mf.Metric[0].Histogram.GetSampleCount())
			case "loadtest_websocket_connections":
				conns = mf.Metric[0].Gauge.GetValue()
			}
		}
		return
	}
	if r, n := read(); r != 2 || n != 2 {
		t.Fatalf("two agents: %v requests, %v connections, want 2 and 2", r, n)
	}
	lose(c, f, 1, "gone")
	if r, n := read(); r != 2 || n != 1 {
		t.Errorf("one lost: %v requests, %v connections, want its request kept (2) and its connection gone (1)", r, n)
	}
}
