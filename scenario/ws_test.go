package scenario

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario/ws"
	"go.starlark.net/starlark"
)

// echoServer is a real WebSocket server on 127.0.0.1 that echoes every message and reports each
// connection's close code on closes; /missing answers 404.
func echoServer(t *testing.T) (*url.URL, chan int) {
	t.Helper()
	closes := make(chan int, 16)
	up := websocket.Upgrader{Subprotocols: []string{"chat.v1"}}
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t0k" {
			http.Error(w, "no session", http.StatusUnauthorized)
			return
		}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			typ, data, err := ws.ReadMessage()
			if err != nil {
				code := 0
				if ce, ok := err.(*websocket.CloseError); ok {
					code = ce.Code
				}
				closes <- code
				return
			}
			if string(data) == "close me" { // the server ends the connection
				ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "restart"), time.Now().Add(time.Second))
				closes <- -1
				return
			}
			if string(data) == "drop me" { // the connection breaks: no close frame
				closes <- -1
				return
			}
			if ws.WriteMessage(typ, data) != nil {
				return
			}
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u, closes
}

// wsUser loads src (with an action A running act) as a user of the target.
func wsUser(t *testing.T, src string, target *url.URL) (*User, *lockedSamples) {
	t.Helper()
	sc, err := load("w.star", src+"\nactions = [action('A', act)]\n")
	if err != nil {
		t.Fatal(err)
	}
	rec := &lockedSamples{}
	u := NewUser(sc, Env{ID: 1, Seed: 1, HTTP: &fakeDoer{status: 200}, Record: rec, WS: ws.Dialing{Target: target, Timeout: 5 * time.Second}})
	t.Cleanup(u.Close)
	return u, rec
}

// next waits for the user's next message and handles it.
func next(t *testing.T, u *User) metrics.Outcome {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		if m := u.NextMessage(); m != nil {
			return u.Handle(m)
		}
		select {
		case <-u.Waiting():
		case <-deadline:
			t.Fatal("no WebSocket message within 5 s")
			return 0
		}
	}
}

func TestWebSocketConnectSendAndHandle(t *testing.T) {
	target, closes := echoServer(t)
	u, rec := wsUser(t, `
def on_message(user, msg):
    user.state["got"] = user.state.get("got", []) + [msg.json() if msg.text.startswith("{") else msg.text]
def act(user):
    user.http.headers["Authorization"] = "Bearer t0k"
    c = user.ws.connect("/echo", subprotocols=["chat.v1"], on_message=on_message)
    user.state["proto"] = c.subprotocol
    c.send("hello")
    user.ws.send_json({"seq": 1, "action": "ping"})
`, target)
	if out := u.Run(u.Type().Actions[0]); out != metrics.OK {
		t.Fatalf("action: %v %v", out, rec.last(metrics.Action).Message)
	}
	hs := rec.all()[0]
	if hs.Kind != metrics.Request || hs.Name != "WS /echo" || hs.Status != http.StatusSwitchingProtocols || hs.Outcome != metrics.OK {
		t.Errorf("handshake sample %+v, want request WS /echo, status 101, ok", hs)
	}
	next(t, u)
	next(t, u)
	got, _, _ := u.value.state.Get(starlark.String("got"))
	if got == nil || got.String() != `["hello", {"action": "ping", "seq": 1}]` {
		t.Errorf("the handler saw %v, want the two echoes in order", got)
	}
	if p, _, _ := u.value.state.Get(starlark.String("proto")); p != starlark.String("chat.v1") {
		t.Errorf("subprotocol %v, want chat.v1", p)
	}
	last := rec.last(metrics.Action)
	if last.Kind != metrics.Action || last.Name != MessageAction || last.Outcome != metrics.OK {
		t.Errorf("the handler's run recorded as %+v, want the action %s", last, MessageAction)
	}

	u.Close() // the user ends: a close frame, which the server sees
	select {
	case code := <-closes:
		if code != websocket.CloseNormalClosure {
			t.Errorf("the server saw close code %d, want 1000", code)
		}
	case <-time.After(5 * time.Second):
		t.Error("the server saw no close")
	}
}

func TestWebSocketHandshakeFailureFailsTheAction(t *testing.T) {
	target, _ := echoServer(t)
	u, rec := wsUser(t, `
def act(user):
    c = user.ws.connect("/echo", name="WS echo")   # no session: 401
    user.state["ok"] = c.ok
    user.state["error"] = c.error
`, target)
	if out := u.Run(u.Type().Actions[0]); out != metrics.Failed {
		t.Errorf("action outcome %v, want failed", out)
	}
	hs := rec.all()[0]
	if hs.Name != "WS echo" || hs.Status != http.StatusUnauthorized || hs.Outcome != metrics.Failed {
		t.Errorf("handshake sample %+v, want WS echo, 401, failed", hs)
	}
	if ok, _, _ := u.value.state.Get(starlark.String("ok")); ok != starlark.False {
		t.Errorf("c.ok = %v, want False", ok)
	}
	if e, _, _ := u.value.state.Get(starlark.String("error")); e == starlark.None {
		t.Error("c.error is None after a failed handshake")
	}
}

func TestWebSocketMistakes(t *testing.T) {
	target, _ := echoServer(t)
	for src, want := range map[string]string{
		`user.ws.send("x")`:                                    "the user has no WebSocket: call user.ws.connect(...) first",
		`user.ws.connect("http://example.com/")`:               "want a path (/api/v4/websocket) or a ws:// or wss:// URL",
		`user.ws.connect("/echo").send(1)`:                     "got a int, want a string (a text message) or bytes (binary)",
		`user.ws.connect("/echo", on_message=1)`:               "want a function(user, msg), or a dict from message type to function (got int)",
		`user.ws.connect("/echo", on_message={1: act})`:        "a key is int 1: want message types (strings) as keys",
		`user.ws.connect("/echo", on_message={"posted": 1})`:   `"posted"'s handler is int 1: want a function(user, msg)`,
		`user.ws.connect("/echo", on_message={"posted": act})`: `the type "posted" needs type_field=`,
	} {
		u, rec := wsUser(t, "def act(user):\n    "+src+"\n", target)
		u.Run(u.Type().Actions[0])
		last := rec.last(metrics.Action)
		if last.Outcome != metrics.Failed || !strings.Contains(last.Message, want) {
			t.Errorf("%s: %v %q, want a failure saying %q", src, last.Outcome, last.Message, want)
		}
	}
}

func TestWebSocketCancelClosesIt(t *testing.T) {
	target, closes := echoServer(t)
	u, _ := wsUser(t, `
def act(user):
    user.http.headers["Authorization"] = "Bearer t0k"
    user.ws.connect("/echo", on_message=lambda user, msg: None)
`, target)
	u.Run(u.Type().Actions[0])
	u.Cancel("removed")
	select {
	case code := <-closes:
		if code != websocket.CloseNormalClosure {
			t.Errorf("close code %d, want 1000", code)
		}
	case <-time.After(5 * time.Second):
		t.Error("Cancel left the WebSocket open")
	}
}

// lockedSamples is a Recorder safe for the background reconnects.
type lockedSamples struct {
	mu      sync.Mutex
	s       []metrics.Sample
	changed chan struct{} // closed at the next Record
}

func (l *lockedSamples) Record(x metrics.Sample) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.s = append(l.s, x)
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// await waits until cond holds, looking again at each sample recorded; it fails the test after 5 s.
func (l *lockedSamples) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		l.mu.Lock()
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("no %s within 5 s", what)
		}
	}
}

func (l *lockedSamples) all() []metrics.Sample {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]metrics.Sample(nil), l.s...)
}

// last returns the last sample of kind k.
func (l *lockedSamples) last(k metrics.Kind) metrics.Sample {
	all := l.all()
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Kind == k {
			return all[i]
		}
	}
	return metrics.Sample{}
}

// named counts the handshakes (request samples) of name.
func (l *lockedSamples) named(name string) int { return l.count(name, metrics.Request) }

// count counts the samples of name and kind.
func (l *lockedSamples) count(name string, k metrics.Kind) (n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.s {
		if x.Name == name && x.Kind == k {
			n++
		}
	}
	return n
}

func TestWebSocketReconnects(t *testing.T) {
	target, closes := echoServer(t)
	sc, err := load("r.star", `
def connect(user):
    user.http.headers["Authorization"] = "Bearer t0k"
    user.state["auto"] = user.ws.connect("/echo", name="auto", reconnect=("20ms", "100ms"), on_message=lambda user, msg: None)
    user.state["manual"] = user.ws.connect("/echo", name="manual", on_message=lambda user, msg: None)
    user.state["auto"].send("close me")
    user.state["manual"].send("drop me")
def reconnect(user):
    user.state["ok"] = user.state["manual"].reconnect()
actions = [action("Connect", connect), action("Reconnect", reconnect)]
`)
	if err != nil {
		t.Fatal(err)
	}
	rec := &lockedSamples{}
	u := NewUser(sc, Env{ID: 1, Seed: 1, HTTP: &fakeDoer{status: 200}, Record: rec, WS: ws.Dialing{Target: target, Timeout: 5 * time.Second}})
	defer u.Close()
	if out := u.Run(sc.Actions[0]); out != metrics.OK {
		t.Fatalf("connect: %v", out)
	}
	for range 2 {
		if code := <-closes; code != -1 {
			t.Fatalf("server: close %d, want its own", code)
		}
	}
	conn := func(name string) *connAttrs {
		v, _, _ := u.value.state.Get(starlark.String(name))
		return &connAttrs{v.(starlark.HasAttrs)}
	}
	auto, manual := conn("auto"), conn("manual")
	// The reconnect runs in the background after 10-20 ms; it is open once its Opened is recorded.
	rec.await(t, "reopened auto", func() bool { return rec.count("auto", metrics.Opened) == 2 })
	if !auto.isOpen() || auto.reconnects() != 1 || rec.named("auto") != 2 {
		t.Errorf("auto: open %v, %d reconnects, %d handshakes; want open again after 1 reconnect, 2 handshakes",
			auto.isOpen(), auto.reconnects(), rec.named("auto"))
	}
	rec.await(t, "closed manual", func() bool { return rec.count("manual", metrics.Closed) == 1 }) // its reader saw the break
	if manual.isOpen() || rec.named("manual") != 1 {
		t.Errorf("manual (no reconnect=): open %v, %d handshakes; want closed, 1", manual.isOpen(), rec.named("manual"))
	}
	if e, _ := manual.Attr("error"); e == starlark.None || !strings.Contains(string(e.(starlark.String)), "closed") {
		t.Errorf("manual.error = %v, want why it closed", e)
	}
	if out := u.Run(sc.Actions[1]); out != metrics.OK || !manual.isOpen() || rec.named("manual") != 2 {
		t.Errorf("reconnect(): %v, open %v, %d handshakes; want ok, open, 2", out, manual.isOpen(), rec.named("manual"))
	}
	// Each connection's life is counted: auto opened twice, closed by the
	// server once (normally: 1001 going away) and reconnected once by its
	// policy; manual broken once (abnormally: no close frame) and
	// reconnected by the scenario.
	for _, c := range []struct {
		name                             string
		opened, closed, abnormal, reconn int
	}{{"auto", 2, 1, 0, 1}, {"manual", 2, 1, 1, 1}} {
		abnormal := 0
		rec.mu.Lock()
		for _, x := range rec.s {
			if x.Name == c.name && x.Kind == metrics.Closed && x.Outcome == metrics.Failed {
				abnormal++
			}
		}
		rec.mu.Unlock()
		if o, cl, r := rec.count(c.name, metrics.Opened), rec.count(c.name, metrics.Closed), rec.count(c.name, metrics.Reconnect); o != c.opened || cl != c.closed || r != c.reconn || abnormal != c.abnormal {
			t.Errorf("%s: %d opened, %d closed (%d abnormally), %d reconnects; want %d, %d (%d), %d",
				c.name, o, cl, abnormal, r, c.opened, c.closed, c.abnormal, c.reconn)
		}
	}
}

// connAttrs reads a websocket's state as the scenario does, through its
// attributes.
type connAttrs struct{ starlark.HasAttrs }

// isOpen is ws.ok.
func (c *connAttrs) isOpen() bool {
	v, _ := c.Attr("ok")
	return v == starlark.True
}

// reconnects is ws.reconnects.
func (c *connAttrs) reconnects() int64 {
	v, _ := c.Attr("reconnects")
	n, _ := starlark.AsInt32(v)
	return int64(n)
}
