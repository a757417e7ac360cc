package scenario

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Limits bound the work a scenario's Starlark code may do, so that a
// mistake in it (a loop that never ends, a top level that waits forever)
// ends with a message instead of a run that hangs.
//
// A step is one Starlark bytecode instruction. Measured on a 2-core
// machine (Go 1.26): 10 to 30 ns for plain arithmetic loops, about 140 ns
// when every step allocates (building dicts of lists). A
// builtin is one step however long it takes: a request, json.decode of a
// large body. The step limit does not bound memory: `s = s + s` reaches
// 1 GB in 30 steps.
type Limits struct {
	// MaxSteps bounds the Starlark steps of one call: the file's top level
	// at load, and each setup, action and teardown of a user (each call
	// counts from zero). 0 means DefaultMaxSteps.
	MaxSteps uint64
	// LoadTimeout bounds the wall time of the file's top level at load.
	// 0 means DefaultLoadTimeout. When it passes inside a builtin (which
	// cannot be interrupted), Load still returns at most
	// min(LoadTimeout, 1 s) later and leaves the builtin to finish on its
	// own goroutine.
	LoadTimeout time.Duration
	// MaxData bounds the bytes of a scenario's data files (data.csv,
	// data.json), together: they are read into memory at load. 0 means
	// DefaultMaxData.
	MaxData int64
	// Vars are the values given on the command line (--var name=value),
	// which the scenario reads as the dict vars. They travel with the
	// limits because both are the run's options for loading a scenario;
	// they bound nothing. Each name must appear in the scenario's source.
	Vars map[string]string
	// Files, when not nil, are the only data files the scenario may read,
	// by the path its source gives (Scenario.Files): an agent loads the
	// scenario its coordinator sent, with the files it sent, from no disk.
	Files map[string][]byte
}

const (
	// DefaultMaxSteps is 100 million steps: about 1 to 3 s of one core for
	// loops of plain arithmetic, some 14 s when every step allocates. An
	// action that sends requests and reads their JSON takes thousands.
	DefaultMaxSteps = 100_000_000
	// DefaultLoadTimeout is the default bound on the top level's run at load.
	DefaultLoadTimeout = 10 * time.Second
	// DefaultMaxData is the default bound on a scenario's data files.
	DefaultMaxData = 256 << 20
	// maxNesting bounds how deeply the syntax tree of a scenario nests
	// (a chain of `1 + 1 + ...` nests one level per operator): Starlark's
	// resolver and compiler recurse on it with some 300 bytes of stack per
	// level, and three million levels overflow Go's 1 GB stack, which is
	// fatal. Its parser bounds brackets and other recursive forms at 1,000
	// levels; this bounds the rest.
	maxNesting = 10_000
)

// Sentinel errors a *LoadError wraps when the top level hit a limit.
var (
	ErrTooManySteps = errors.New("too many Starlark steps")
	ErrLoadTimeout  = errors.New("scenario load took too long")
)

func (l Limits) withDefaults() Limits {
	if l.MaxSteps == 0 {
		l.MaxSteps = DefaultMaxSteps
	}
	if l.LoadTimeout <= 0 {
		l.LoadTimeout = DefaultLoadTimeout
	}
	if l.MaxData <= 0 {
		l.MaxData = DefaultMaxData
	}
	return l
}

// halt is why the top level was stopped: running until it is.
type halt int32

const (
	running halt = iota
	haltSteps
	haltTimeout
	haltInterrupt
)

var haltReasons = [...]string{"", "step limit", "load timeout", "interrupted"}

// errStuck is returned when the thread did not stop within the grace after
// it was told to: it was inside a builtin, which Starlark cannot interrupt.
var errStuck = errors.New("still inside a builtin when it had to stop")

// checkEvery is how many steps a loading thread runs between looks at
// whether the load timeout passed or ctx ended: some 3 ms of plain
// arithmetic, 15 ms of allocating code.
const checkEvery = 100_000

// stopGrace is how long runTop waits for a thread told to stop before it
// calls it stuck in a builtin: checkEvery steps take ten times their 3 to
// 15 ms under the race detector, and longer on a busy machine, so a grace
// as short as a short load timeout called a plain loop stuck.
const stopGrace = time.Second

// runTop runs fn, a file's top level on thread th, on a goroutine of its
// own, and stops the thread after lim.MaxSteps steps, after
// lim.LoadTimeout, or when ctx ends, whichever comes first. It returns
// why it stopped the thread (running if it did not); a panic in fn
// becomes an *InternalError. lim must have its defaults.
//
// At the step limit and the timeout the thread stops itself, in
// OnMaxSteps, so that it does so at a step whose position names a line
// for the LoadError (see stopAtLine): the timeout is noticed within
// checkEvery steps. ctx's end stops it at its next step: it may come from
// a watchdog of memory, where `s = s + s` reaches 1 GB in 30 steps. A
// thread that is inside a builtin cannot notice either: after stopGrace
// (ctx's end meanwhile cancels it at once) runTop returns without it, and
// the thread stops as soon as the builtin returns.
func runTop(ctx context.Context, th *starlark.Thread, lim Limits, fn func() (starlark.StringDict, error)) (starlark.StringDict, halt, error) {
	var why atomic.Int32
	th.SetMaxExecutionSteps(min(lim.MaxSteps, checkEvery))
	th.OnMaxSteps = stopAtLine(func(th *starlark.Thread) bool {
		if why.Load() == int32(running) && th.Steps < lim.MaxSteps {
			th.SetMaxExecutionSteps(min(lim.MaxSteps, th.Steps+checkEvery))
			return false
		}
		why.CompareAndSwap(int32(running), int32(haltSteps))
		return true
	}, func(th *starlark.Thread) { th.Cancel(haltReasons[why.Load()]) })

	type result struct {
		g   starlark.StringDict
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				r = result{err: newInternalError(p)}
			}
			done <- r
		}()
		r.g, r.err = fn()
	}()

	timer := time.NewTimer(lim.LoadTimeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.g, halt(why.Load()), r.err
	case <-timer.C:
		why.CompareAndSwap(int32(running), int32(haltTimeout))
	case <-ctx.Done():
		if why.CompareAndSwap(int32(running), int32(haltInterrupt)) {
			th.Cancel(haltReasons[haltInterrupt])
		}
	}
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	for {
		select {
		case r := <-done:
			return r.g, halt(why.Load()), r.err
		case <-ctx.Done(): // a watchdog (of memory: `s = s + s`) does not wait for the thread's look at the clock
			th.Cancel(haltReasons[why.Load()])
			ctx = context.Background()
		case <-grace.C:
			th.Cancel(haltReasons[why.Load()])
			return nil, halt(why.Load()), errStuck
		}
	}
}

// stopAtLine makes an OnMaxSteps function: when should says the thread
// must stop, it calls stop, but first lets the thread run up to 16 more
// steps while its position is only its function's start. Starlark files
// some instructions (a loop's jump back) under that position, so an error
// there would name the first line of the file, or the def, rather than
// the loop.
func stopAtLine(should func(*starlark.Thread) bool, stop func(*starlark.Thread)) func(*starlark.Thread) {
	extra := 0
	return func(th *starlark.Thread) {
		if extra == 0 && !should(th) {
			return
		}
		if extra < 16 && vaguePos(th) {
			extra++
			th.SetMaxExecutionSteps(th.Steps + 1)
			return
		}
		extra = 0
		stop(th)
	}
}

// vaguePos reports whether the innermost frame's position is its
// function's own start.
func vaguePos(th *starlark.Thread) bool {
	if th.CallStackDepth() == 0 {
		return false
	}
	fr := th.DebugFrame(0)
	fn, ok := fr.Callable().(*starlark.Function)
	if !ok {
		return false
	}
	p, q := fr.Position(), fn.Position()
	return p.Line == q.Line && p.Col == q.Col
}

// InternalError is a panic in headroom's code (a builtin, a Doer) while a
// scenario ran, recovered so that it fails one action, or the load,
// instead of the process.
type InternalError struct {
	Value any    // what was passed to panic
	At    string // the function and file:line that panicked, if known
}

func (e *InternalError) Error() string {
	if e.At == "" {
		return fmt.Sprintf("internal error in headroom: %v; please report it", e.Value)
	}
	return fmt.Sprintf("internal error in headroom: %v (at %s); please report it", e.Value, e.At)
}

// newInternalError describes a recovered panic. Call it from the deferred
// function that recovered, so that the panicking frame is on the stack.
func newInternalError(p any) *InternalError {
	var pcs [64]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	panicked := false
	for {
		f, more := frames.Next()
		// Below the recovering function: runtime.gopanic, perhaps more of
		// the runtime (a nil dereference, a map write), then the culprit.
		switch {
		case f.Function == "runtime.gopanic":
			panicked = true
		case panicked && !strings.HasPrefix(f.Function, "runtime."):
			return &InternalError{Value: p, At: fmt.Sprintf("%s %s:%d", shortFunc(f.Function), shortPath(f.File), f.Line)}
		}
		if !more {
			return &InternalError{Value: p}
		}
	}
}

// shortFunc drops the import path of a function name:
// "github.com/x/scenario.(*User).call" becomes "scenario.(*User).call".
func shortFunc(fn string) string {
	if i := strings.LastIndexByte(fn, '/'); i >= 0 {
		return fn[i+1:]
	}
	return fn
}

// tooDeep returns the first node of f nested more than maxNesting levels
// deep, or nil. It walks at most maxNesting levels down, so its own stack
// stays bounded.
func tooDeep(f *syntax.File) syntax.Node {
	var deep syntax.Node
	depth := 0
	syntax.Walk(f, func(n syntax.Node) bool {
		switch {
		case deep != nil:
			return false
		case n == nil:
			depth--
			return true
		case depth >= maxNesting:
			deep = n
			return false // Walk then skips n's children and its f(nil)
		}
		depth++
		return true
	})
	return deep
}
