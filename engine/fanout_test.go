package engine

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario"
	"github.com/headroom-dev/headroom/testbed"
)

// fanoutScenario: every user joins one channel and holds the testbed's WebSocket, counting the posted
// events it receives and recording each one's delivery latency; the last user added (id 6) posts ten
// stamped messages, one per action, once its own connection has said hello. The connection reconnects by itself after 50-200 ms.
const fanoutScenario = `
POSTER = 6

def init(user):
    user.http.post("/api/v4/users", json={"username": "owner", "password": "pw"})
    r = user.http.post("/api/v4/users/login", json={"login_id": "owner", "password": "pw"})
    user.http.headers["Authorization"] = "Bearer " + r.headers["token"]
    return {"ch": user.http.get("/api/v4/users/me/channels").json()[0]["id"]}

def setup(user):
    name = "u%d" % user.id
    user.http.post("/api/v4/users", json={"username": name, "password": "pw"}, expect=[201])
    r = user.http.post("/api/v4/users/login", json={"login_id": name, "password": "pw"})
    user.http.headers["Authorization"] = "Bearer " + r.headers["token"]
    user.http.post("/api/v4/channels/%s/members" % user.shared["ch"], expect=[201, 409])
    user.state["posts"] = 0
    user.ws.connect("/api/v4/websocket", on_message=on_event, type_field="event", seq_field="seq",
                    reconnect=("50ms", "200ms"))

def on_event(user, msg):
    ev = msg.json()
    if ev["event"] == "hello":  # the testbed sends it once the connection is in its hub
        user.state["hello"] = True
    if ev["event"] == "posted":
        delivery.record(ev["data"]["post"], name="posted")

def act(user):
    if user.id == POSTER and user.state.get("hello") and user.state["posts"] < 10:
        user.state["posts"] += 1
        user.http.post("/api/v4/posts", json={"channel_id": user.shared["ch"], "message": "hi " + delivery.stamp()})

actions = [action("Act", act)]
think_time = think.constant("20ms")
`

// serverMetric reads one sample of the testbed's /metrics (0 when absent).
func serverMetric(t *testing.T, base string, series string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// TestWebSocketFanOutOnTheTestbed: six users hold the testbed's WebSocket; each of one user's ten posts
// reaches every member's handler (the author's too), counted on both sides and timed as a delivery; a
// connection the server breaks is counted abnormal and reconnected by policy; users removed close theirs
// with a close frame, which the server sees.
func TestWebSocketFanOutOnTheTestbed(t *testing.T) {
	tb := testbed.New(testbed.Config{Scale: 0.01})
	srv := httptest.NewServer(tb.Handler())
	t.Cleanup(srv.Close)
	target, _ := url.Parse(srv.URL)
	sc, err := scenario.Load(context.Background(), "fanout.star", []byte(fanoutScenario), scenario.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rec := metrics.NewRecorder(2, nil, time.Now)
	e := New(Config{Scenario: sc, Target: target, Seed: 1, Grace: time.Second, Recorder: rec, Spread: -1})
	if err := e.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.SetUsers(5) // the members, connected before the poster starts
	// The server may count a connection a little after the client saw its 101: wait for its count.
	waitFor(t, "5 users set up and connected", func() bool {
		return e.Ready() == 5 && serverMetric(t, srv.URL, "testbed_websocket_connections") == 5
	})
	e.SetUsers(6) // it posts once its own connection said hello
	all := metrics.NewSnapshot()
	drain := func() *metrics.Snapshot {
		s := metrics.NewSnapshot()
		rec.Drain(s)
		all.Merge(s)
		return all
	}
	waitFor(t, "60 deliveries", func() bool {
		d := drain().Deliveries["posted"]
		return d != nil && d.Count >= 60
	})
	const name = "WS /api/v4/websocket"
	ws := all.Sockets[name]
	if d := all.Deliveries["posted"]; d.Count != 60 || d.Errors != 0 {
		t.Errorf("%d deliveries, want 60: 10 posts to 6 members", d.Count)
	}
	if in := ws.In["posted"]; in == nil || in.Messages != 60 {
		t.Errorf("posted events received %+v, want 60", in)
	}
	if got := serverMetric(t, srv.URL, `testbed_websocket_events_total{event="posted"}`); got != 60 {
		t.Errorf("the testbed queued %v posted events, want 60", got)
	}
	if ws.Opened != 6 || ws.Gaps != 0 || ws.Dropped != 0 || all.OpenSockets() != 6 {
		t.Errorf("opened %d, gaps %d, dropped %d, open %d; want 6, 0, 0, 6", ws.Opened, ws.Gaps, ws.Dropped, all.OpenSockets())
	}

	// The server breaks every connection: each is an abnormal close, and comes back by itself.
	if n := tb.DropWebSockets(); n != 6 {
		t.Fatalf("the testbed broke %d connections, want 6", n)
	}
	waitFor(t, "6 reconnected", func() bool {
		s := drain().Sockets[name]
		return s.Abnormal == 6 && s.Opened == 12 && serverMetric(t, srv.URL, "testbed_websocket_connections") == 6
	})
	if ws.Reconnects < 6 || all.OpenSockets() != 6 {
		t.Errorf("%d reconnect attempts, %d open; want at least 6, 6", ws.Reconnects, all.OpenSockets())
	}

	e.SetUsers(3) // three removed: each closes its connection with a close frame
	waitFor(t, "3 connections left", func() bool {
		return drain().OpenSockets() == 3 && serverMetric(t, srv.URL, "testbed_websocket_connections") == 3
	})
	if got := serverMetric(t, srv.URL, `testbed_websocket_closes_total{code="1000"}`); got != 3 {
		t.Errorf("the testbed saw %v close frames 1000, want 3", got)
	}
	if ws.Closed-ws.Abnormal != 3 {
		t.Errorf("%d normal closes, want the 3 removed users'", ws.Closed-ws.Abnormal)
	}
	e.Stop()
	if drain().OpenSockets() != 0 {
		t.Errorf("%d connections open after Stop", all.OpenSockets())
	}
}
