package scenario

import (
	"fmt"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario/data"
	"go.starlark.net/starlark"
)

// InitAction is the name init(user)'s call is recorded under.
const InitAction = "(init)"

// InitError is why the scenario's init failed.
type InitError struct {
	Msg string // the message of init's call, as an action's
	// Request is the first request of init that failed (a status outside
	// its expect=, no response, a timeout), "name: why": the target's
	// answer. "" when none did.
	Request  string
	Canceled bool // init was cancelled (Ctrl-C)
}

// Error says whose fault it is: the target's answer to a request, or the
// scenario's code.
func (e *InitError) Error() string {
	switch {
	case e.Canceled:
		return e.Msg
	case e.Request != "" && e.Msg == e.Request:
		return "the target's answer to a request of init: " + e.Request
	case e.Request != "":
		return "the scenario's init: " + e.Msg + " (after the target's answer to a request of init: " + e.Request + ")"
	}
	return "the scenario's init: " + e.Msg
}

// Init runs the scenario's init(user) once, with this user (the engine
// makes one of id 0 for it), and returns its value frozen, for every
// user's Env.Shared; None when the scenario has no init. Its call is
// recorded as the action InitAction and its requests as setup's
// (metrics.Sample.Setup: in no window, level or check).
// It fails, with an *InitError, as a setup would: an exception, fail(),
// a failed request, a value that is not plain data. Call Close after it.
func (u *User) Init() (starlark.Value, error) {
	if u.sc.Init == nil {
		return starlark.None, nil
	}
	u.setup = true
	u.lanes.mu.Lock()
	u.lanes.shut = "not in init, which runs once before any user starts; start lanes in setup or an action"
	u.lanes.mu.Unlock()
	v, s := u.invoke(InitAction, u.sc.Init)
	u.setup = false
	if s.Outcome == metrics.OK {
		if err := shareable(v, "", 0, map[starlark.Value]bool{}); err != nil {
			at := shortPath(u.sc.Path)
			if f, ok := u.sc.Init.(*starlark.Function); ok {
				at = fmt.Sprintf("%s:%d", at, f.Position().Line)
			}
			s.Outcome, s.Message = metrics.Failed, fmt.Sprintf("%s: %v", at, err)
		}
	}
	u.env.Record.Record(s)
	switch {
	case s.Outcome == metrics.Canceled:
		return nil, &InitError{Msg: s.Message, Canceled: true}
	case s.Outcome != metrics.OK:
		return nil, &InitError{Msg: s.Message, Request: u.why}
	}
	v.Freeze()
	return v, nil
}

// maxShareDepth bounds how deeply shareable walks init's value.
const maxShareDepth = 10_000

// shareable checks that v, which init returned, holds plain data only:
// values that are safe to share once frozen. A user, its http client or
// a response would hand init's user to every user at once. at names
// where v is, for messages.
func shareable(v starlark.Value, at string, depth int, seen map[starlark.Value]bool) error {
	if depth > maxShareDepth {
		return fmt.Errorf("init returned a value nested more than %d levels deep (at %s)", maxShareDepth, at)
	}
	switch x := v.(type) {
	case starlark.NoneType, starlark.Bool, starlark.Int, starlark.Float, starlark.String, starlark.Bytes, *data.Dataset:
		return nil
	case *starlark.List, *starlark.Dict, *starlark.Set:
		if seen[x] {
			return nil
		}
		seen[x] = true
	case starlark.Tuple:
	default:
		where := ""
		if at != "" {
			where = " at " + at
		}
		return fmt.Errorf("init returned a %s%s: return plain data (None, bools, numbers, strings, bytes, lists, tuples, dicts, sets, datasets), which every user can share", v.Type(), where)
	}
	if d, ok := v.(*starlark.Dict); ok {
		for _, kv := range d.Items() {
			if err := shareable(kv[0], at+"(a key)", depth+1, seen); err != nil {
				return err
			}
			if err := shareable(kv[1], at+"["+kv[0].String()+"]", depth+1, seen); err != nil {
				return err
			}
		}
		return nil
	}
	it := v.(starlark.Iterable).Iterate()
	defer it.Done()
	var e starlark.Value
	for i := 0; it.Next(&e); i++ {
		if err := shareable(e, fmt.Sprintf("%s[%d]", at, i), depth+1, seen); err != nil {
			return err
		}
	}
	return nil
}
