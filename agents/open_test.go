package agents

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/metrics/wire"
)

// sentBy is the merge of every snapshot agent name sent (each number
// once): what its users recorded.
func (n *testNet) sentBy(t *testing.T, name string) *metrics.Snapshot {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := metrics.NewSnapshot()
	seen := map[uint64]bool{}
	for _, l := range n.links[name] {
		l.mu.Lock()
		for _, f := range l.sent {
			if f.Kind == KindSnapshot && !seen[f.Seq] {
				seen[f.Seq] = true
				if _, err := wire.MergeEncoded(unsealed(f), out); err != nil {
					t.Fatal(err)
				}
			}
		}
		l.mu.Unlock()
	}
	return out
}

// arrivalsOf is what s counted of the open model's arrivals.
func arrivalsOf(s *metrics.Snapshot) *metrics.Stat {
	if st := s.Arrivals[engine.ArrivalsName]; st != nil {
		return st
	}
	return metrics.NewStat()
}

// openRun starts a run of the open model on the agents named, its pool
// set up, and the schedule of r spaced sp started at a tick (so that the
// schedule's seconds are the ticks'). It returns the schedule, and the
// tick it started after.
func openRun(t *testing.T, m engine.OpenModel, r engine.Rate, sp engine.Spacing, names ...string) (*testRun, *engine.Schedule, int) {
	run := startRun(t, true, 0, names...)
	if err := run.f.StartOpen(m); err != nil {
		t.Fatal(err)
	}
	for run.f.Ready() < m.PreAllocated {
		run.tick()
		if run.ticks > 10 {
			t.Fatalf("%d of %d users set up after %d s", run.f.Ready(), m.PreAllocated, run.ticks)
		}
	}
	sc, err := engine.NewSchedule(r, sp, 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := run.f.SetPacer(sc); err != nil {
		t.Fatal(err)
	}
	return run, sc, run.ticks
}

// due is how many of sc's arrivals are due in its k-th second (from 0).
func due(k int, sc *engine.Schedule) int64 {
	return sc.Index(time.Duration(k+1)*time.Second) - sc.Index(time.Duration(k)*time.Second)
}

// TestOpenModelOnAgents: three agents run a pool of 30 and a schedule of
// 60 arrivals a second between them. The merged arrivals are exactly the
// schedule's, second by second, none dropped; each agent started its
// third of them on its third of the pool; no second is degraded.
func TestOpenModelOnAgents(t *testing.T) {
	for _, sp := range []engine.Spacing{engine.Even, engine.Poisson} {
		synctest.Test(t, func(t *testing.T) {
			names := []string{"a", "b", "c"}
			r, sc, began := openRun(t, engine.OpenModel{PreAllocated: 30, MaxUsers: 30}, engine.Constant(60, 10*time.Second), sp, names...)
			for r.ticks < began+11 {
				r.tick()
			}
			users := r.f.Users()
			if err := r.f.SetPacer(nil); err != nil {
				t.Fatal(err)
			}
			r.stop()

			total := sc.Index(engine.Forever)
			a := arrivalsOf(r.total)
			if a.Count != total || a.Dropped != 0 || a.Canceled != 0 {
				t.Errorf("%v: %d arrivals started, %d dropped, %d canceled; the schedule has %d", sp, a.Count, a.Dropped, a.Canceled, total)
			}
			if sp == engine.Even && total != 600 {
				t.Errorf("the schedule has %d arrivals, want 600", total)
			}
			for k := range 10 {
				if got, want := arrivalsOf(r.seconds[began+k]).Count, due(k, sc); got != want {
					t.Errorf("%v: second %d: %d arrivals started, the schedule's %d", sp, k, got, want)
				}
			}
			for _, name := range names {
				mine := arrivalsOf(r.n.sentBy(t, name)).Count
				if d := mine - total/3; d < -2 || d > 2 { // the pattern deals a, b, c in turn
					t.Errorf("%v: agent %s started %d arrivals, want a third of %d", sp, name, mine, total)
				}
			}
			if users != 30 {
				t.Errorf("%d users in the agents' pools, want 30", users)
			}
			if len(r.degraded) > 0 {
				t.Errorf("degraded: %q", r.degraded)
			}
		})
	}
}

// TestOpenModelAgentLost: one of three agents is killed mid-run. Its
// share of the pool and of the arrivals moves to the two others, from the
// arrival due then; the seconds until they have its users set up are
// degraded, and every other second has exactly the schedule's arrivals.
// A new agent that takes its place later gets a share of the pool, and
// its share of the arrivals once its pool is set up: the seconds stay the
// schedule's.
func TestOpenModelAgentLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, sc, began := openRun(t, engine.OpenModel{PreAllocated: 30, MaxUsers: 30}, engine.Constant(60, 20*time.Second), engine.Even, "a", "b", "c")
		for r.ticks < began+4 {
			r.tick()
		}
		time.Sleep(400 * time.Millisecond)
		r.killAgent("b")
		r.tickAfter(600 * time.Millisecond) // the ticks stay the schedule's seconds
		for r.ticks < began+9 {
			r.tick()
		}
		survivors := r.f.Users()
		r.join("d")
		for r.ticks < began+21 {
			r.tick()
		}
		users := r.f.Users()
		res := r.f.Agents(0)
		if err := r.f.SetPacer(nil); err != nil {
			t.Fatal(err)
		}
		r.stop()

		if len(res.Faults) != 1 || res.Faults[0].Name != "b" || res.Faults[0].Users != 10 || res.Faults[0].To != 2 || res.Faults[0].RecoveredT <= res.Faults[0].T {
			t.Fatalf("faults %+v: want b's 10 users of the pool moved to 2 agents", res.Faults)
		}
		if survivors != 30 || users != 40 {
			t.Errorf("%d users in the pools after the loss, %d once d joined: want 30 (a and c 15 each), then 40 (d's 10 besides)", survivors, users)
		}
		degraded := map[int]bool{}
		for _, k := range r.degradedAt {
			degraded[k] = true
		}
		if !degraded[began+5] || len(degraded) > 2 || degraded[began+4] {
			t.Errorf("degraded: %q; want the second of the loss (%d), and at most the next", r.degraded, began+5)
		}
		var kept, want int64
		for k := range 20 {
			tick := began + k + 1 // r.seconds[tick-1] is tick's
			got := arrivalsOf(r.seconds[tick-1])
			if got.Dropped != 0 {
				t.Errorf("second %d: %d arrivals dropped", k, got.Dropped)
			}
			if degraded[tick] {
				continue
			}
			kept, want = kept+got.Count, want+due(k, sc)
			if got.Count != due(k, sc) {
				t.Errorf("second %d: %d arrivals started, the schedule's %d", k, got.Count, due(k, sc))
			}
		}
		if kept != want || want < 60*18 {
			t.Errorf("%d arrivals in the seconds not degraded, the schedule's %d", kept, want)
		}
		d := arrivalsOf(r.n.sentBy(t, "d")).Count
		if d < 150 || d > 220 { // a third of 11 s at 60/s, less a second at most before its pool was set up
			t.Errorf("agent d, in b's place from second 9, started %d arrivals; want about a third of 11 s at 60/s", d)
		}
		t.Logf("degraded %q; d started %d arrivals", r.degraded, d)
	})
}

// TestOpenModelAgentResumes: an agent whose stream breaks mid-second
// resumes its place, and is sent its share of the pool and of the
// arrivals again, from the arrival due then: none is lost or started
// twice, and no second is degraded.
func TestOpenModelAgentResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, sc, began := openRun(t, engine.OpenModel{PreAllocated: 20, MaxUsers: 20}, engine.Constant(50, 8*time.Second), engine.Poisson, "a", "b")
		for r.ticks < began+3 {
			r.tick()
		}
		time.Sleep(300 * time.Millisecond)
		l, _ := r.n.link("a")
		l.cut()
		r.tickAfter(700 * time.Millisecond)
		for r.ticks < began+9 {
			r.tick()
		}
		if err := r.f.SetPacer(nil); err != nil {
			t.Fatal(err)
		}
		l, links := r.n.link("a")
		r.stop()

		if links != 2 {
			t.Fatalf("agent a dialed %d streams, want 2: it resumed once", links)
		}
		var again *Pacer
		l.mu.Lock()
		for _, f := range l.got {
			if f.Kind == KindPacer && again == nil {
				again = &Pacer{}
				if err := json.Unmarshal(unsealed(f), again); err != nil {
					t.Fatal(err)
				}
			}
		}
		l.mu.Unlock()
		if again == nil || again.Offset != 3300*time.Millisecond || again.From != sc.Index(again.Offset) || again.Anchor != 0 {
			t.Errorf("on its resume agent a was sent %+v, want its share from the arrival due at 3.3 s", again)
		}
		if a := arrivalsOf(r.total); a.Count != sc.Index(engine.Forever) || a.Dropped != 0 {
			t.Errorf("%d arrivals started, %d dropped; the schedule has %d", a.Count, a.Dropped, sc.Index(engine.Forever))
		}
		for k := range 8 {
			if got, want := arrivalsOf(r.seconds[began+k]).Count, due(k, sc); got != want {
				t.Errorf("second %d: %d arrivals started, the schedule's %d", k, got, want)
			}
		}
		if len(r.degraded) > 0 {
			t.Errorf("degraded: %q", r.degraded)
		}
	})
}

// TestOpenModelRefusesOldAgents: an agent of a headroom before the open
// model on agents (no Hello.Proto) is not started in the open model, nor
// taken into an open run's lost place; a pacer that is not a Schedule is
// refused.
func TestOpenModelRefusesOldAgents(t *testing.T) {
	c, f, _, sinks := fleetOf(2)
	c.remotes[1].hello.Proto = protoOpen
	c.remotes[1].hello.Version = "new"
	c.remotes[0].hello.Version = "v0.9"
	err := f.StartOpen(engine.OpenModel{MaxUsers: 4})
	if err == nil || !strings.Contains(err.Error(), "agent 0 (a) (headroom v0.9)") || !strings.Contains(err.Error(), "upgrade") {
		t.Fatalf("StartOpen on an agent of before: %v", err)
	}
	if err := f.SetPacer(nil); !errors.Is(err, engine.ErrNotOpen) {
		t.Errorf("SetPacer before StartOpen: %v", err)
	}
	c.remotes[0].hello.Proto = protoOpen
	if err := f.StartOpen(engine.OpenModel{MaxUsers: 3, PreAllocated: 1, Connections: 1}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []Open{{MaxUsers: 2, PreAllocated: 1, Connections: 1}, {MaxUsers: 1, Connections: 1}} {
		if got := lastOf[Open](t, sinks[i], KindOpen); got == nil || *got != want {
			t.Errorf("agent %d's share of the pool %+v, want %+v (each at least one user and one connection)", i, got, want)
		}
	}
	if err := f.SetPacer(stepPacer{}); err == nil || !strings.Contains(err.Error(), "engine.Schedule") {
		t.Errorf("SetPacer of another pacer: %v", err)
	}
	sc, _ := engine.NewSchedule(engine.Constant(10, engine.Forever), engine.Even, 0)
	if err := f.SetPacer(sc); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if p := lastOf[Pacer](t, sinks[i], KindPacer); p == nil || p.Cycle != 2 || len(p.Positions) != 1 || p.Positions[0] != int64(i) {
			t.Errorf("agent %d's share of the arrivals %+v, want every other one", i, p)
		}
	}
	lose(c, f, 1, "boom")
	if p := lastOf[Pacer](t, sinks[0], KindPacer); p == nil || p.Cycle != 1 || len(p.Positions) != 1 {
		t.Errorf("after the loss agent 0's share %+v, want every arrival", p)
	}
	if o := lastOf[Open](t, sinks[0], KindOpen); o == nil || o.MaxUsers != 3 || o.PreAllocated != 1 || o.Connections != 1 {
		t.Errorf("after the loss agent 0's pool %+v, want the whole: 3 users, 1 in advance, its 1 connection", o)
	}
	c.mu.Lock()
	_, _, _, err = c.admit(Hello{Name: "x", Version: "v0.9", Cores: 1}, &attachment{s: &sink{}})
	c.mu.Unlock()
	if err == nil || !strings.Contains(err.Error(), "open model") || errors.Is(err, ErrLater) {
		t.Errorf("an agent of before in an open run's lost place: %v", err)
	}
	if err := f.SetPacer(nil); err != nil {
		t.Fatal(err)
	}
	if p := lastOf[Pacer](t, sinks[0], KindPacer); p == nil || !p.Stop {
		t.Errorf("SetPacer(nil): agent 0's last pacer %+v, want stop", p)
	}
}

// stepPacer is a Pacer that is not a Schedule.
type stepPacer struct{}

func (stepPacer) Pace(time.Duration, int64) (time.Duration, bool) { return 0, true }

// lastOf is the body of the last frame of kind k s got, or nil.
func lastOf[T any](t *testing.T, s *sink, k Kind) *T {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.frames) - 1; i >= 0; i-- {
		if s.frames[i].Kind == k {
			var v T
			if err := json.Unmarshal(s.frames[i].Body, &v); err != nil {
				t.Fatal(err)
			}
			return &v
		}
	}
	return nil
}
