//go:build unix

package runner

import (
	"context"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/internal/memlimit"
	"github.com/headroom-dev/headroom/result"
)

// An action that doubles a string in a loop would take all the machine's
// memory and kill headroom; with --max-memory the run stops cleanly, its
// result written with status stopped and a note naming the action.
func TestMaxMemoryStopsTheRunCleanly(t *testing.T) {
	target := httpbinServer(t)
	sc := load(t, `
def grow(user):
    user.http.get("/get", name="get")
    s = "x"
    for i in range(40):
        s = s + s
actions = [action("Grow", grow)]
`)
	out := t.TempDir() + "/out"
	// Memory the process no longer uses but has not given back (what an
	// earlier test, or init reading a data file, left) is not the run's:
	// 600 MiB of it, left with the collector off so none is reclaimed
	// before the watch starts, must not stop the run at its first sample
	// (taken at once here: every millisecond).
	gc := debug.SetGCPercent(-1)
	garbage := make([][]byte, 600)
	for i := range garbage {
		garbage[i] = make([]byte, 1<<20)
		for j := 0; j < len(garbage[i]); j += 4096 {
			garbage[i][j] = 1 // touched: resident, as a real one is
		}
	}
	garbage = nil
	debug.SetGCPercent(gc)
	t.Logf("the process holds %d MiB before the run", memlimit.Used()>>20)
	start := time.Now()
	res, err := (&Bounded{Common: Common{Scenario: sc, Target: target, Out: out, Grace: time.Second, MaxMemory: 512 << 20, memEvery: time.Millisecond},
		Users: 1, Duration: 5 * time.Minute}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	t.Logf("stopped after %v; peak RSS of the test process %d MiB", time.Since(start).Round(time.Millisecond), ru.Maxrss>>10)
	// Stopped well before its 5 minutes: ~3 s here, 27 s beside two busy
	// loops and the test command's other packages (Synapse's among them,
	// at a higher priority), the doubling string's copies slowed with the
	// rest. The bound sits far from both: 4 times the slowest seen, and
	// less than half the run's length that a missed limit would take.
	if time.Since(start) > 2*time.Minute {
		t.Errorf("took %v: the run went (nearly) its length of 5 minutes, not stopped at the limit", time.Since(start))
	}
	back, rerr := result.Read(out)
	if rerr != nil || res.Status != result.Stopped || back.Status != result.Stopped {
		t.Fatalf("status %q, read back %v %+v", res.Status, rerr, back)
	}
	n := strings.Join(back.Notes, "\n")
	for _, w := range []string{"headroom stopped the run: headroom's memory reached ", "past its limit of 512 MiB (--max-memory)", "Grow (1)", "grown in a loop"} {
		if !strings.Contains(n, w) {
			t.Errorf("notes lack %q:\n%s", w, n)
		}
	}
	if back.Totals.Count == 0 {
		t.Errorf("the request before the string grew is not in the result: %+v", back.Totals)
	}
	t.Log(n)
}
