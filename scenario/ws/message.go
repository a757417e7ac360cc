package ws

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/gorilla/websocket"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/starjson"
	"go.starlark.net/starlark"
)

// Message is one WebSocket message waiting for its connection's handler (see Client.Waiting).
type Message struct {
	conn   *Conn
	binary bool
	typ    string // what it is counted under: its type_field value, or "text" or "binary"
	data   []byte
	at     time.Time // when it arrived (arrived), or else when it was read
	// gap, when set, makes this a gap for on_gap instead of a message:
	// the sequence number expected and the one that came.
	gap [2]int64
}

// Type is what m is counted under: its type_field value, or "text" or "binary".
func (m *Message) Type() string { return m.typ }

// GapAction is the action name under which on_gap's runs are recorded.
const GapAction = "(ws gap)"

// typeName is how a message with no type_field value is counted.
func typeName(typ int) string {
	if typ == websocket.BinaryMessage {
		return "binary"
	}
	return "text"
}

// fields reads a received message's type (its type_field, else "text" or
// "binary") and sequence number (its seq_field, an integer). Only the top
// level of a JSON object is looked at; the rest of it is skipped unread.
func (c *Conn) fields(typ int, data []byte) (mt string, seq int64, hasSeq bool) {
	mt = typeName(typ)
	if c.typeField == "" && c.seqField == "" || typ != websocket.TextMessage {
		return mt, 0, false
	}
	text := unsafe.String(unsafe.SliceData(data), len(data))
	if t, ok := starjson.TopField(text, c.typeField); ok && len(t) > 1 && t[0] == '"' {
		if v, err := starjson.Decode(t); err == nil && v.(starlark.String) != "" {
			mt = string(v.(starlark.String))
		}
	}
	if n, ok := starjson.TopField(text, c.seqField); ok {
		if v, err := strconv.ParseInt(n, 10, 64); err == nil {
			seq, hasSeq = v, true
		}
	}
	return mt, seq, hasSeq
}

// messageValue is what a handler receives.
type messageValue struct{ m *Message }

var _ starlark.HasAttrs = (*messageValue)(nil)

func (v *messageValue) String() string        { return fmt.Sprintf("<message %d bytes>", len(v.m.data)) }
func (v *messageValue) Type() string          { return "message" }
func (v *messageValue) Freeze()               {}
func (v *messageValue) Truth() starlark.Bool  { return true }
func (v *messageValue) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: message") }
func (v *messageValue) AttrNames() []string {
	return []string{"binary", "bytes", "json", "text", "type", "websocket"}
}
func (v *messageValue) Attr(name string) (starlark.Value, error) {
	switch name {
	case "text":
		return starlark.String(v.m.data), nil
	case "bytes":
		return starlark.Bytes(v.m.data), nil
	case "binary":
		return starlark.Bool(v.m.binary), nil
	case "websocket":
		return v.m.conn, nil
	case "type":
		return starlark.String(v.m.typ), nil
	case "json":
		// The values may share the text's memory: m.data is the message's own, never written again.
		return v.m.conn.w.h.JSONMethod("message.json", func() (string, error) {
			return unsafe.String(unsafe.SliceData(v.m.data), len(v.m.data)), nil
		}, func(err error) error {
			if lim := (*starjson.LimitError)(nil); errors.As(err, &lim) {
				return fmt.Errorf("message.json: %w", err)
			}
			return fmt.Errorf("message.json: the message is not JSON (%v): %q", err, clip(string(v.m.data), 80))
		}), nil
	}
	return nil, nil
}

// deliver puts m into the user's inbox for its handler, or drops and counts it when the inbox is full
// or its connection has no handler. Called from connections' reader goroutines.
func (w *Client) deliver(m *Message) {
	if m.handler() == nil {
		return
	}
	if !w.inbox.put(m) {
		w.dropped.Add(1)
		w.u.Record(metrics.Sample{Kind: metrics.Dropped, Name: m.conn.name, N: 1})
		// A flooded reader always has data waiting and would keep its core reading
		// messages to drop while the user's goroutine waits to empty the inbox.
		runtime.Gosched()
	}
}

// handler is the function m goes to: on_gap for a gap, else its type's (handlerOf); nil when none wants it.
func (m *Message) handler() starlark.Callable {
	if m.gap != [2]int64{} {
		return m.conn.onGap
	}
	return m.conn.handlerOf(m.typ)
}

// handlerOf is the function a message of type mt goes to: on_message, or given a dict, mt's; nil when
// none wants it.
func (c *Conn) handlerOf(mt string) starlark.Callable {
	if c.onType != nil {
		return c.onType[mt]
	}
	return c.onMessage
}

// Waiting holds a token while WebSocket messages wait for their handlers: the user's owner then takes
// each with NextMessage and runs it (Message.Call) on the user's goroutine, between actions and during
// its pauses. nil (never ready) until the user connects a WebSocket, or for a nil Client.
func (w *Client) Waiting() <-chan struct{} {
	if w == nil || w.inbox == nil {
		return nil
	}
	return w.inbox.wake
}

// NextMessage returns the oldest message waiting for its handler, or nil.
func (w *Client) NextMessage() *Message {
	if w == nil || w.inbox == nil {
		return nil
	}
	return w.inbox.take()
}

// Dropped is the number of messages dropped because the user's inbox was full; 0 for a nil Client.
func (w *Client) Dropped() int64 {
	if w == nil {
		return 0
	}
	return w.dropped.Load()
}

// Call is how m is handled: the action it is recorded as and its handler with the arguments,
// on_message(user, msg) as MessageAction, or for a gap on_gap(user, ws, expected, got) as GapAction.
// fn is nil when m's connection was closed since it arrived: then m is dropped.
func (m *Message) Call(user starlark.Value) (name string, fn starlark.Callable, args starlark.Tuple) {
	m.conn.mu.Lock()
	closed := m.conn.closed
	m.conn.mu.Unlock()
	if closed {
		return "", nil, nil
	}
	if m.gap != [2]int64{} {
		return GapAction, m.conn.onGap, starlark.Tuple{user, m.conn, starlark.MakeInt64(m.gap[0]), starlark.MakeInt64(m.gap[1])}
	}
	return MessageAction, m.handler(), starlark.Tuple{user, &messageValue{m}}
}

// Close closes every connection of the user with a close frame; safe from any goroutine, and on a
// nil Client (a background lane's user has none).
func (w *Client) Close() {
	if w == nil {
		return
	}
	for _, c := range w.all() {
		c.close()
	}
}

// read hands ws's messages to the user's inbox until ws ends (see got).
// It is most of a connection's life, parked in ReadMessage: its own frame
// is kept small so the goroutine's stack stays at the minimum (2 KB, not 4).
func (c *Conn) read(ws *websocket.Conn) {
	next := int64(-1) // the sequence number expected; -1 until the first
	for {
		typ, data, err := readMessage(ws)
		if err != nil {
			c.ended(ws, err)
			return
		}
		c.got(ws, typ, data, &next)
	}
}

// got counts a message read and hands it to the inbox, watching the
// sequence field: a number above the one expected (*next) is a gap
// (counted, and passed to on_gap); one below starts the count again (a
// server that numbers each connection from 0).
//
//go:noinline
func (c *Conn) got(ws *websocket.Conn, typ int, data []byte, next *int64) {
	w := c.w
	mt, seq, hasSeq := c.fields(typ, data)
	w.u.Record(metrics.Sample{Kind: metrics.MessageIn, Name: c.name, Type: mt, BytesIn: int64(len(data))})
	if hasSeq {
		if *next >= 0 && seq > *next {
			w.u.Record(metrics.Sample{Kind: metrics.Gap, Name: c.name, N: seq - *next})
			if c.onGap != nil {
				w.deliver(&Message{conn: c, gap: [2]int64{*next, seq}, at: arrived(ws, w.u.Now())})
			}
		}
		*next = seq + 1
	}
	if c.handlerOf(mt) == nil { // counted above, and no handler wants it: nothing to build
		return
	}
	w.deliver(&Message{conn: c, binary: typ == websocket.BinaryMessage, typ: mt, data: data, at: arrived(ws, w.u.Now())})
}

// readMessage is ws.ReadMessage, but the message is read into a pooled buffer and copied out at its
// size: ReadMessage's io.ReadAll grows its slice from 512 bytes, so a message of 1 KB cost 2.5 KB
// of garbage. Its frame is on the stack of every idle connection, parked in NextReader, so it is as
// small as ReadMessage's; the copying is in copyMessage, on the stack only while a message is read
// (with it here the stack of an idle connection's reader passed 2 KB: +2.2 KB a user).
func readMessage(ws *websocket.Conn) (int, []byte, error) {
	typ, r, err := ws.NextReader()
	if err != nil {
		return typ, nil, err
	}
	data, err := copyMessage(r)
	return typ, data, err
}

//go:noinline
func copyMessage(r io.Reader) ([]byte, error) {
	b := messageBuffers.Get().(*bytes.Buffer)
	b.Reset()
	_, err := b.ReadFrom(r)
	data := bytes.Clone(b.Bytes())
	if b.Cap() <= 64<<10 { // a large message's buffer is not kept
		messageBuffers.Put(b)
	}
	if err != nil {
		return nil, err
	}
	return data, nil
}

var messageBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// clip is s cut to n bytes, "..." marking a cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
