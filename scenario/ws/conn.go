package ws

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/headroom-dev/headroom/metrics"
	"go.starlark.net/starlark"
)

// Conn is one of the user's WebSocket connections (a websocket value). Its reader goroutine puts
// messages into the user's inbox; everything else happens on the user's goroutine, but close may come
// from the user's Cancel, on another (Client.Close).
type Conn struct {
	w         *Client // its user's
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

// writeBuffers lends connections their write buffer only while they write: an idle connection holds none.
var writeBuffers websocket.BufferPool = &sync.Pool{}

// dial opens the connection, on the user's goroutine: the handshake is a request under c.name, and a
// failed one fails the action, as a failed request does.
func (c *Conn) dial() {
	u := c.w.u
	ws, s := c.handshake()
	u.Sent(s)
	c.mu.Lock()
	defer c.mu.Unlock()
	if ws == nil {
		c.err = s.Message
		return
	}
	c.c, c.err, c.closed = ws, "", false
	u.Record(metrics.Sample{Kind: metrics.Opened, Name: c.name})
	go c.read(ws)
}

// handshake dials, from any goroutine, and returns the connection (nil on failure) and its sample.
func (c *Conn) handshake() (*websocket.Conn, metrics.Sample) {
	u, env := c.w.u, c.w.u.Dialing()
	var nd net.Dialer
	if a := env.SourceAddr; a.IsValid() {
		nd.LocalAddr = &net.TCPAddr{IP: a.AsSlice()}
	}
	d := websocket.Dialer{HandshakeTimeout: env.Timeout, Subprotocols: c.protocols, ReadBufferSize: wsReadBuffer,
		WriteBufferSize: 1024, WriteBufferPool: writeBuffers,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dial := nd.DialContext
			if env.Dial != nil {
				dial = env.Dial
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
	d.TLSClientConfig = env.TLS
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // Cancel (the user removed past its grace) stops the handshake
		select {
		case <-u.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	start := u.Now()
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
	s := metrics.Sample{Kind: metrics.Request, Name: c.name, Latency: u.Now().Sub(start)}
	if resp != nil {
		s.Status = resp.StatusCode
	}
	switch {
	case err != nil && canceled(u):
		s.Outcome = metrics.Canceled
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		s.Outcome, s.Message = metrics.Timeout, "timeout after "+d.HandshakeTimeout.String()
	case err != nil:
		s.Outcome, s.Message = metrics.Failed, err.Error()
	}
	if err != nil {
		return nil, s
	}
	if canceled(u) { // Cancel came while connecting: it did not see this one
		ws.Close()
		return nil, s
	}
	if env.MaxMessage > 0 {
		ws.SetReadLimit(int64(env.MaxMessage))
	}
	return ws, s
}

// redial reconnects in the background after the server closed the connection or it broke: it waits
// the backoff (doubling from backoff[0] to backoff[1], each wait between half and all of it), dials,
// records the handshake (never failing an action) and starts over until it succeeds, the scenario
// closes the connection, or the user is cancelled.
func (c *Conn) redial() {
	u := c.w.u
	wait := c.backoff[0]
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for n := uint64(0); ; n++ {
		frac := u.Spread(100 + n)
		timer.Reset(wait/2 + time.Duration(frac*float64(wait/2)))
		select {
		case <-timer.C:
		case <-u.Done():
			return
		}
		if c.isClosed() {
			return
		}
		ws, s := c.handshake()
		u.Record(s)
		u.Record(metrics.Sample{Kind: metrics.Reconnect, Name: c.name})
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
			u.Record(metrics.Sample{Kind: metrics.Opened, Name: c.name})
			go c.read(ws)
			return
		}
		c.mu.Lock()
		c.err = s.Message
		c.mu.Unlock()
		wait = min(2*wait, c.backoff[1])
	}
}

func (c *Conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// canceled tells whether u was cancelled.
func canceled(u User) bool {
	select {
	case <-u.Done():
		return true
	default:
		return false
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// ended is read's end: unless the user closed ws first, the connection is
// counted closed (normally for a close frame 1000 or 1001, abnormally
// otherwise) and reconnected if its policy says so.
func (c *Conn) ended(ws *websocket.Conn, err error) {
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
		c.w.u.Record(s)
	}
	if again {
		c.redial()
	}
}

// close sends a close frame and closes the connection; safe from any goroutine.
func (c *Conn) close() {
	c.mu.Lock()
	ws := c.c
	c.c, c.closed = nil, true
	c.mu.Unlock()
	if ws != nil {
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		ws.Close()
		c.w.u.Record(metrics.Sample{Kind: metrics.Closed, Name: c.name})
	}
}

func (c *Conn) String() string        { return fmt.Sprintf("<websocket %s>", c.url) }
func (c *Conn) Type() string          { return "websocket" }
func (c *Conn) Freeze()               {}
func (c *Conn) Truth() starlark.Bool  { return true }
func (c *Conn) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: websocket") }
func (c *Conn) AttrNames() []string {
	return []string{"close", "error", "ok", "reconnect", "reconnects", "send", "send_json", "subprotocol", "url"}
}
func (c *Conn) Attr(name string) (starlark.Value, error) {
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
			c.w.u.Record(metrics.Sample{Kind: metrics.Reconnect, Name: c.name})
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
				js, err := c.w.h.EncodeJSON(v)
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

func (c *Conn) isOpen() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c != nil
}

// send writes one message; false (and the action failed, saying why) when the connection is not open or
// the write fails.
func (c *Conn) send(typ int, mt string, data []byte) bool {
	c.mu.Lock()
	ws := c.c
	c.mu.Unlock()
	u := c.w.u
	if ws == nil {
		u.Fail(c.name + ": send on a WebSocket that is not open")
		return false
	}
	_ = ws.SetWriteDeadline(time.Now().Add(max(u.Dialing().Timeout, time.Second)))
	if err := ws.WriteMessage(typ, data); err != nil {
		u.Fail(c.name + ": send: " + err.Error())
		return false
	}
	u.Record(metrics.Sample{Kind: metrics.MessageOut, Name: c.name, Type: mt, BytesOut: int64(len(data))})
	return true
}
