// Package ws is user.ws, a user's WebSockets (gorilla/websocket): its
// connections, their reader goroutines that count and queue what arrives
// (an inbox the user's goroutine empties into its handlers between and
// during its pauses), reconnects, and the `delivery` module that times a
// message from its send to its arrival at another user. It knows nothing
// of the scenario's users but what User (and, for delivery, Receiver)
// says of them, as k6's modules know a VU through modules.VU.
package ws

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"go.starlark.net/starlark"
)

// MessageAction is the action name under which a WebSocket message handler's runs are recorded.
const MessageAction = "(ws message)"

// User is what a user's WebSockets need of the user they belong to; the
// scenario's user implements it. Dialing, Now, Record, Spread and Done are
// safe from any goroutine (a connection's reader and its reconnects call
// them); Sent, Fail and OriginHeader are called on the user's goroutine,
// during one of its calls.
type User interface {
	Dialing() Dialing        // where and how connections go: the same for each
	Now() time.Time          // the user's clock
	Record(metrics.Sample)   // where a connection's samples go
	Spread(k uint64) float64 // the user's k-th fixed fraction in [0, 1), from the seed and its id: a reconnect's jitter
	Done() <-chan struct{}   // closed once the user is cancelled: a handshake or a reconnect's wait ends
	// Sent records a handshake the running call made, as a request of it:
	// marked setup if the user is setting up, counted from an arrival's
	// intended start, failing the call if it failed.
	Sent(metrics.Sample)
	Fail(why string)          // fails the running call with why, unless something failed it first
	OriginHeader(http.Header) // adds the user's default headers and cookies, which go to the target's origin only
}

// Dialing is where and how a user's connections go: the target a path is
// joined to (as ws:// or wss://), the handshake timeout (0: 10 s), the TLS
// configuration (the dialer clones it; nil: Go's defaults), the local
// address to connect from (zero: any), the largest message read (0: no
// bound), and Dial, if set, in place of TCP (a test's target in memory).
type Dialing struct {
	Target     *url.URL
	Timeout    time.Duration
	TLS        *tls.Config
	SourceAddr netip.Addr
	MaxMessage int
	Dial       func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Helpers are the scenario's own builtins that WebSockets share, so that
// a message is encoded, decoded and timed as the rest of a scenario is:
// json.encode's encoder, the method r.json() is made by (a path, a
// default), and the duration parser of think times. One value serves
// every user; it is never changed.
type Helpers struct {
	EncodeJSON func(starlark.Value) ([]byte, error)
	JSONMethod func(name string, text func() (string, error), describe func(error) error) *starlark.Builtin
	Duration   func(starlark.Value) (time.Duration, error)
}

// Client is user.ws: connect, and the methods of the user's first
// connection; it holds the inbox its connections' messages wait in for
// their handlers. Made for a user by New.
type Client struct {
	u       User
	h       *Helpers
	mu      sync.Mutex // conns is appended to by the user, read by Cancel
	conns   []*Conn
	inbox   *inbox       // nil until a connect
	dropped atomic.Int64 // messages the full inbox dropped
}

// New is the user.ws of u.
func New(u User, h *Helpers) *Client { return &Client{u: u, h: h} }

// all returns the user's connections.
func (w *Client) all() []*Conn {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*Conn(nil), w.conns...)
}

var (
	_ starlark.HasAttrs = (*Client)(nil)
	_ starlark.HasAttrs = (*Conn)(nil)
)

func (w *Client) String() string        { return "<user.ws>" }
func (w *Client) Type() string          { return "ws" }
func (w *Client) Freeze()               {}
func (w *Client) Truth() starlark.Bool  { return true }
func (w *Client) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: ws") }
func (w *Client) AttrNames() []string {
	return []string{"close", "connect", "reconnect", "send", "send_json"}
}
func (w *Client) Attr(name string) (starlark.Value, error) {
	if name == "connect" {
		return starlark.NewBuiltin("user.ws.connect", w.connect), nil
	}
	if !strings.Contains(" close reconnect send send_json ", " "+name+" ") {
		return nil, nil
	}
	return starlark.NewBuiltin("user.ws."+name, func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		conns := w.all()
		if len(conns) == 0 {
			return nil, fmt.Errorf("%s: the user has no WebSocket: call user.ws.connect(...) first", b.Name())
		}
		m, _ := conns[0].Attr(name)
		return starlark.Call(th, m, args, kw)
	}), nil
}

// user.ws.connect(url, name=None, headers=None, subprotocols=None, on_message=None, reconnect=None,
// type_field=None, seq_field=None, on_gap=None)
func (w *Client) connect(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var raw, name, typeField, seqField string
	var headers *starlark.Dict
	var protocols *starlark.List
	var onGap starlark.Callable
	var reconnect, onMessage starlark.Value = starlark.None, starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kw, "url", &raw, "name?", &name, "headers?", &headers,
		"subprotocols?", &protocols, "on_message?", &onMessage, "reconnect?", &reconnect,
		"type_field?", &typeField, "seq_field?", &seqField, "on_gap?", &onGap); err != nil {
		return nil, err
	}
	handler, byType, err := handlersOf(onMessage, typeField)
	if err != nil {
		return nil, fmt.Errorf("%s: on_message=%s: %v", b.Name(), clip(onMessage.String(), 60), err)
	}
	if onGap != nil && seqField == "" {
		return nil, fmt.Errorf("%s: on_gap needs seq_field=, the JSON field that numbers the messages (\"seq\")", b.Name())
	}
	backoff, err := backoffOf(reconnect, w.h.Duration)
	if err != nil {
		return nil, fmt.Errorf("%s: reconnect=%s: %v", b.Name(), reconnect, err)
	}
	full, sameOrigin, err := wsURL(w.u.Dialing().Target, raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	c := &Conn{w: w, url: full, name: name, header: http.Header{}, onMessage: handler, onType: byType,
		backoff: backoff, typeField: typeField, seqField: seqField, onGap: onGap}
	if c.name == "" {
		c.name = "WS " + pathOf(full)
	}
	if sameOrigin { // user.http.headers and cookies go to the target's origin only
		w.u.OriginHeader(c.header)
	}
	if headers != nil {
		for _, kv := range headers.Items() {
			c.header.Set(plain(kv[0]), plain(kv[1]))
		}
	}
	if protocols != nil {
		for i := range protocols.Len() {
			c.protocols = append(c.protocols, plain(protocols.Index(i)))
		}
	}
	if w.inbox == nil {
		w.inbox = newInbox()
	}
	w.mu.Lock()
	w.conns = append(w.conns, c)
	w.mu.Unlock()
	c.dial()
	return c, nil
}

// handlersOf reads on_message=: None, a function for every message, or a dict from message type to
// function. Types other than "text" and "binary" come from typeField, so a dict naming one needs it.
func handlersOf(v starlark.Value, typeField string) (starlark.Callable, map[string]starlark.Callable, error) {
	switch v := v.(type) {
	case starlark.NoneType:
		return nil, nil, nil
	case starlark.Callable:
		return v, nil, nil
	case *starlark.Dict:
		byType := make(map[string]starlark.Callable, v.Len())
		for _, kv := range v.Items() {
			t, ok := kv[0].(starlark.String)
			if !ok {
				return nil, nil, fmt.Errorf("a key is %s %s: want message types (strings) as keys", kv[0].Type(), kv[0])
			}
			f, ok := kv[1].(starlark.Callable)
			if !ok {
				return nil, nil, fmt.Errorf("%s's handler is %s %s: want a function(user, msg)", t, kv[1].Type(), kv[1])
			}
			if typeField == "" && t != "text" && t != "binary" {
				return nil, nil, fmt.Errorf("the type %s needs type_field=, the JSON field that names a message's type "+
					"(\"event\", \"type\"); without it every message is \"text\" or \"binary\"", t)
			}
			byType[string(t)] = f
		}
		return nil, byType, nil
	}
	return nil, nil, fmt.Errorf("want a function(user, msg), or a dict from message type to function (got %s)", v.Type())
}

// wsURL resolves a path against the target t as ws(s)://, or checks a ws(s):// URL; sameOrigin tells
// whether it goes to the target's host.
func wsURL(t *url.URL, raw string) (string, bool, error) {
	if strings.HasPrefix(raw, "/") {
		if t == nil {
			return "", false, errors.New("a path needs a target; give a ws:// or wss:// URL")
		}
		ref, err := url.Parse(raw)
		if err != nil {
			return "", false, err
		}
		full := t.ResolveReference(ref)
		full.Scheme = map[string]string{"https": "wss"}[t.Scheme]
		if full.Scheme == "" {
			full.Scheme = "ws"
		}
		full.User = nil
		return full.String(), true, nil
	}
	p, err := url.Parse(raw)
	if err != nil || (p.Scheme != "ws" && p.Scheme != "wss") || p.Host == "" {
		return "", false, fmt.Errorf("%q: want a path (/api/v4/websocket) or a ws:// or wss:// URL", raw)
	}
	return raw, t != nil && p.Host == t.Host, nil
}

func pathOf(full string) string {
	if p, err := url.Parse(full); err == nil && p.Path != "" {
		return p.Path
	}
	return "/"
}

// defaultBackoff is reconnect=True's: 1 s, doubling to 30 s.
var defaultBackoff = [2]time.Duration{time.Second, 30 * time.Second}

// backoffOf reads reconnect=: None or False (off), True (defaultBackoff), or (first, most) durations,
// each read by duration.
func backoffOf(v starlark.Value, duration func(starlark.Value) (time.Duration, error)) ([2]time.Duration, error) {
	switch v := v.(type) {
	case starlark.NoneType:
		return [2]time.Duration{}, nil
	case starlark.Bool:
		if v {
			return defaultBackoff, nil
		}
		return [2]time.Duration{}, nil
	case starlark.Tuple:
		if len(v) == 2 {
			lo, err1 := duration(v[0])
			hi, err2 := duration(v[1])
			if err1 == nil && err2 == nil && lo > 0 && hi >= lo {
				return [2]time.Duration{lo, hi}, nil
			}
		}
	}
	return [2]time.Duration{}, errors.New(`want True (1 s doubling to 30 s), False, or ("first", "most"), e.g. ("500ms", "10s")`)
}

// plain is a header's or subprotocol's value: a string as it is, anything else as Starlark writes it.
func plain(v starlark.Value) string {
	if s, ok := starlark.AsString(v); ok {
		return s
	}
	return v.String()
}
