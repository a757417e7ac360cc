package scenario

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario/data"
	"github.com/headroom-dev/headroom/scenario/ws"
	"github.com/headroom-dev/headroom/transport"
	"go.starlark.net/starlark"
)

// Doer sends a user's HTTP requests; transport.Client implements it.
type Doer interface {
	Do(*transport.Request, *transport.Response)
	Cookies() map[string]string
}

// Recorder takes finished samples; a metrics.Shard implements it.
type Recorder interface {
	Record(metrics.Sample) // by value: a pointer would escape, one allocation per request
}

// HTTPClient is a Doer its owner stops: Cancel cuts the request in flight and every later one (safe
// from any goroutine); Close closes its connections. A background lane owns one (Env.NewHTTP).
type HTTPClient interface {
	Doer
	Cancel()
	Close()
}

var (
	_ HTTPClient = (*transport.Client)(nil)
	_ Recorder   = (*metrics.Shard)(nil)
)

// Env is what a user gets from the engine.
type Env struct {
	ID int // 1-based, unique in a run
	// Account is the user's account number (user.account): the id of the
	// first user that held its place among the users running at once, so
	// reused by users added after others were removed; 0: the ID.
	Account int
	// Sessions keeps user.session from one user of an account to the
	// next (see Sessions); nil: each user's starts empty.
	Sessions *Sessions
	Seed     uint64 // the run's seed; with ID it fixes the user's random streams
	HTTP     Doer
	// NewHTTP makes another client like HTTP (the same target, timeout,
	// source address and credentials; a connection of its own) that
	// starts with the given cookies: a background lane's (lane.go). nil:
	// user.background and user.every fail.
	NewHTTP func(cookies map[string]string) HTTPClient
	Record  Recorder
	Print   func(user int, msg string) // where print() goes; nil drops it
	Now     func() time.Time
	// Shared is what the scenario's init returned (see (*User).Init),
	// frozen; users read it as user.shared. nil reads as None.
	Shared starlark.Value
	// WS is where and how user.ws connects: the target a path is joined
	// to, the handshake timeout, the TLS configuration (the run's,
	// transport.Settings.TLS), the local address, the largest message
	// read, and Dial in place of TCP (a test's target in memory,
	// transport.Options.Dial): see ws.Dialing.
	WS ws.Dialing
}

// Names of the pseudo-actions recorded for setup and teardown.
const (
	SetupAction    = "(setup)"
	TeardownAction = "(teardown)"
	// ReadyAction is recorded (as a setup sample) once per user when its
	// setup succeeds: the time from its first setup attempt to being
	// ready, retries and their pauses included.
	ReadyAction = "(time to set up)"
	// SessionKeptAction is recorded (as a setup sample, of no duration)
	// once for each setup that succeeded having begun with a session an
	// earlier user of the account kept (user.session, see Sessions).
	SessionKeptAction = "(session kept)"
	// GaveUpAction is recorded (as a setup sample) once for each user
	// that stopped retrying its failed setup (engine.Config.SetupRetries):
	// the time from its first attempt to giving up.
	GaveUpAction = "(gave up setup)"
)

// User runs one simulated user's scenario code. Its methods are called
// from the user's goroutine only, except Cancel.
type User struct {
	sc     *Scenario
	typ    *UserType
	env    Env
	thread *starlark.Thread
	value  *userValue
	args   starlark.Tuple // (value,), the arguments of every call
	choose *rand.Rand     // action choice and think time: independent of responses
	factor float64
	cum    []float64

	canceled atomic.Pointer[string] // the reason given to Cancel, once it was called
	setup    bool                   // in setup or init: samples are marked metrics.Sample.Setup
	// settingUp is setup, for the user's lanes' goroutines: a lane's call
	// that begins while the user sets up is counted as setup too.
	settingUp atomic.Bool
	cancelCh  chan struct{} // closed by the first Cancel: wakes a sleep
	holds     data.Holds    // the dataset rows this user holds; Close gives them back
	handling  *ws.Message   // the WebSocket message whose handler runs now, if one does (wsview.go)
	lanes     laneSet       // background loops (lane.go)
	parent    *User         // for a lane's own user, the user it belongs to; nil otherwise

	// the action running now
	failed, timedOut bool
	overSteps        bool // it ran past sc.Limits.MaxSteps
	why              string
	slept            time.Duration // in sleep(): left out of the action's latency
	sent             int           // requests it sent
	generators       time.Duration // its requests' waits for a shared connection and responses unread: left out of its service time
	// intended: it runs for an arrival of the open model that began late
	// after its intended start (RunLate).
	intended bool
	late     time.Duration
}

// NewUser prepares a user. Nothing runs until Setup or Run.
func NewUser(sc *Scenario, env Env) *User {
	if env.Now == nil {
		env.Now = time.Now
	}
	u := &User{sc: sc, typ: sc.TypeOf(env.ID), env: env, cancelCh: make(chan struct{})}
	u.choose = rand.New(rand.NewPCG(mix(env.Seed, uint64(env.ID), 1), mix(env.Seed, uint64(env.ID), 2)))
	script := rand.New(rand.NewPCG(mix(env.Seed, uint64(env.ID), 3), mix(env.Seed, uint64(env.ID), 4)))
	u.newThread(fmt.Sprintf("user %d", env.ID))
	if env.Account == 0 {
		u.env.Account = env.ID
	}
	u.value = &userValue{id: env.ID, account: u.env.Account, typ: starlark.String(u.typ.Name), state: starlark.NewDict(4), rand: &randValue{r: script}, shared: env.Shared,
		session: env.Sessions.load(u.env.Account)}
	if u.value.shared == nil {
		u.value.shared = starlark.None
	}
	u.value.http = &httpValue{u: u, headers: starlark.NewDict(2)}
	u.value.ws = ws.New((*wsView)(u), wsHelpers)
	// Weights are relative: dividing by the largest keeps their sum finite
	// (two weights of 1e308 would make it +Inf, and only one action run).
	top := 0.0
	for _, a := range u.typ.Actions {
		top = max(top, a.Weight)
	}
	total := 0.0
	for _, a := range u.typ.Actions {
		total += a.Weight / top
		u.cum = append(u.cum, total)
	}
	u.factor = u.typ.Think.Factor(u.choose)
	return u
}

// newThread gives u its Starlark thread: sleep, print and the builtins
// find u through it.
func (u *User) newThread(name string) {
	u.thread = &starlark.Thread{Name: name}
	u.thread.SetLocal(userKey, u)
	u.thread.OnMaxSteps = stopAtLine(func(*starlark.Thread) bool { return true }, func(th *starlark.Thread) {
		u.overSteps = true
		th.Cancel("step limit")
	})
	u.thread.Print = func(_ *starlark.Thread, msg string) {
		if u.env.Print != nil {
			u.env.Print(u.env.ID, msg)
		}
	}
}

// mix derives a stream seed (SplitMix64 finalizer over the inputs).
func mix(seed, id, k uint64) uint64 {
	z := seed ^ (id * 0x9e3779b97f4a7c15) ^ (k * 0xbf58476d1ce4e5b9)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Spread returns the user's k-th fixed fraction in [0, 1), from --seed
// and its id alone (no stream is advanced, so the actions a seed gives do
// not change): what the engine spreads the user's start and first think
// time by.
func (u *User) Spread(k uint64) float64 {
	return float64(mix(u.env.Seed, uint64(u.env.ID), 100+k)>>11) / (1 << 53)
}

// Type is the user's type.
func (u *User) Type() *UserType { return u.typ }

// Next picks the next action of the user's type by weight.
func (u *User) Next() *Action {
	x := u.choose.Float64() * u.cum[len(u.cum)-1]
	i := sort.SearchFloat64s(u.cum, x)
	if i < len(u.cum) && u.cum[i] == x {
		i++
	}
	return u.typ.Actions[min(i, len(u.cum)-1)]
}

// Think draws the pause before the next action.
func (u *User) Think() time.Duration { return u.typ.Think.Next(u.choose, u.factor) }

// Setup runs setup(user), if the scenario has one, and records it as the
// action "(setup)". It returns the outcome. A setup that fails stops the
// lanes it started (see StopLanes): a retry starts from a clean user.
// Whatever the outcome, user.session is kept for the account's next user
// (the retry among them): a setup that found its token refused and
// cleared it makes the retry log in.
func (u *User) Setup() metrics.Outcome {
	if u.typ.Setup == nil {
		return metrics.OK
	}
	kept := u.value.session.Len() > 0
	u.setup = true
	u.settingUp.Store(true)
	_, s := u.invoke(SetupAction, u.typ.Setup)
	if err := u.keepSession(); err != nil && s.Outcome == metrics.OK {
		s.Outcome, s.Message = metrics.Failed, err.Error()
	}
	u.env.Record.Record(s)
	if kept && s.Outcome == metrics.OK {
		u.env.Record.Record(metrics.Sample{Kind: metrics.Action, Name: SessionKeptAction, Setup: true})
	}
	u.setup = false
	u.settingUp.Store(false)
	if s.Outcome != metrics.OK {
		u.StopLanes("setup failed")
	}
	return s.Outcome
}

// Teardown runs teardown(user), if any.
func (u *User) Teardown() metrics.Outcome {
	if u.typ.Teardown == nil {
		return metrics.OK
	}
	return u.call(TeardownAction, u.typ.Teardown)
}

// Run runs one action and records it.
func (u *User) Run(a *Action) metrics.Outcome { return u.call(a.Name, a.Fn) }

// RunLate runs one action for an arrival of the open model that began
// late (>= 0) after its intended start, and records it as Run does but
// counted from that start (wrk2's correction): the action's sample and
// its requests' (a WebSocket's handshake among them; not long polls,
// whose latency is time waited) carry metrics.Sample.Intended, with late
// added to their latency and their own time kept as Service.
//
// Every request of the action is shifted by the arrival's lateness, not
// by the requests before it in the action: when the first request of
// two stalls, the second goes out late because the scenario waits for
// the first, which the first's own sample already counts; adding it to
// the second too would count one stall twice, and make the second's
// figure depend on the first's.
func (u *User) RunLate(a *Action, late time.Duration) metrics.Outcome {
	u.intended, u.late = true, max(late, 0)
	out := u.call(a.Name, a.Fn)
	u.intended, u.late = false, 0
	return out
}

// fromIntended counts s, of the action RunLate runs, from its arrival's
// intended start.
func (u *User) fromIntended(s *metrics.Sample) {
	if u.intended && (s.Kind == metrics.Request || s.Kind == metrics.Action) {
		s.Intended, s.Service = true, s.Latency
		s.Latency += u.late
	}
}

// Cancel stops the Starlark code at its next step, and a sleep at once.
// Safe from any goroutine. The engine pairs it with cancelling the user's
// HTTP client. The action running then, and any later call, ends as
// metrics.Canceled with the message "cancelled: " + reason. The user's
// background lanes are cancelled too, their requests in flight cut;
// StopLanes waits for them to end.
func (u *User) Cancel(reason string) {
	if u.canceled.CompareAndSwap(nil, &reason) { // before the thread's, which call reads after it
		close(u.cancelCh)
	}
	u.thread.Cancel(reason)
	u.value.ws.Close()
	u.cancelLanes(reason)
}

// Close stops the user's background lanes and waits for them (see
// StopLanes), closes its WebSockets (with a close frame) and gives back
// the dataset rows it holds (pick="unique"), for users that start later.
// Call it once the user's calls are over: the engine does when its
// goroutine ends. Later calls do nothing.
func (u *User) Close() {
	_ = u.keepSession() // what its actions changed (a token renewed); a value that cannot be kept leaves the next user none
	u.StopLanes("user ended")
	u.value.ws.Close()
	u.holds.Release()
}

func (u *User) call(name string, fn starlark.Callable) metrics.Outcome {
	_, s := u.invoke(name, fn)
	u.fromIntended(&s)
	if s.Intended { // as its requests' (send): the generator's part is not the target's
		s.Service = max(s.Service-u.generators, 0)
	}
	u.env.Record.Record(s)
	return s.Outcome
}

// invoke calls fn(user) and returns what it returned with the sample of
// the call, not yet recorded. The sample's latency leaves out the time
// the call slept.
func (u *User) invoke(name string, fn starlark.Callable) (starlark.Value, metrics.Sample) {
	if u.args == nil {
		u.args = starlark.Tuple{u.value}
	}
	return u.invokeWith(name, fn, u.args)
}

// invokeWith is invoke with other arguments than (user,).
func (u *User) invokeWith(name string, fn starlark.Callable, args starlark.Tuple) (starlark.Value, metrics.Sample) {
	u.failed, u.timedOut, u.overSteps, u.why, u.slept, u.sent, u.generators = false, false, false, "", 0, 0, 0
	u.thread.Steps = 0 // the step limit is per call
	u.thread.SetMaxExecutionSteps(u.sc.Limits.withDefaults().MaxSteps)
	start := u.env.Now()
	v, err := u.guardedCall(fn, args)
	s := metrics.Sample{Kind: metrics.Action, Name: name, Latency: max(u.env.Now().Sub(start)-u.slept, 0), Setup: u.setup, Requests: u.sent}
	switch reason := u.canceled.Load(); {
	case err != nil && reason != nil:
		s.Outcome, s.Message = metrics.Canceled, "cancelled: "+*reason
	case u.overSteps:
		s.Outcome = metrics.Failed
		s.Message = fmt.Sprintf("%s: stopped after %d Starlark steps, the limit of one call: a loop that never ends? "+
			"If it is meant to do this much, raise the step limit (--max-steps; see Limits in docs/SCENARIOS.md)",
			scriptPos(err, u.sc.Path), u.sc.Limits.withDefaults().MaxSteps)
		// The limit cancelled the thread; let the next call run, unless
		// Cancel came meanwhile (its own thread.Cancel lost to ours).
		u.thread.Uncancel()
		if r := u.canceled.Load(); r != nil {
			u.thread.Cancel(*r)
		}
	case internal(err) != nil:
		s.Outcome, s.Message = metrics.Failed, internal(err).Error()
	case err != nil:
		s.Outcome, s.Message = metrics.Failed, scriptError(err, u.sc.Path)
	case u.failed:
		s.Outcome, s.Message = metrics.Failed, u.why
	case u.timedOut:
		s.Outcome, s.Message = metrics.Timeout, u.why
	}
	return v, s
}

// internal returns the *InternalError in err, or nil. A function of its
// own so that the target of errors.As, which escapes, is allocated only
// when there is an error, not on every action.
func internal(err error) *InternalError {
	if err == nil {
		return nil
	}
	var ie *InternalError
	if errors.As(err, &ie) {
		return ie
	}
	return nil
}

// guardedCall calls fn(user), turning a panic (in a builtin, in the Doer)
// into an *InternalError, so that it fails this action and not the process.
// Starlark pops its frames as the panic passes, so the thread stays usable.
func (u *User) guardedCall(fn starlark.Callable, args starlark.Tuple) (v starlark.Value, err error) {
	defer func() {
		if p := recover(); p != nil {
			v, err = nil, newInternalError(p)
		}
	}()
	return starlark.Call(u.thread, fn, args, nil)
}

// noteRequest counts a request the action sent, and lets a failed one
// fail the action.
func (u *User) noteRequest(name string, s *metrics.Sample) {
	u.sent++
	switch s.Outcome {
	case metrics.Failed:
		if !u.failed {
			u.failed, u.why = true, name+": "+s.Message
		}
	case metrics.Timeout:
		if !u.failed && !u.timedOut {
			u.timedOut, u.why = true, name+": "+s.Message
		}
	}
}

// scriptError is the message of an exception in scenario code: the
// innermost scenario line and the error, e.g. "chat.star:42: key "id" not in dict".
func scriptError(err error, path string) string {
	var f *Failure
	if errors.As(err, &f) {
		return f.Msg
	}
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		if p := evalPos(err, path); p.Line > 0 {
			return fmt.Sprintf("%s:%d: %s", shortPath(path), p.Line, ee.Msg)
		}
		return ee.Msg
	}
	return err.Error()
}

// scriptPos is "file:line" of the innermost scenario line of a Starlark
// error, or the file alone.
func scriptPos(err error, path string) string {
	if p := evalPos(err, path); p.Line > 0 {
		return fmt.Sprintf("%s:%d", shortPath(path), p.Line)
	}
	return shortPath(path)
}

func shortPath(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// userValue is the user argument scenario functions receive.
type userValue struct {
	id      int
	account int             // user.account: Env.Account
	typ     starlark.String // its type's name
	http    *httpValue
	ws      *ws.Client // nil for a background lane's view
	state   *starlark.Dict
	rand    *randValue
	shared  starlark.Value // init's value, frozen; None without init
	session *starlark.Dict // user.session: Sessions' copy, the user's to change
	lane    string         // the lane's name, for a background lane's view of the user; "" otherwise
}

var (
	_ starlark.HasAttrs = (*userValue)(nil)
	_ data.User         = (*userValue)(nil)
)

// ID, Account, Rand, Holds and InLane are what a dataset's row(user)
// reads of the user (data.User).
func (v *userValue) ID() int            { return v.id }
func (v *userValue) Account() int       { return v.account }
func (v *userValue) Rand() *rand.Rand   { return v.rand.r }
func (v *userValue) Holds() *data.Holds { return &v.http.u.holds }
func (v *userValue) InLane() bool       { return v.http.u.parent != nil }

func (v *userValue) String() string        { return fmt.Sprintf("<user %d>", v.id) }
func (v *userValue) Type() string          { return "user" }
func (v *userValue) Freeze()               {}
func (v *userValue) Truth() starlark.Bool  { return true }
func (v *userValue) Hash() (uint32, error) { return uint32(v.id), nil }
func (v *userValue) AttrNames() []string {
	return []string{"account", "background", "every", "http", "id", "rand", "session", "shared", "state", "type", "ws"}
}
func (v *userValue) Attr(name string) (starlark.Value, error) {
	switch name {
	case "id":
		return starlark.MakeInt(v.id), nil
	case "account":
		return starlark.MakeInt(v.account), nil
	case "http":
		return v.http, nil
	case "state":
		return v.state, nil
	case "rand":
		return v.rand, nil
	case "shared":
		return v.shared, nil
	case "session":
		if v.lane != "" {
			return nil, fmt.Errorf("user.session in the background lane %q: the session belongs to the user's own thread; "+
				"read what a lane needs from user.state, which it gets a copy of", v.lane)
		}
		return v.session, nil
	case "type":
		return v.typ, nil
	case "ws":
		if v.lane != "" {
			return nil, fmt.Errorf("user.ws in the background lane %q: WebSockets belong to the user's own thread; "+
				"connect in setup or an action and handle messages with on_message", v.lane)
		}
		return v.ws, nil
	case "background", "every":
		u := v.http.u
		if v.lane != "" {
			return nil, fmt.Errorf("user.%s in the background lane %q: a lane cannot start lanes; start them from setup or an action", name, v.lane)
		}
		if name == "every" {
			return starlark.NewBuiltin("user.every", u.every), nil
		}
		return starlark.NewBuiltin("user.background", u.background), nil
	}
	return nil, nil
}
