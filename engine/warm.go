package engine

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// warm runs users' setups, actions and message handlers on a few goroutines kept from one
// call to the next, instead of on each user's own goroutine.
//
// Why: a Starlark action runs deep (the interpreter, the scenario's calls, headroom's
// builtins, the transport), so a goroutine needs ~16 KB of stack for it, but a user spends
// nearly all its time waiting at a shallow depth (think time, the inbox). Go starts each
// goroutine at 2 KB and, at every garbage collection, halves the stacks of those using under
// a quarter of theirs; so on its own goroutine every action grew a stack the collector had
// just shrunk, three copies of ~16 KB an action: 5.5% of a chat user's CPU. A worker grows its
// stack once and keeps it through thousands of actions; the users' goroutines stay at 2 KB.
// A setup on the user's own goroutine left it the stack the setup grew until enough collections
// had halved it, and an idle process collects seldom: 20.6 KB an idle user against 14.2 with the
// setup on a worker, 30.5 against 21.7 holding a WebSocket too (bench/idle-memory.sh, 2026-11-30).
// The hand-over costs two goroutine switches (~0.3 µs, BenchmarkWarm), so an action that
// follows another without a pause runs on the user's goroutine: no collection shrank its stack
// in between, and a bare request is ~8 µs (vu.run). The code of one user still runs one call at
// a time, in order, as on its own goroutine (a worker runs one call, and the user waits for it).
type warm struct {
	handed atomic.Int64 // calls handed to a worker
	live   atomic.Int64 // workers whose goroutine has not ended
	mu     sync.Mutex
	idle   []*worker // free workers, the most recently used last (its stack is warmest)
	keep   int       // idle workers kept at most; the rest end when their call does
	shut   bool
}

type worker struct {
	call chan func()
	done chan *workerPanic // nil, or what the call panicked with
}

// workerPanic is a panic in a call run by a worker, raised again in the user's goroutine
// with the stack of where it happened.
type workerPanic struct {
	value any
	stack []byte
}

func newWarm(keep int) *warm { return &warm{keep: keep} }

// do runs f on a worker and returns when it has; a panic in f is raised again here, as a
// *workerPanic.
func (w *warm) do(f func()) {
	w.handed.Add(1)
	wk := w.take()
	wk.call <- f
	p := <-wk.done
	w.put(wk)
	if p != nil {
		panic(p)
	}
}

func (w *warm) take() *worker {
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		wk := w.idle[n-1]
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		return wk
	}
	w.mu.Unlock()
	wk := &worker{call: make(chan func()), done: make(chan *workerPanic)}
	w.live.Add(1)
	go wk.loop(&w.live)
	return wk
}

func (w *warm) put(wk *worker) {
	w.mu.Lock()
	if !w.shut && len(w.idle) < w.keep {
		w.idle = append(w.idle, wk)
		wk = nil
	}
	w.mu.Unlock()
	if wk != nil {
		close(wk.call)
	}
}

// close ends the idle workers; those running a call end when it does.
func (w *warm) close() {
	w.mu.Lock()
	idle := w.idle
	w.idle, w.shut = nil, true
	w.mu.Unlock()
	for _, wk := range idle {
		close(wk.call)
	}
}

func (wk *worker) loop(live *atomic.Int64) {
	defer live.Add(-1)
	for f := range wk.call {
		wk.done <- run(f)
	}
}

func run(f func()) (p *workerPanic) {
	defer func() {
		if r := recover(); r != nil {
			p = &workerPanic{value: r, stack: debug.Stack()}
		}
	}()
	f()
	return nil
}
