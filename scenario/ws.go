package scenario

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/headroom-dev/headroom/metrics"
	"go.starlark.net/starlark"
)

// MessageAction is the action name under which a WebSocket message handler's runs are recorded.
const MessageAction = "(ws message)"

// wsValue is user.ws: connect, and the methods of the user's first connection.
type wsValue struct {
	u     *User
	mu    sync.Mutex // conns is appended to by the user, read by Cancel
	conns []*wsConn
}

// all returns the user's connections.
func (w *wsValue) all() []*wsConn {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*wsConn(nil), w.conns...)
}

// wsConn is one of the user's WebSocket connections. Its reader goroutine puts messages into the user's
// inbox; everything else happens on the user's goroutine, but Close may come from Cancel's.
type wsConn struct {
	u         *User
	url       string
	name      string
	header    http.Header
	protocols []string
	onMessage starlark.Callable // nil: messages are dropped unread (unless onType has their type)
	// onType is on_message given as a dict: the handler of each message type. A message of a type it
	// does not name is counted and dropped, without waking the user.
	onType map[string]starlark.Callable
	// typeField and seqField name top-level JSON fields of the messages
	// received: the first is the type they are counted under, the second
	// a sequence number whose jumps are gaps, passed to onGap.
	typeField, seqField string
	onGap               starlark.Callable
	// backoff bounds the waits between automatic reconnects after the server closes the connection or
	// it breaks (doubling from the first, with jitter); zero: no automatic reconnect.
	backoff    [2]time.Duration
	reconnects atomic.Int64 // automatic ones, each a handshake recorded under name

	mu     sync.Mutex
	c      *websocket.Conn // nil when closed or not connected
	err    string          // why the last connect failed, "" if it did not
	closed bool            // by the scenario or the user's end: no message is delivered any more
}

var (
	_ starlark.HasAttrs = (*wsValue)(nil)
	_ starlark.HasAttrs = (*wsConn)(nil)
)

func (w *wsValue) String() string        { return "<user.ws>" }
func (w *wsValue) Type() string          { return "ws" }
func (w *wsValue) Freeze()               {}
func (w *wsValue) Truth() starlark.Bool  { return true }
func (w *wsValue) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: ws") }
func (w *wsValue) AttrNames() []string {
	return []string{"close", "connect", "reconnect", "send", "send_json"}
}
func (w *wsValue) Attr(name string) (starlark.Value, error) {
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
func (w *wsValue) connect(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
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
	backoff, err := backoffOf(reconnect)
	if err != nil {
		return nil, fmt.Errorf("%s: reconnect=%s: %v", b.Name(), reconnect, err)
	}
	u := w.u
	full, sameOrigin, err := u.wsURL(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	c := &wsConn{u: u, url: full, name: name, header: http.Header{}, onMessage: handler, onType: byType,
		backoff: backoff, typeField: typeField, seqField: seqField, onGap: onGap}
	if c.name == "" {
		c.name = "WS " + pathOf(full)
	}
	if sameOrigin { // user.http.headers and cookies go to the target's origin only
		for _, kv := range u.value.http.headers.Items() {
			c.header.Set(plain(kv[0]), plain(kv[1]))
		}
		var cookies []string
		for k, v := range u.env.HTTP.Cookies() {
			cookies = append(cookies, k+"="+v)
		}
		if len(cookies) > 0 {
			c.header.Set("Cookie", strings.Join(cookies, "; "))
		}
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
	if u.inbox == nil {
		u.inbox = newInbox()
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

// wsURL resolves a path against the target as ws(s)://, or checks a ws(s):// URL; sameOrigin tells
// whether it goes to the target's host.
func (u *User) wsURL(raw string) (string, bool, error) {
	t := u.env.Target
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

// backoffOf reads reconnect=: None or False (off), True (defaultBackoff), or (first, most) durations.
func backoffOf(v starlark.Value) ([2]time.Duration, error) {
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
			lo, err1 := Duration(v[0])
			hi, err2 := Duration(v[1])
			if err1 == nil && err2 == nil && lo > 0 && hi >= lo {
				return [2]time.Duration{lo, hi}, nil
			}
		}
	}
	return [2]time.Duration{}, errors.New(`want True (1 s doubling to 30 s), False, or ("first", "most"), e.g. ("500ms", "10s")`)
}

// writeBuffers lends connections their write buffer only while they write: an idle connection holds none.
var writeBuffers websocket.BufferPool = &sync.Pool{}

// dial opens the connection, on the user's goroutine: the handshake is a request under c.name, and a
// failed one fails the action, as a failed request does.
func (c *wsConn) dial() {
	u := c.u
	ws, s := c.handshake(u.setup)
	u.fromIntended(&s)
	u.env.Record.Record(s)
	u.noteRequest(c.name, &s)
	c.mu.Lock()
	defer c.mu.Unlock()
	if ws == nil {
		c.err = s.Message
		return
	}
	c.c, c.err, c.closed = ws, "", false
	u.env.Record.Record(metrics.Sample{Kind: metrics.Opened, Name: c.name})
	go c.read(ws)
}

// handshake dials, from any goroutine, and returns the connection (nil on failure) and its sample.
func (c *wsConn) handshake(setup bool) (*websocket.Conn, metrics.Sample) {
	u := c.u
	var nd net.Dialer
	if a := u.env.SourceAddr; a.IsValid() {
		nd.LocalAddr = &net.TCPAddr{IP: a.AsSlice()}
	}
	d := websocket.Dialer{HandshakeTimeout: u.env.Timeout, Subprotocols: c.protocols, ReadBufferSize: wsReadBuffer,
		WriteBufferSize: 1024, WriteBufferPool: writeBuffers,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dial := nd.DialContext
			if u.env.Dial != nil {
				dial = u.env.Dial
			}
			conn, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return lend(conn), nil
		}}
	if d.HandshakeTimeout <= 0 {
		d.HandshakeTimeout = 10 * time.Second
	}
	d.TLSClientConfig = u.env.TLS
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // Cancel (the user removed past its grace) stops the handshake
		select {
		case <-u.cancelCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	start := u.env.Now()
	// The dial runs on a goroutine of its own: it needs a deep stack (TLS, the handshake's parsing), which
	// would otherwise stay with the user's goroutine, idle, for the rest of the run.
	type dialed struct {
		ws   *websocket.Conn
		resp *http.Response
		err  error
	}
	done := make(chan dialed, 1)
	go func() {
		ws, resp, err := d.DialContext(ctx, c.url, c.header)
		done <- dialed{ws, resp, err}
	}()
	r := <-done
	ws, resp, err := r.ws, r.resp, r.err
	s := metrics.Sample{Kind: metrics.Request, Name: c.name, Latency: u.env.Now().Sub(start), Setup: setup}
	if resp != nil {
		s.Status = resp.StatusCode
	}
	switch {
	case err != nil && u.canceled.Load() != nil:
		s.Outcome = metrics.Canceled
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		s.Outcome, s.Message = metrics.Timeout, "timeout after "+d.HandshakeTimeout.String()
	case err != nil:
		s.Outcome, s.Message = metrics.Failed, err.Error()
	}
	if err != nil {
		return nil, s
	}
	if u.canceled.Load() != nil { // Cancel came while connecting: it did not see this one
		ws.Close()
		return nil, s
	}
	if u.env.MaxMessage > 0 {
		ws.SetReadLimit(int64(u.env.MaxMessage))
	}
	return ws, s
}

// redial reconnects in the background after the server closed the connection or it broke: it waits
// the backoff (doubling from backoff[0] to backoff[1], each wait between half and all of it), dials,
// records the handshake (never failing an action) and starts over until it succeeds, the scenario
// closes the connection, or the user is cancelled.
func (c *wsConn) redial() {
	wait := c.backoff[0]
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for n := uint64(0); ; n++ {
		frac := float64(mix(c.u.env.Seed, uint64(c.u.env.ID), 200+n)>>11) / (1 << 53)
		timer.Reset(wait/2 + time.Duration(frac*float64(wait/2)))
		select {
		case <-timer.C:
		case <-c.u.cancelCh:
			return
		}
		if c.isClosed() {
			return
		}
		ws, s := c.handshake(false)
		c.u.env.Record.Record(s)
		c.u.env.Record.Record(metrics.Sample{Kind: metrics.Reconnect, Name: c.name})
		c.reconnects.Add(1)
		if ws != nil {
			c.mu.Lock()
			if c.closed {
				c.mu.Unlock()
				ws.Close()
				return
			}
			c.c, c.err = ws, ""
			c.mu.Unlock()
			c.u.env.Record.Record(metrics.Sample{Kind: metrics.Opened, Name: c.name})
			go c.read(ws)
			return
		}
		c.mu.Lock()
		c.err = s.Message
		c.mu.Unlock()
		wait = min(2*wait, c.backoff[1])
	}
}

func (c *wsConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// ended is read's end: unless the user closed ws first, the connection is
// counted closed (normally for a close frame 1000 or 1001, abnormally
// otherwise) and reconnected if its policy says so.
func (c *wsConn) ended(ws *websocket.Conn, err error) {
	c.mu.Lock()
	mine := c.c == ws
	if mine {
		c.c = nil
		c.err = "closed: " + err.Error()
	}
	again := mine && !c.closed && c.backoff[0] > 0
	c.mu.Unlock()
	ws.Close()
	if mine {
		s := metrics.Sample{Kind: metrics.Closed, Name: c.name}
		if !websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
			s.Outcome, s.Message = metrics.Failed, "closed: "+err.Error()
		}
		c.u.env.Record.Record(s)
	}
	if again {
		c.redial()
	}
}

// close sends a close frame and closes the connection; safe from any goroutine.
func (c *wsConn) close() {
	c.mu.Lock()
	ws := c.c
	c.c, c.closed = nil, true
	c.mu.Unlock()
	if ws != nil {
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		ws.Close()
		c.u.env.Record.Record(metrics.Sample{Kind: metrics.Closed, Name: c.name})
	}
}

func (c *wsConn) String() string        { return fmt.Sprintf("<websocket %s>", c.url) }
func (c *wsConn) Type() string          { return "websocket" }
func (c *wsConn) Freeze()               {}
func (c *wsConn) Truth() starlark.Bool  { return true }
func (c *wsConn) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: websocket") }
func (c *wsConn) AttrNames() []string {
	return []string{"close", "error", "ok", "reconnect", "reconnects", "send", "send_json", "subprotocol", "url"}
}
func (c *wsConn) Attr(name string) (starlark.Value, error) {
	c.mu.Lock()
	ws, why := c.c, c.err
	c.mu.Unlock()
	switch name {
	case "url":
		return starlark.String(c.url), nil
	case "reconnects":
		return starlark.MakeInt64(c.reconnects.Load()), nil
	case "ok":
		return starlark.Bool(ws != nil), nil
	case "error":
		if why == "" {
			return starlark.None, nil
		}
		return starlark.String(why), nil
	case "subprotocol":
		if ws == nil {
			return starlark.None, nil
		}
		return starlark.String(ws.Subprotocol()), nil
	case "close":
		return starlark.NewBuiltin("websocket.close", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			c.close()
			return starlark.None, nil
		}), nil
	case "reconnect":
		return starlark.NewBuiltin("websocket.reconnect", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			c.u.env.Record.Record(metrics.Sample{Kind: metrics.Reconnect, Name: c.name})
			c.close()
			c.dial()
			return starlark.Bool(c.isOpen()), nil
		}), nil
	case "send", "send_json":
		return starlark.NewBuiltin("websocket."+name, func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			var v starlark.Value
			var mt string
			if err := starlark.UnpackArgs(b.Name(), args, kw, "message", &v, "type?", &mt); err != nil {
				return nil, err
			}
			typ, data := websocket.TextMessage, []byte(nil)
			if name == "send_json" {
				js, err := toJSON(v)
				if err != nil {
					return nil, fmt.Errorf("%s: %v", b.Name(), err)
				}
				data = js
			} else if bs, ok := v.(starlark.Bytes); ok {
				typ, data = websocket.BinaryMessage, []byte(bs)
			} else if s, ok := v.(starlark.String); ok {
				data = []byte(s)
			} else {
				return nil, fmt.Errorf("%s: got a %s, want a string (a text message) or bytes (binary)", b.Name(), v.Type())
			}
			if mt == "" {
				mt = typeName(typ)
			}
			return starlark.Bool(c.send(typ, mt, data)), nil
		}), nil
	}
	return nil, nil
}

func (c *wsConn) isOpen() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c != nil
}

// send writes one message; false (and the action failed, saying why) when the connection is not open or
// the write fails.
func (c *wsConn) send(typ int, mt string, data []byte) bool {
	c.mu.Lock()
	ws := c.c
	c.mu.Unlock()
	u := c.u
	if ws == nil {
		u.failAction(c.name + ": send on a WebSocket that is not open")
		return false
	}
	_ = ws.SetWriteDeadline(time.Now().Add(max(u.env.Timeout, time.Second)))
	if err := ws.WriteMessage(typ, data); err != nil {
		u.failAction(c.name + ": send: " + err.Error())
		return false
	}
	u.env.Record.Record(metrics.Sample{Kind: metrics.MessageOut, Name: c.name, Type: mt, BytesOut: int64(len(data))})
	return true
}
