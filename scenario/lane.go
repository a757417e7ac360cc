package scenario

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario/data"
	"go.starlark.net/starlark"
)

// Background lanes: user.background(fn) calls fn again and again, user.every(period, fn) once a period,
// until the user ends: a long-poll client's /sync loop, a presence heartbeat. A lane runs beside the
// user's own code, on its own goroutine and Starlark thread, with its own HTTP connection. Starlark
// values are not safe for concurrent use, so a lane shares no mutable value with the user: it gets a copy
// of user.state, user.http.headers and the cookies as they are when it starts, its own user.rand stream,
// and its function may not close over the caller's variables. After the start the two never share state.

// LaneAction is the action name a lane's calls are recorded under: "(background sync)" for a lane named
// "sync" (by default the function's name).
func LaneAction(name string) string { return "(background " + name + ")" }

const (
	// laneFailPause is the least time between a call that failed (an exception, a failed request, a
	// timeout) and the next: a broken endpoint does not make a lane spin.
	laneFailPause = time.Second
	// laneIdleGap is the least time from the start of a call that sent no request to the start of the
	// next: a function that returns at once does not spin a core.
	laneIdleGap = 10 * time.Millisecond
	// laneKey offsets the stream numbers of lanes (see laneSeed) past the user's own.
	laneKey = 1 << 32
)

// laneSet is a user's lanes. Its mutex guards against Cancel, which comes from other goroutines.
type laneSet struct {
	mu   sync.Mutex
	all  []*lane
	n    int            // lanes started, ever: the next one's number is n+1
	shut string         // why no lane may start now; "" while one may
	wg   sync.WaitGroup // the lanes' goroutines
}

// lane is one background loop of a user.
type lane struct {
	u      *User // the lane's own: its thread, state, rand, http; u.parent is the user
	http   HTTPClient
	fn     starlark.Callable
	action string // LaneAction(name)
	plan   plan
}

// plan is when a lane calls its function: background (period 0) again as soon as a call ends, every at
// the points first + k·period after the lane's start; both wait laneFailPause after a failure and
// laneIdleGap from the start of a call that sent nothing.
type plan struct {
	period, first time.Duration
}

// next returns when, counted from the lane's start, the lane calls again after the call that was due at
// due, began at began and ended at ended (all since the lane's start); failed tells whether it failed,
// idle whether it sent no request. Calls of every that a late call missed are skipped, not bunched. Pure:
// no clock.
func (p plan) next(due, began, ended time.Duration, failed, idle bool) time.Duration {
	earliest := ended
	if failed {
		earliest = max(earliest, satAdd(ended, laneFailPause))
	}
	if idle {
		earliest = max(earliest, satAdd(began, laneIdleGap))
	}
	if p.period <= 0 {
		return earliest
	}
	k := time.Duration(1)
	if earliest > due {
		k = max(1, (earliest-due+p.period-1)/p.period)
	}
	if k > (maxDuration-due)/p.period {
		return maxDuration
	}
	return due + k*p.period
}

// satAdd is a+b for durations of 0 or more, at most maxDuration.
func satAdd(a, b time.Duration) time.Duration {
	if a > maxDuration-b {
		return maxDuration
	}
	return a + b
}

// laneSeed derives stream k of the user's lane n from --seed and the user's id.
func (u *User) laneSeed(n int, k uint64) uint64 {
	return mix(u.env.Seed, uint64(u.env.ID), laneKey+4*uint64(n)+k)
}

// user.background(fn, name=None)
func (u *User) background(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var fn starlark.Value
	var name starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kw, "fn", &fn, "name?", &name); err != nil {
		return nil, err
	}
	return starlark.None, u.startLane(b.Name(), fn, name, 0)
}

// user.every(period, fn, name=None)
func (u *User) every(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var period, fn starlark.Value
	var name starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kw, "period", &period, "fn", &fn, "name?", &name); err != nil {
		return nil, err
	}
	d, err := Duration(period)
	if err != nil {
		return nil, fmt.Errorf("%s: period: %w", b.Name(), err)
	}
	if d <= 0 {
		return nil, fmt.Errorf(`%s: period must be more than 0, got %v; e.g. user.every("30s", heartbeat)`, b.Name(), d)
	}
	return starlark.None, u.startLane(b.Name(), fn, name, d)
}

// startLane starts a lane of fn, named by nameV (None: the function's name); period 0 is background's.
func (u *User) startLane(what string, fnV, nameV starlark.Value, period time.Duration) error {
	fn, err := laneFunc(fnV)
	if err != nil {
		return fmt.Errorf("%s: fn %v", what, err)
	}
	name := fn.Name()
	if nameV != starlark.None {
		s, ok := starlark.AsString(nameV)
		if !ok || strings.TrimSpace(s) == "" {
			return fmt.Errorf("%s: name= is %s, want a non-empty string such as \"sync\"", what, nameV)
		}
		name = s
	}
	state, err := laneCopy(u.value.state, "user.state")
	if err != nil {
		return fmt.Errorf("%s: %v", what, err)
	}
	headers, err := laneCopy(u.value.http.headers, "user.http.headers")
	if err != nil {
		return fmt.Errorf("%s: %v", what, err)
	}
	cookies := maps.Clone(u.env.HTTP.Cookies())

	ls := &u.lanes
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if r := u.canceled.Load(); r != nil {
		return fmt.Errorf("%s: the user is cancelled (%s)", what, *r)
	}
	if ls.shut != "" {
		return fmt.Errorf("%s: %s", what, ls.shut)
	}
	if u.env.NewHTTP == nil {
		return fmt.Errorf("%s: this user has no way to open a second connection (scenario.Env.NewHTTP is nil)", what)
	}
	ls.n++
	l := &lane{http: u.env.NewHTTP(cookies), fn: fn, action: LaneAction(name)}
	l.u = u.laneUser(ls.n, name, state.(*starlark.Dict), headers.(*starlark.Dict), l.http)
	if period > 0 {
		frac := float64(u.laneSeed(ls.n, 2)>>11) / (1 << 53)
		l.plan = plan{period: period, first: satAdd(period, time.Duration(frac*float64(period)))}
	}
	ls.all = append(ls.all, l)
	ls.wg.Add(1)
	go l.run(&ls.wg)
	return nil
}

// laneUser makes lane n's own user: u's id, type, shared value and dataset rows, with the given state,
// headers and client, its own thread, random stream and cancellation. It has no WebSockets and cannot
// start lanes.
func (u *User) laneUser(n int, name string, state, headers *starlark.Dict, client HTTPClient) *User {
	env := u.env
	env.HTTP = client
	lu := &User{sc: u.sc, typ: u.typ, env: env, cancelCh: make(chan struct{}), parent: u, holds: u.holds.Clone()}
	lu.lanes.shut = fmt.Sprintf("a background lane (%q) cannot start lanes; start them from setup or an action", name)
	lu.newThread(fmt.Sprintf("user %d, lane %s", env.ID, name))
	r := rand.New(rand.NewPCG(u.laneSeed(n, 0), u.laneSeed(n, 1)))
	lu.value = &userValue{id: env.ID, account: u.value.account, typ: u.value.typ, state: state, rand: &randValue{r: r}, shared: u.value.shared, lane: name}
	lu.value.http = &httpValue{u: lu, headers: headers}
	return lu
}

// run is the lane's goroutine: it calls fn as l.plan says, recording each call as the action l.action,
// until the lane is cancelled. It closes the lane's connections at the end.
func (l *lane) run(wg *sync.WaitGroup) {
	defer wg.Done()
	defer l.http.Close()
	u := l.u
	defer func() { // a bug in headroom ends this lane, not the process
		if p := recover(); p != nil {
			u.env.Record.Record(metrics.Sample{Kind: metrics.Action, Name: l.action, Outcome: metrics.Failed, Message: newInternalError(p).Error()})
		}
	}()
	start := u.env.Now()
	since := func() time.Duration { return u.env.Now().Sub(start) }
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for due := l.plan.first; ; {
		if wait := due - since(); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-u.cancelCh:
				return
			}
		}
		if u.canceled.Load() != nil {
			return
		}
		began := since()
		u.setup = u.parent.settingUp.Load() // a call of the user's setup time is setup's
		_, s := u.invoke(l.action, l.fn)
		u.env.Record.Record(s)
		if s.Outcome == metrics.Canceled {
			return
		}
		due = l.plan.next(due, began, since(), s.Outcome != metrics.OK, s.Requests == 0)
	}
}

// cancel ends the lane's call in flight (its Starlark code at the next step, a sleep, its request) and
// its loop. Safe from any goroutine.
func (l *lane) cancel(reason string) {
	l.u.Cancel(reason)
	l.http.Cancel()
}

// cancelLanes cancels every lane of the user; safe from any goroutine.
func (u *User) cancelLanes(reason string) {
	u.lanes.mu.Lock()
	all := slices.Clone(u.lanes.all)
	u.lanes.mu.Unlock()
	for _, l := range all {
		l.cancel(reason)
	}
}

// StopLanes ends the user's background lanes and waits until they have: the call each has in flight (a
// request, a long poll, a sleep) is cut and recorded as cancelled with reason. No lane starts after it:
// user.background and user.every then fail. The engine calls it when the user stops, before its
// teardown; Setup does when setup fails, and Close. Call it from the user's goroutine.
func (u *User) StopLanes(reason string) {
	ls := &u.lanes
	ls.mu.Lock()
	if ls.shut == "" {
		ls.shut = fmt.Sprintf("the user's lanes are stopped (%s); start lanes in setup or an action", reason)
	}
	all := ls.all
	ls.all = nil
	ls.mu.Unlock()
	for _, l := range all {
		l.cancel(reason)
	}
	ls.wg.Wait()
}

// laneFunc checks a lane's function: a def or lambda of one argument that shares nothing mutable with
// the caller's thread, that is no variable of a function around it and, unless it is defined at the
// top level (frozen at load), no list, dict or set as a parameter's default.
func laneFunc(v starlark.Value) (*starlark.Function, error) {
	if _, err := userFunc(v); err != nil {
		return nil, err
	}
	f, ok := v.(*starlark.Function)
	if !ok {
		return nil, fmt.Errorf("is a %s, want a function defined with def (a builtin or a method would act on the caller's values from another thread)", v.Type())
	}
	if f.NumFreeVars() > 0 {
		b, _ := f.FreeVar(0)
		return nil, fmt.Errorf("%s uses %s of the function around it, which the lane would share with the user's thread: "+
			"define the function at the top level and pass what it needs in user.state (the lane gets a copy)", f.Name(), b.Name)
	}
	for _, g := range f.Globals() {
		if g == starlark.Value(f) {
			return f, nil
		}
	}
	for i := range f.NumParams() {
		if d := f.ParamDefault(i); d != nil && !immutable(d) {
			p, _ := f.Param(i)
			return nil, fmt.Errorf("%s's parameter %s has a default of type %s, which the lane would share with the user's thread: "+
				"define the function at the top level", f.Name(), p, d.Type())
		}
	}
	return f, nil
}

// immutable tells whether v is plain data no thread can change: None, a bool, number, string or bytes,
// or a tuple of them.
func immutable(v starlark.Value) bool {
	switch x := v.(type) {
	case starlark.NoneType, starlark.Bool, starlark.Int, starlark.Float, starlark.String, starlark.Bytes:
		return true
	case starlark.Tuple:
		return !slices.ContainsFunc(x, func(e starlark.Value) bool { return !immutable(e) })
	}
	return false
}

// plainCopy copies v, found at `at` (for messages): plain data only (None, bools, numbers,
// strings, bytes, tuples, lists, dicts, sets, and datasets, which are frozen and shared as they are).
// memo keeps lists, dicts and sets that v holds twice (or inside themselves) one value in the copy; nil
// only checks.
func plainCopy(v starlark.Value, at string, depth int, memo map[starlark.Value]starlark.Value) (starlark.Value, error) {
	if depth > maxShareDepth {
		return nil, fmt.Errorf("%s is nested more than %d levels deep", at, maxShareDepth)
	}
	switch v.(type) {
	case *starlark.List, *starlark.Dict, *starlark.Set: // pointers: tuples, slices, cannot be map keys
		if c, ok := memo[v]; ok {
			return c, nil
		}
	}
	switch x := v.(type) {
	case starlark.NoneType, starlark.Bool, starlark.Int, starlark.Float, starlark.String, starlark.Bytes, *data.Dataset:
		return v, nil
	case starlark.Tuple:
		out := make(starlark.Tuple, len(x))
		for i, e := range x {
			c, err := plainCopy(e, fmt.Sprintf("%s[%d]", at, i), depth+1, memo)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case *starlark.List:
		out := starlark.NewList(make([]starlark.Value, 0, x.Len()))
		if memo != nil {
			memo[v] = out
		}
		for i := range x.Len() {
			c, err := plainCopy(x.Index(i), fmt.Sprintf("%s[%d]", at, i), depth+1, memo)
			if err != nil {
				return nil, err
			}
			_ = out.Append(c)
		}
		return out, nil
	case *starlark.Dict:
		out := starlark.NewDict(x.Len())
		if memo != nil {
			memo[v] = out
		}
		for _, kv := range x.Items() {
			k, err := plainCopy(kv[0], at+" (a key)", depth+1, memo)
			if err != nil {
				return nil, err
			}
			e, err := plainCopy(kv[1], at+"["+kv[0].String()+"]", depth+1, memo)
			if err != nil {
				return nil, err
			}
			_ = out.SetKey(k, e)
		}
		return out, nil
	case *starlark.Set:
		out := starlark.NewSet(x.Len())
		if memo != nil {
			memo[v] = out
		}
		it := x.Iterate()
		defer it.Done()
		var e starlark.Value
		for it.Next(&e) {
			c, err := plainCopy(e, at+" (an element)", depth+1, memo)
			if err != nil {
				return nil, err
			}
			_ = out.Insert(c)
		}
		return out, nil
	}
	return nil, &notPlainError{at: at, typ: v.Type()}
}

// notPlainError is plainCopy's: the value at `at` is not plain data.
type notPlainError struct{ at, typ string }

func (e *notPlainError) Error() string {
	return fmt.Sprintf("%s is a %s, not plain data (None, bools, numbers, strings, bytes, tuples, lists, dicts, sets)", e.at, e.typ)
}

// laneCopy is plainCopy for a lane's copy of the user's state and headers.
func laneCopy(v starlark.Value, at string) (starlark.Value, error) {
	c, err := plainCopy(v, at, 0, map[starlark.Value]starlark.Value{})
	if np, ok := err.(*notPlainError); ok {
		return nil, fmt.Errorf("%s is a %s, which a background lane cannot take: a lane gets a copy of user.state, and only of plain data "+
			"(None, bools, numbers, strings, bytes, tuples, lists, dicts, sets); keep that value elsewhere, or start the lane before storing it", np.at, np.typ)
	}
	return c, err
}
