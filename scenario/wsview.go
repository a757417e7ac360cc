package scenario

// The scenario's side of user.ws and delivery (scenario/ws): the user as
// the package sees it, and the messages handed to their handlers.

import (
	"net/http"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario/ws"
	"go.starlark.net/starlark"
)

// Names of the actions a WebSocket's handlers are recorded under.
const (
	MessageAction = ws.MessageAction // on_message(user, msg)
	GapAction     = ws.GapAction     // on_gap(user, ws, expected, got)
)

// wsHelpers are the scenario's builtins user.ws shares: json.encode,
// r.json()'s method, and durations as think times read them.
var wsHelpers = &ws.Helpers{EncodeJSON: toJSON, JSONMethod: jsonMethod, Duration: Duration}

// toJSON encodes a Starlark value as JSON, as json.encode does.
func toJSON(v starlark.Value) ([]byte, error) {
	s, err := starlark.Call(&starlark.Thread{}, jsonModule.Members["encode"], starlark.Tuple{v}, nil)
	if err != nil {
		return nil, err
	}
	return []byte(string(s.(starlark.String))), nil
}

// wsView is a User as its WebSockets and delivery.* see it (ws.User,
// ws.Receiver): a conversion, so a user holds nothing more for them.
type wsView User

var (
	_ ws.User     = (*wsView)(nil)
	_ ws.Receiver = (*wsView)(nil)
)

func (w *wsView) Dialing() ws.Dialing     { return w.env.WS }
func (w *wsView) Now() time.Time          { return w.env.Now() }
func (w *wsView) Record(s metrics.Sample) { w.env.Record.Record(s) }
func (w *wsView) Spread(k uint64) float64 { return (*User)(w).Spread(k) }
func (w *wsView) Done() <-chan struct{}   { return w.cancelCh }
func (w *wsView) Handling() *ws.Message   { return w.handling }

// Sent records a handshake as a request of the running call.
func (w *wsView) Sent(s metrics.Sample) {
	u := (*User)(w)
	s.Setup = u.setup
	u.fromIntended(&s)
	u.env.Record.Record(s)
	u.noteRequest(s.Name, &s)
}

// Fail fails the running call with why, unless something failed it first.
func (w *wsView) Fail(why string) {
	if !w.failed {
		w.failed, w.why = true, why
	}
}

// OriginHeader adds user.http.headers and the user's cookies to h.
func (w *wsView) OriginHeader(h http.Header) {
	for _, kv := range w.value.http.headers.Items() {
		h.Set(plain(kv[0]), plain(kv[1]))
	}
	var cookies []string
	for k, v := range w.env.HTTP.Cookies() {
		cookies = append(cookies, k+"="+v)
	}
	if len(cookies) > 0 {
		h.Set("Cookie", strings.Join(cookies, "; "))
	}
}

// receiverOf is the user whose thread th is, for delivery.*; nil at load.
func receiverOf(th *starlark.Thread) ws.Receiver {
	if u := userOf(th); u != nil {
		return (*wsView)(u)
	}
	return nil
}

// Waiting holds a token while WebSocket messages wait for their handlers: the engine then takes each
// with NextMessage and passes it to Handle on the user's goroutine, between actions and during its pauses.
// nil (never ready) until the user connects a WebSocket.
func (u *User) Waiting() <-chan struct{} { return u.value.ws.Waiting() }

// NextMessage returns the oldest message waiting for its handler, or nil.
func (u *User) NextMessage() *ws.Message { return u.value.ws.NextMessage() }

// Dropped is the number of messages dropped because the user's inbox was full.
func (u *User) Dropped() int64 { return u.value.ws.Dropped() }

// Handle runs m's handler, on_message(user, msg) recorded as the action MessageAction, or for a gap
// on_gap(user, ws, expected, got) recorded as GapAction. A message of a
// connection closed since it arrived is dropped.
func (u *User) Handle(m *ws.Message) metrics.Outcome {
	name, fn, args := m.Call(u.value)
	if fn == nil {
		return metrics.OK
	}
	u.handling = m
	defer func() { u.handling = nil }()
	_, s := u.invokeWith(name, fn, args)
	u.env.Record.Record(s)
	return s.Outcome
}
