package engine

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario"
)

// deep recurses n frames of ~1 KB each, as a Starlark action's calls do.
//
//go:noinline
func deep(n int) int {
	var pad [128]int
	pad[n%128] = n
	if n == 0 {
		return pad[0]
	}
	return deep(n-1) + pad[n%128] - n
}

// TestWarmRunsCallsOnKeptWorkers: calls run on workers kept from one to the
// next (at most keep idle), one at a time per caller; a panic in a call is
// raised again in the caller with the stack of where it happened, and the
// worker goes on; close ends every idle worker (synctest.Test fails if a
// goroutine is left).
func TestWarmRunsCallsOnKeptWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWarm(2)
		// One caller after another: one worker serves them all.
		for i := range 100 {
			got := 0
			w.do(func() { got = deep(16) + i })
			if got != i {
				t.Fatalf("call %d returned %d", i, got)
			}
		}
		if n := w.live.Load(); n != 1 {
			t.Fatalf("%d workers for calls one after another, want 1", n)
		}
		// Five callers at once, each call waiting for the others: five workers, two kept.
		var wg sync.WaitGroup
		var all sync.WaitGroup
		all.Add(5)
		for range 5 {
			wg.Go(func() {
				w.do(func() {
					all.Done()
					all.Wait()
				})
			})
		}
		wg.Wait()
		synctest.Wait()
		if n := w.live.Load(); n != 2 {
			t.Errorf("%d workers after five calls at once, want 2 kept", n)
		}
		if n := len(w.idle); n != 2 {
			t.Errorf("%d idle, want 2", n)
		}
		// A panic: raised again in the caller, as a *workerPanic with the panic's own stack.
		func() {
			defer func() {
				p, ok := recover().(*workerPanic)
				if !ok || p.value != "boom" || !strings.Contains(string(p.stack), "warm_test.go") {
					t.Errorf("recovered %#v, want a *workerPanic of boom with its stack", p)
				}
			}()
			w.do(func() { panic("boom") })
		}()
		ran := false
		w.do(func() { ran = true })
		if !ran {
			t.Error("the call after a panic did not run")
		}
		w.close()
		synctest.Wait()
		if n := w.live.Load(); n != 0 {
			t.Errorf("%d workers left after close", n)
		}
		// After close, a call still runs (a user finishing), on a worker that then ends.
		w.do(func() { ran = false })
		synctest.Wait()
		if n := w.live.Load(); ran || n != 0 {
			t.Errorf("a call after close: ran %v, %d workers left", !ran, n)
		}
	})
}

// TestPanicInAnActionNamesWhereItHappened: the engine reports a panic raised on a
// worker with the worker's stack (where the action panicked), not the user's.
func TestPanicInAnActionNamesWhereItHappened(t *testing.T) {
	got := make(chan *PanicError, 1)
	e := New(Config{OnPanic: func(p *PanicError) { got <- p }})
	go func() {
		defer e.recover(&vu{id: 7})
		e.warm.do(func() { panic("in the action") })
	}()
	p := <-got
	if p.Where != "user 7" || p.Value != "in the action" || !strings.Contains(string(p.Stack), "TestPanicInAnActionNamesWhereItHappened.func2.1") {
		t.Errorf("reported %q %v, stack:\n%s", p.Where, p.Value, p.Stack)
	}
	e.warm.close()
}

// BenchmarkWarm is the cost of handing a call to a worker and waiting for it (go test -bench Warm -cpu 1):
// what each action pays after a pause for its stack to stay grown (see warm).
func BenchmarkWarm(b *testing.B) {
	w := newWarm(4)
	defer w.close()
	n := 0
	f := func() { n++ }
	for b.Loop() {
		w.do(f)
	}
	if n == 0 {
		b.Fatal("the call never ran")
	}
}

// TestActionsWithoutAPauseRunOnTheUsersGoroutine: after a think time, an action goes to a worker
// (the user's stack may have been shrunk meanwhile); with a think time of 0 it runs on the user's own
// goroutine, whose stack the last action grew, without the hand-over's cost.
func TestActionsWithoutAPauseRunOnTheUsersGoroutine(t *testing.T) {
	for _, c := range []struct {
		think  string
		inline bool
	}{{`"0s"`, true}, {`"10ms"`, false}} {
		synctest.Test(t, func(t *testing.T) {
			sc, err := scenario.Load(context.Background(), "e.star", []byte(`
def act(user):
    pass
actions = [action("A", act)]
think_time = think.constant(`+c.think+`)
`), scenario.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			var acts atomic.Int64
			hundred := make(chan struct{})
			target, _ := url.Parse("http://127.0.0.1:9") // never asked: the action sends nothing
			e := New(Config{Scenario: sc, Target: target, Seed: 1, Spread: -1, Recorder: metrics.NewRecorder(1, nil, time.Now),
				OnAction: func(int, string) {
					if acts.Add(1) == 100 {
						close(hundred)
					}
				}})
			e.SetUsers(1)
			<-hundred // (a user that never pauses never lets the bubble's clock move: no polling)
			e.Stop()
			n, handed := acts.Load(), e.warm.handed.Load()-1 // the setup's, on a worker as every setup
			if c.inline && handed > 1 || !c.inline && handed < n-1 {
				t.Errorf("think %s: %d of %d actions handed to a worker; want only the first with no pause, all after one",
					c.think, handed, n)
			}
		})
	}
}
