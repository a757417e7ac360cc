package scenario

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario/ws"
	"go.starlark.net/starlark"
)

// eventServer answers each text message with the lines of its text, one
// message per line: a script of what the server sends.
func eventServer(t *testing.T) *url.URL {
	t.Helper()
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				return
			}
			for _, line := range strings.Split(string(data), "\n") {
				if ws.WriteMessage(websocket.TextMessage, []byte(line)) != nil {
					return
				}
			}
		}
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u
}

func TestWebSocketCountsTypesGapsAndDeliveries(t *testing.T) {
	// A clock that moves only when told: the stamp, the messages' arrival and their handling are apart
	// by exactly what the test says.
	var clock atomic.Int64
	clock.Store(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	u, rec := wsUserEnv(t, `
def on_message(user, msg):
    user.state["types"] = user.state.get("types", []) + [msg.type]
    if msg.type == "posted":
        user.state["delay"] = delivery.record(msg.json("text"), name="posted")
def on_gap(user, ws, expected, got):
    user.state["gap"] = (expected, got)
def act(user):
    c = user.ws.connect("/", name="events", type_field="event", seq_field="seq", on_message=on_message, on_gap=on_gap)
    lines = [
        '{"seq": 0, "event": "hello"}',
        '{"event": "typing", "data": {"seq": 99}, "seq": 1}',
        '{"seq": 4, "event": "posted", "text": "hi ' + delivery.stamp() + '"}',
        '{"seq": 5, "event": "posted", "text": "no stamp"}',
        'not json',
    ]
    c.send("\n".join(lines), type="script")
`, Env{WS: ws.Dialing{Target: eventServer(t), Timeout: 5 * time.Second}, Now: now})
	if out := u.Run(u.Type().Actions[0]); out != metrics.OK {
		t.Fatalf("action: %v %s", out, rec.last(metrics.Action).Message)
	}
	// The messages wait in the inbox before their handlers run (as while the user acts): the delivery is
	// timed to when the message was read, not to when its handler got to it.
	rec.await(t, "the five messages read", func() bool { return rec.count("events", metrics.MessageIn) == 5 })
	const wait = time.Second
	clock.Add(int64(wait))
	for range 6 { // five messages and one gap
		next(t, u)
	}
	if g, _, _ := u.value.state.Get(starlark.String("gap")); g == nil || g.String() != "(2, 4)" {
		t.Errorf("on_gap saw %v, want (2, 4): seq 2 expected after 1, 4 came", g)
	}
	if ts, _, _ := u.value.state.Get(starlark.String("types")); ts == nil || ts.String() != `["hello", "typing", "posted", "posted", "text"]` {
		t.Errorf("msg.type of the five messages: %v", ts)
	}
	if d, _, _ := u.value.state.Get(starlark.String("delay")); d != starlark.None {
		t.Errorf("delivery.record of a text with no stamp = %v, want None", d)
	}
	snap := metrics.NewSnapshot()
	for _, x := range rec.all() {
		snap.Add(&x)
	}
	s := snap.Sockets["events"]
	if s == nil {
		t.Fatal("no socket figures for events")
	}
	in := map[string]int64{}
	for typ, f := range s.In {
		in[typ] = f.Messages
	}
	if in["hello"] != 1 || in["typing"] != 1 || in["posted"] != 2 || in["text"] != 1 || len(in) != 4 {
		t.Errorf("messages in by type %v, want hello 1, typing 1 (the nested seq ignored), posted 2, text 1", in)
	}
	if f := s.Out["script"]; f == nil || f.Messages != 1 {
		t.Errorf("messages out %v, want one of type script", s.Out)
	}
	if s.Opened != 1 || s.Gaps != 1 || s.Missed != 2 {
		t.Errorf("opened %d, gaps %d missing %d; want 1, 1, 2", s.Opened, s.Gaps, s.Missed)
	}
	d := snap.Deliveries["posted"]
	if d == nil || d.Count != 1 || d.Hist().Max() > 1 { // 1 µs: the histogram's lowest value stands for 0
		t.Errorf("deliveries %+v, want one, timed to its arrival (well under the %v it waited for its handler)", d, wait)
	}
	u.Close()
	snap = metrics.NewSnapshot()
	for _, x := range rec.all() {
		snap.Add(&x)
	}
	if open := snap.OpenSockets(); open != 0 {
		t.Errorf("%d open after the user closed, want 0", open)
	}
}

func TestWebSocketHandlersByType(t *testing.T) {
	u, rec := wsUserEnv(t, `
def on_posted(user, msg):
    user.state["seen"] = user.state.get("seen", []) + ["posted " + msg.json("text")]
def on_text(user, msg):
    user.state["seen"] = user.state.get("seen", []) + ["text " + msg.text]
def act(user):
    c = user.ws.connect("/", name="events", type_field="event", on_message={"posted": on_posted, "text": on_text})
    c.send("\n".join([
        '{"event": "hello"}',
        '{"event": "typing"}',
        '{"event": "posted", "text": "hi"}',
        'not json',
        '{"event": "typing"}',
        '{"event": "posted", "text": "bye"}',
    ]))
`, Env{WS: ws.Dialing{Target: eventServer(t), Timeout: 5 * time.Second}})
	if out := u.Run(u.Type().Actions[0]); out != metrics.OK {
		t.Fatalf("action: %v %s", out, rec.last(metrics.Action).Message)
	}
	rec.await(t, "the six messages read", func() bool { return rec.count("events", metrics.MessageIn) == 6 })
	for range 3 {
		next(t, u)
	}
	if m := u.NextMessage(); m != nil {
		t.Errorf("a %q message waits for a handler; only posted and text have one", m.Type())
	}
	if seen, _, _ := u.value.state.Get(starlark.String("seen")); seen == nil || seen.String() != `["posted hi", "text not json", "posted bye"]` {
		t.Errorf("the handlers saw %v, want the posted and text messages in order, each by its own handler", seen)
	}
	if n := rec.count(MessageAction, metrics.Action); n != 3 {
		t.Errorf("%d handler runs recorded, want 3 (hello and typing are counted, not handled)", n)
	}
	in := map[string]int64{}
	snap := metrics.NewSnapshot()
	for _, x := range rec.all() {
		snap.Add(&x)
	}
	for typ, f := range snap.Sockets["events"].In {
		in[typ] = f.Messages
	}
	if in["hello"] != 1 || in["typing"] != 2 || in["posted"] != 2 || in["text"] != 1 {
		t.Errorf("messages in by type %v, want every type counted whether handled or not", in)
	}
}

func TestDeliveryOutsideAUser(t *testing.T) {
	_, err := load("d.star", "x = delivery.stamp()\nactions = [action('A', lambda user: None)]\n")
	if err == nil || !strings.Contains(err.Error(), "not the top level") {
		t.Errorf("a stamp at the top level: %v, want refused", err)
	}
}
