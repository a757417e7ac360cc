package agents

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/headroom-dev/headroom/internal/memlimit"
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
