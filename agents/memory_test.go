package agents

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/internal/memlimit"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario"
)

// TestAgentPastItsMaxMemoryStopsTheRun: an agent whose memory passes its
// --max-memory cancels its own users at once and says so in its status;
// the fleet then gives the runner a *memlimit.Error naming the agent, as a
// run of one process stops with its own. The other agent's users run on
// until the runner stops the run. (The memory is the test's: a sample
// that passes the limit when told to.)
func TestAgentPastItsMaxMemoryStopsTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var over atomic.Bool
		const limit = 1 << 40
		tune := map[string]func(*AgentOptions){"b": func(o *AgentOptions) {
			o.MaxMemory = limit
			o.memSample = func() uint64 {
				if over.Load() {
					return 2 * limit
				}
				return 1 << 30
			}
		}}
		r := startTuned(t, true, tune, 20, "a", "b")
		for range 3 {
			r.tick()
		}
		if err := r.f.Stopped(); err != nil {
			t.Fatalf("stopped under the limit: %v", err)
		}
		over.Store(true)
		r.tick()
		err := r.f.Stopped()
		var me *memlimit.Error
		if !errors.As(err, &me) {
			t.Fatalf("Stopped() = %v after agent b passed its limit, want a *memlimit.Error", err)
		}
		if !strings.HasSuffix(me.Agent, "(b)") || me.Used != 2*limit || me.Limit != limit || me.Users != 10 {
			t.Errorf("error %+v: want agent b's, 2 TiB of 1 TiB, with its 10 users", me)
		}
		doing := 0
		for _, n := range me.Doing {
			doing += n
		}
		if doing > me.Users {
			t.Errorf("%d users doing %v, of %d", doing, me.Doing, me.Users)
		}
		if n := me.Note(); !strings.Contains(n, "headroom's memory on "+me.Agent+" reached 2097152 MiB, past its limit of 1048576 MiB (--max-memory)") {
			t.Errorf("note: %s", n)
		}
		r.tick()
		users := map[string]int{}
		r.c.mu.Lock()
		for _, rm := range r.c.remotes {
			users[rm.hello.Name] = rm.status.Users
		}
		r.c.mu.Unlock()
		if users["b"] != 0 || users["a"] != 10 {
			t.Errorf("users by agent a second later: %v; want b's cancelled, a's 10 running on", users)
		}
		r.stop()
	})
}

// TestAgentPastItsMaxMemoryTakesNoNewShare: an agent that cancelled its
// users for its --max-memory keeps none, whatever share is dealt to it
// before the run stops (another agent lost meanwhile): a larger pool of
// the open model, which its aborted engine cannot grow, must not end it
// as a fault of its own.
func TestAgentPastItsMaxMemoryTakesNoNewShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc, err := scenario.Load(context.Background(), "a.star", []byte(resumeScenario), scenario.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		rec := metrics.NewRecorder(0, nil, time.Now)
		e := engine.New(engine.Config{Scenario: sc, Target: &url.URL{Scheme: "http", Host: "127.0.0.1:1"}, Seed: 1, Recorder: rec, Grace: time.Second})
		if err := e.StartOpen(engine.OpenModel{PreAllocated: 2, MaxUsers: 2}); err != nil {
			t.Fatal(err)
		}
		e.Abort("headroom's memory passed --max-memory")
		s := &sink{}
		a := &agent{e: e, rec: rec, total: metrics.NewStat(), open: true, s: s, over: &memlimit.Error{Used: 2, Limit: 1}}
		for _, f := range []struct {
			k Kind
			v any
		}{{KindOpen, Open{PreAllocated: 4, MaxUsers: 4}}, {KindUsers, Users{N: 10}}} {
			body, _ := json.Marshal(f.v)
			if err := a.handle(&Frame{Kind: f.k, Body: body}); err != nil {
				t.Errorf("a %s frame after its memory stop: %v", f.k, err)
			}
		}
		if a.want != 0 || len(s.frames) != 0 {
			t.Errorf("wants %d users, sent %d frames; want none, and nothing said", a.want, len(s.frames))
		}
		e.Stop()
	})
}
