// Package engine runs users: it adds and removes them while a run goes on,
// and lets each one cycle through setup, actions and think time. That is
// the closed model (a number of users, SetUsers); the open model
// (StartOpen, SetPacer: open.go) starts iterations at an arrival rate on a
// bounded pool of the same users.
package engine

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario"
	"github.com/headroom-dev/headroom/scenario/ws"
	"github.com/headroom-dev/headroom/transport"
	"go.starlark.net/starlark"
)

// Config sets up an engine.
type Config struct {
	Scenario *scenario.Scenario
	// Target is where request paths go; credentials in it
	// (http://user:password@host) are sent as basic authentication.
	Target  *url.URL
	Seed    uint64
	Timeout time.Duration // per request; default 10 s
	Grace   time.Duration // how long a removed user may finish its action; default 5 s
	// Spread is the time over which users added at once begin their
	// setup, each at its own fixed fraction of it (scenario.User.Spread);
	// 0 is the default 100 ms (a runner's ramp adds users every 100 ms).
	// Each user's first action then waits its own fixed fraction of one
	// think time, so users set up together do not act in lockstep.
	// Negative: neither; every user starts and acts at once (tests).
	Spread time.Duration
	// Settings are the clients' TLS and compression
	// (transport.Config.Settings); nil: the defaults.
	Settings *transport.Settings
	MaxBody  int // response body limit, bytes; default transport's (64 MiB)
	// FreshSessions: every user's user.session starts empty. By default
	// a user added in the place of one removed and done (its account's,
	// see Engine.slots) starts with what that one's setup and actions
	// left there: a token kept, as real clients stay logged in.
	FreshSessions bool
	// SetupOnly: a user, once set up, runs no action; it waits (its
	// WebSocket messages handled) until it is removed (--setup-only: the
	// server's setup capacity, logins a second, measured alone).
	SetupOnly bool
	// SetupRetries is how often a user retries a failed setup before it
	// gives up (stays unset up until removed): 0 is the default,
	// DefaultSetupRetries; negative, never. A retry waits a doubling,
	// jittered backoff (setupBackoff), so the default gives a user about
	// three minutes; past it a server that cannot set users up is not
	// asked again, and the run says how many gave up.
	SetupRetries int
	// SourceAddrs, if any, are the local addresses users connect from,
	// user i from SourceAddrs[(i-1) % len]: one address holds only so many
	// connections to one target.
	SourceAddrs []netip.Addr
	// IDs, if set, is the id of the engine's nth user (n from 1): the
	// users of one agent among several take ids that interleave with the
	// others' (agent a of k: a+1, a+1+k, ...), so that ids, the random
	// streams and user types fixed by them, are unique across a run and
	// mixed as in one process. Default: the id is n.
	IDs      func(n int) int
	Recorder *metrics.Recorder // where users record
	Print    func(user int, msg string)
	// OnAction, if set, is called from a user's goroutine as each action starts.
	OnAction func(user int, action string)
	// OnPanic, if set, is called (from the goroutine that panicked) with
	// each panic recovered in a goroutine the engine owns: a bug in
	// headroom, in or out of scenario code. That user is gone; the others
	// go on. Without it a panic is only kept for Panicked.
	OnPanic func(*PanicError)
	// HTTP, if set, makes every HTTP client the engine would make with
	// transport.NewClient(opt) (a user's, a lane's, init's): the seam
	// where a test puts a fake server in virtual time.
	HTTP func(opt transport.Options) scenario.HTTPClient
	// Dial, if set, makes every connection to the target (HTTP and
	// WebSocket) in place of TCP: a test's target in memory, in virtual
	// time, through the real clients (transport.Options.Dial).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// DefaultSetupRetries is Config.SetupRetries's default: with the backoff
// doubling from the think time (at least 0.5 s) to 30 s, about three
// minutes of retries.
const DefaultSetupRetries = 10

// PanicError is a panic recovered in one of the engine's goroutines.
type PanicError struct {
	Where string // "user 3", ...
	Value any    // what was passed to panic
	Stack []byte // the goroutine's stack where it panicked
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic in %s: %v", e.Where, e.Value) }

// Engine holds the running users. Safe for concurrent use.
type Engine struct {
	cfg   Config
	mu    sync.Mutex
	users []*vu // in the order they were added
	added int   // users ever added: the last one was the added-th (see Config.IDs)
	// slots is the most users that ran at once; free holds the slots of
	// users removed and done, smallest first. A user added takes the
	// smallest free slot, and its account (user.account) is the id of the
	// slot's first user: users removed and added again (a ceiling stepping
	// down and up) never sign up more accounts than the most users that
	// ran at once. Ids (user.id) stay unique in the run.
	slots  int
	free   []int
	gone   sync.WaitGroup // users removed or stopped, not yet done
	late   atomic.Int64
	setUp  atomic.Int64 // users that finished setup, ever
	began  atomic.Int64 // users that began setup, ever
	hold   atomic.Bool  // users past setup wait, acting on nothing (Hold)
	panic  atomic.Pointer[PanicError]
	abort  chan struct{} // closed by Abort
	reason string        // Abort's, under mu

	shared starlark.Value // what the scenario's init returned, frozen; under mu (see Init)
	open   *openModel     // the open model's pool and schedule, once StartOpen ran; under mu
	// conns is the open model's shared connections (OpenModel.Connections),
	// set by StartOpen before its users; nil: each user its own.
	conns *transport.Pool
	warm  *warm // where users' actions and handlers run
	// sessions keeps user.session by account; nil with FreshSessions.
	sessions *scenario.Sessions
	// stalled, if set, is called by a user as its pause's timer fires,
	// and by the open model's dispatcher as its timer fires, before they
	// wake: the seam where a test stalls the process (virtual time), as
	// the collector or a busy machine does.
	stalled func()
	// stalls is the generator's stalls its closed-model users saw (late
	// wakes), for those whose actions they stretched (vu.think).
	stalls stallLog
}

// New returns an engine with no users.
func New(cfg Config) *Engine {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 5 * time.Second
	}
	if cfg.Spread == 0 {
		cfg.Spread = 100 * time.Millisecond
	}
	if cfg.SetupRetries == 0 {
		cfg.SetupRetries = DefaultSetupRetries
	}
	e := &Engine{cfg: cfg, abort: make(chan struct{}), warm: newWarm(256)}
	if !cfg.FreshSessions {
		e.sessions = scenario.NewSessions()
	}
	return e
}

// slot is the place of the next user added: the smallest one freed by a
// user removed and done, else a new one. Under e.mu.
func (e *Engine) slot() int {
	if len(e.free) > 0 {
		n := e.free[0]
		e.free = e.free[1:]
		return n
	}
	e.slots++
	return e.slots
}

// id is the id of the nth user added (Config.IDs).
func (e *Engine) id(n int) int {
	if e.cfg.IDs == nil {
		return n
	}
	return e.cfg.IDs(n)
}

// SetUsers adds or removes users until n are running. Removal takes the
// most recently added first; each removed user finishes its action (within
// the grace period) and its teardown in the background.
func (e *Engine) SetUsers(n int) { e.SetUsersBy(n, n) }

// SetUsersBy moves the user count towards n as SetUsers does, but adds at
// most maxAdd users (removing takes no time); it returns the users running
// after it. Adding a user takes microseconds, so a caller adding many
// calls it in batches and stays responsive in between.
func (e *Engine) SetUsersBy(n, maxAdd int) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.reason != "" || e.open != nil { // aborted: no more users; open: the pool adds its own
		n = min(n, len(e.users))
	}
	for added := 0; len(e.users) < n && added < maxAdd; added++ {
		v := e.newUser()
		e.users = append(e.users, v)
		go func() {
			defer e.recover(v)
			v.run(e.cfg.OnAction, e.cfg.SetupOnly)
		}()
	}
	for len(e.users) > n {
		v := e.users[len(e.users)-1]
		e.users = e.users[:len(e.users)-1]
		e.retire(v)
	}
	return len(e.users)
}

// Hold, on, has users past their setup wait instead of acting, their
// WebSocket messages handled (as --setup-only's do), until Hold(false):
// a warm-up that sets users up before a search without loading the
// target with their actions. Users held begin their actions on release
// as users just set up do, after a random part of a think time.
func (e *Engine) Hold(on bool) { e.hold.Store(on) }

// newUser makes the next user added: its id the added-th's, its account
// its slot's. Under e.mu.
func (e *Engine) newUser() *vu {
	e.added++
	id, slot := e.id(e.added), e.slot()
	account := e.id(slot)
	v := &vu{id: id, slot: slot, stop: make(chan struct{}), done: make(chan struct{}), late: &e.late, setUp: &e.setUp, began: &e.began, hold: &e.hold, warm: e.warm,
		rec: e.cfg.Recorder.Shard(id), spread: e.cfg.Spread, stalled: e.stalled, stalls: &e.stalls, retries: max(e.cfg.SetupRetries, 0),
		fresh: func() (*scenario.User, scenario.HTTPClient) { return e.userOf(id, account) }}
	v.user, v.client = v.fresh()
	return v
}

// userOf makes user id's scenario runtime and HTTP client, both new: no
// state, headers, cookies or connection.
// Its background lanes get clients made the same way (Env.NewHTTP).
func (e *Engine) userOf(id, account int) (*scenario.User, scenario.HTTPClient) {
	opt := e.clientOptions(id)
	client := e.newClient(opt)
	user := scenario.NewUser(e.cfg.Scenario, scenario.Env{
		ID: id, Account: account, Sessions: e.sessions, Seed: e.cfg.Seed, HTTP: withCredentials(client, e.cfg.Target), Record: e.cfg.Recorder.Shard(id), Print: e.cfg.Print,
		NewHTTP: func(cookies map[string]string) scenario.HTTPClient {
			o := opt
			o.Cookies = cookies
			return withCredentials(e.newClient(o), e.cfg.Target)
		},
		Shared: e.shared,
		WS: ws.Dialing{Target: e.cfg.Target, Timeout: e.cfg.Timeout, TLS: e.cfg.Settings.TLS(), SourceAddr: opt.LocalAddr, MaxMessage: e.cfg.MaxBody,
			Dial: e.cfg.Dial},
	})
	return user, client
}

// retire asks v to stop and cancels it if it has not within the grace
// period; a user still in its setup is cancelled at once: a login no one
// wants any more is load on the server that the users kept do not need
// (a controller stepping down from a level its logins overloaded must
// not leave that backlog to the next level).
func (e *Engine) retire(v *vu) {
	close(v.stop)
	e.gone.Add(1)
	go func() {
		defer e.gone.Done()
		defer e.recover(v)
		defer e.release(v)
		if s := v.State(); s == Starting || s == SettingUp {
			v.cancel("user removed during its setup")
			<-v.done
			return
		}
		t := time.NewTimer(e.cfg.Grace)
		defer t.Stop()
		select {
		case <-v.done:
		case <-t.C:
			v.cancel("user removed")
			<-v.done
		case <-e.abort:
			v.cancel(e.abortReason())
			<-v.done
		}
	}()
}

// release frees v's slot, v being done: a user added later takes it.
func (e *Engine) release(v *vu) {
	e.mu.Lock()
	defer e.mu.Unlock()
	i, _ := slices.BinarySearch(e.free, v.slot)
	e.free = slices.Insert(e.free, i, v.slot)
}

// recover, deferred in a goroutine of user v, turns a panic into a
// PanicError for OnPanic and Panicked.
func (e *Engine) recover(v *vu) {
	p := recover()
	if p == nil {
		return
	}
	pe := &PanicError{Where: fmt.Sprintf("user %d", v.id), Value: p, Stack: debug.Stack()}
	if wp, ok := p.(*workerPanic); ok { // in an action or handler: where it happened
		pe.Value, pe.Stack = wp.value, wp.stack
	}
	e.panic.CompareAndSwap(nil, pe)
	if e.cfg.OnPanic != nil {
		e.cfg.OnPanic(pe)
	}
}

// Abort cancels every user at once, running or stopping: the action and
// request each has in flight end now, counted as canceled, and no
// teardown runs; no user is added after it. For a run that must end at
// once (headroom's memory past its limit). Stop still waits for the
// users' goroutines to end. Safe from any goroutine; later calls do
// nothing.
func (e *Engine) Abort(reason string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.reason != "" {
		return
	}
	e.reason = reason
	close(e.abort)
	for _, v := range e.users {
		v.cancel(reason)
	}
}

func (e *Engine) abortReason() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reason
}

// Doing counts the running users by what they are doing now: the action's
// name, or scenario.SetupAction while in setup. Users thinking are not
// counted.
func (e *Engine) Doing() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]int{}
	for _, v := range e.users {
		if d := v.doing.Load(); d != nil {
			out[*d]++
		}
	}
	return out
}

// Panicked returns the first panic recovered in the engine's goroutines,
// or nil.
func (e *Engine) Panicked() *PanicError { return e.panic.Load() }

// Users returns the number of users running (not counting those stopping).
func (e *Engine) Users() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.users)
}

// States counts users by state, including those stopping.
func (e *Engine) States() map[State]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[State]int{}
	for _, v := range e.users {
		out[v.State()]++
	}
	return out
}

// Ready returns how many running users are past setup (acting, thinking,
// or idle in the open model's pool): the load a level really applies.
func (e *Engine) Ready() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, v := range e.users {
		if st := v.State(); st == Acting || st == Thinking || st == Idle {
			n++
		}
	}
	return n
}

// Began returns how many users have begun setup since the engine began,
// removed ones included.
func (e *Engine) Began() int64 { return e.began.Load() }

// SetUp returns how many users have finished setup since the engine
// began, removed ones included: 0 means no user ever got past setup.
func (e *Engine) SetUp() int64 { return e.setUp.Load() }

// Late returns how many think-time wake-ups came more than lateAfter (50 ms) late: a
// sign that the generator itself is short of CPU.
func (e *Engine) Late() int64 { return e.late.Load() }

// Stop removes every user and waits until all are done: each gets the
// grace period to finish its action, then is cancelled. In the open model
// no arrival is dispatched after it, and those waiting for a user are
// counted as canceled.
func (e *Engine) Stop() {
	e.mu.Lock()
	o, conns := e.open, e.conns
	e.mu.Unlock()
	if o != nil {
		o.halt()
	}
	e.SetUsers(0)
	e.gone.Wait()
	e.warm.close()
	if conns != nil {
		conns.Close()
	}
}
