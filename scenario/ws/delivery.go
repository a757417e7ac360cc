package ws

import (
	"strconv"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// stampPrefix starts a delivery stamp: "hr-stamp-" and the send time in
// nanoseconds since 1970. It is plain ASCII so it survives any payload
// (a chat message's text, a JSON string, a URL) unchanged.
const stampPrefix = "hr-stamp-"

// Receiver is what delivery.* needs of the user whose thread calls it: the
// scenario's user implements it. Called on the user's goroutine.
type Receiver interface {
	Now() time.Time        // the user's clock
	Record(metrics.Sample) // where the delivery's sample goes
	Handling() *Message    // the message whose handler runs now, or nil
}

// DeliveryModule is `delivery`: the time from a message's send to its
// arrival at another user, the fan-out latency of a chat server. The
// sender puts delivery.stamp() into what it sends; whoever receives it
// passes the text to delivery.record, which finds the stamp and records
// the time since under name: until the message was read off its
// connection, when called in its handler (the handler may run later, once
// its user's action ends), else until now. Nothing is kept between the two, so a
// stamp may reach any number of users, on any agent whose clock agrees.
// userOf finds the user whose thread calls: nil at load. Built fresh
// each call.
func DeliveryModule(userOf func(*starlark.Thread) Receiver) *starlarkstruct.Module {
	return &starlarkstruct.Module{Name: "delivery", Members: starlark.StringDict{
		"stamp": starlark.NewBuiltin("delivery.stamp", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			return deliveryStamp(userOf(th), b, args, kw)
		}),
		"record": starlark.NewBuiltin("delivery.record", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			return deliveryRecord(userOf(th), b, args, kw)
		}),
	}}
}

// delivery.stamp() -> "hr-stamp-<ns>"
func deliveryStamp(u Receiver, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 0); err != nil {
		return nil, err
	}
	if u == nil {
		return nil, &hintError{"delivery.stamp is for setup, actions and handlers, not the top level",
			"call it inside a function a user runs, when it sends the message"}
	}
	return starlark.String(stampPrefix + strconv.FormatInt(u.Now().UnixNano(), 10)), nil
}

// delivery.record(text, name="delivery") -> seconds since the stamp in text, or None
func deliveryRecord(u Receiver, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var text string
	name := "delivery"
	if err := starlark.UnpackArgs(b.Name(), args, kw, "text", &text, "name?", &name); err != nil {
		return nil, err
	}
	if u == nil {
		return nil, &hintError{"delivery.record is for actions and handlers, not the top level",
			"call it in the on_message handler that receives the stamped message"}
	}
	at, ok := findStamp(text)
	if !ok {
		return starlark.None, nil
	}
	arrived := u.Now()
	if m := u.Handling(); m != nil { // in a handler: when the message arrived, not when its user got to it
		arrived = m.at
	}
	d := max(arrived.Sub(at), 0) // another agent's clock may be ahead
	u.Record(metrics.Sample{Kind: metrics.Delivery, Name: name, Latency: d})
	return starlark.Float(d.Seconds()), nil
}

// hintError is a mistake in a delivery.* call at load, with a hint for
// the user: a scenario's load error shows it (Hint).
type hintError struct {
	msg, hint string
}

func (e *hintError) Error() string { return e.msg }
func (e *hintError) Hint() string  { return e.hint }

// findStamp returns the time of the first stamp in text.
func findStamp(text string) (time.Time, bool) {
	for {
		i := strings.Index(text, stampPrefix)
		if i < 0 {
			return time.Time{}, false
		}
		text = text[i+len(stampPrefix):]
		j := 0
		for j < len(text) && j < 19 && text[j] >= '0' && text[j] <= '9' {
			j++
		}
		if ns, err := strconv.ParseInt(text[:j], 10, 64); err == nil && j > 0 {
			return time.Unix(0, ns), true
		}
	}
}
