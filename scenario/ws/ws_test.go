package ws

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/headroom-dev/headroom/metrics"
	"go.starlark.net/starlark"
)

// fakeUser is a User without a scenario: the interface is all a user's
// WebSockets read of it. It tallies the samples recorded, by kind.
type fakeUser struct {
	target *url.URL
	done   chan struct{}

	mu      sync.Mutex
	counts  map[metrics.Kind]int64 // samples by kind, a Dropped one counted by its N
	failed  string
	reach   func(map[metrics.Kind]int64) bool // when it first holds, reached is closed
	reached chan struct{}
}

var _ User = (*fakeUser)(nil)

func newFakeUser(target *url.URL, reach func(map[metrics.Kind]int64) bool) *fakeUser {
	return &fakeUser{target: target, done: make(chan struct{}), counts: map[metrics.Kind]int64{}, reach: reach, reached: make(chan struct{})}
}

func (u *fakeUser) Dialing() Dialing         { return Dialing{Target: u.target, Timeout: 5 * time.Second} }
func (u *fakeUser) Now() time.Time           { return time.Now() }
func (u *fakeUser) Spread(uint64) float64    { return 0.5 }
func (u *fakeUser) Done() <-chan struct{}    { return u.done }
func (u *fakeUser) Sent(s metrics.Sample)    { u.Record(s) }
func (u *fakeUser) OriginHeader(http.Header) {}
func (u *fakeUser) Fail(why string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.failed = why
}
func (u *fakeUser) Record(s metrics.Sample) {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := int64(1)
	if s.Kind == metrics.Dropped {
		n = s.N
	}
	u.counts[s.Kind] += n
	if u.reach != nil && u.reach(u.counts) {
		u.reach = nil
		close(u.reached)
	}
}

// await waits until what the user was made to wait for holds; it fails the test after 5 s.
func (u *fakeUser) await(t *testing.T, what string) {
	t.Helper()
	select {
	case <-u.reached:
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s within 5 s", what)
	}
}

// connect calls user.ws.connect(path, **kw) on c.
func connect(t *testing.T, c *Client, path string, kw ...starlark.Tuple) starlark.Value {
	t.Helper()
	fn, _ := c.Attr("connect")
	v, err := starlark.Call(&starlark.Thread{}, fn, starlark.Tuple{starlark.String(path)}, kw)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// serveWS is a WebSocket server on 127.0.0.1 that upgrades each request and
// hands the connection to talk, closing it when talk returns.
func serveWS(talk func(c *websocket.Conn)) *httptest.Server {
	up := websocket.Upgrader{}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		talk(c)
	}))
}

// lentDialer dials WebSockets over lent connections, as Conn.handshake does.
func lentDialer() *websocket.Dialer {
	return &websocket.Dialer{ReadBufferSize: wsReadBuffer, NetDial: func(network, addr string) (net.Conn, error) {
		c, err := net.Dial(network, addr)
		if err != nil {
			return nil, err
		}
		return lend(c), nil
	}}
}

// A flood the handler cannot keep up with: the inbox keeps the first
// inboxSize messages, in order, the rest are dropped and counted, and its
// room is given back once they are taken.
func TestAFloodTheHandlerCannotKeepUpWith(t *testing.T) {
	const flood, sent = 5000, `{"event":"posted"}`
	srv := serveWS(func(c *websocket.Conn) {
		for range flood {
			if c.WriteMessage(websocket.TextMessage, []byte(sent)) != nil {
				return
			}
		}
		for { // until the client closes
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
		}
	})
	defer srv.Close()
	target, _ := url.Parse(srv.URL)
	u := newFakeUser(target, func(n map[metrics.Kind]int64) bool { return n[metrics.MessageIn] == flood })
	c := New(u, &Helpers{})
	defer c.Close()
	handler := starlark.NewBuiltin("handler", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
		return starlark.None, nil
	})
	connect(t, c, "/", starlark.Tuple{starlark.String("name"), starlark.String("ws")}, starlark.Tuple{starlark.String("on_message"), handler})
	u.await(t, "every message read") // nothing handles the inbox meanwhile: it fills
	u.mu.Lock()
	dropped := u.counts[metrics.Dropped]
	u.mu.Unlock()
	if c.inbox.len() != inboxSize || dropped != flood-inboxSize || c.Dropped() != dropped {
		t.Errorf("inbox %d, dropped %d (user says %d); want %d kept and the rest dropped, counted",
			c.inbox.len(), dropped, c.Dropped(), inboxSize)
	}
	// The first message kept is the first sent, in order, and the room is given back once handled.
	for i := range inboxSize {
		if m := c.NextMessage(); m == nil || string(m.data) != sent {
			t.Fatalf("message %d: %v", i, m)
		}
	}
	if m := c.NextMessage(); m != nil || c.inbox.ring != nil {
		t.Errorf("after %d taken: next %v, room %d; want none and the room given back", inboxSize, m, len(c.inbox.ring))
	}
}

func TestReconnectArgument(t *testing.T) {
	duration := func(v starlark.Value) (time.Duration, error) { // the scenario's reads numbers too
		s, _ := starlark.AsString(v)
		return time.ParseDuration(s)
	}
	for _, c := range []struct {
		v    starlark.Value
		want [2]time.Duration
	}{
		{starlark.None, [2]time.Duration{}},
		{starlark.False, [2]time.Duration{}},
		{starlark.True, defaultBackoff},
		{starlark.Tuple{starlark.String("500ms"), starlark.String("10s")}, [2]time.Duration{500 * time.Millisecond, 10 * time.Second}},
	} {
		if got, err := backoffOf(c.v, duration); err != nil || got != c.want {
			t.Errorf("reconnect=%v: %v %v, want %v", c.v, got, err, c.want)
		}
	}
	for _, v := range []starlark.Value{starlark.MakeInt(3), starlark.Tuple{starlark.String("10s"), starlark.String("1s")}, starlark.Tuple{starlark.String("0s"), starlark.String("1s")}} {
		if _, err := backoffOf(v, duration); err == nil {
			t.Errorf("reconnect=%v accepted", v)
		}
	}
}
