package engine

import (
	"context"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario"
	"github.com/headroom-dev/headroom/testbed"
)

// wsScenario: each user joins one shared channel, holds the testbed's WebSocket and counts the posted
// events it receives; its only action posts and stays in the action 30 ms, so events arrive while it
// acts. A handler that runs during an action fails.
const wsScenario = `
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
    user.state.update({"acting": False, "posted": 0})
    user.ws.connect("/api/v4/websocket", on_message=on_event)

def on_event(user, msg):
    if user.state["acting"]:
        fail("the handler ran during an action")
    if msg.json()["event"] == "posted":
        user.state["posted"] += 1

def post(user):
    user.state["acting"] = True
    user.http.post("/api/v4/posts", json={"channel_id": user.shared["ch"], "message": "hi"})
    sleep("30ms")
    user.state["acting"] = False

actions = [action("Post", post)]
think_time = think.constant("50ms")
`

// TestWebSocketHandlersRunBetweenActions: three users hold the testbed's WebSocket; each post reaches
// every member's handler, which runs on the user's goroutine between its actions, never during one.
func TestWebSocketHandlersRunBetweenActions(t *testing.T) {
	srv := httptest.NewServer(testbed.New(testbed.Config{Scale: 0.01}).Handler())
	t.Cleanup(srv.Close)
	target, _ := url.Parse(srv.URL)
	sc, err := scenario.Load(context.Background(), "ws.star", []byte(wsScenario), scenario.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rec := metrics.NewRecorder(2, nil, time.Now)
	e := New(Config{Scenario: sc, Target: target, Seed: 1, Grace: time.Second, Recorder: rec, Spread: -1})
	if err := e.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.SetUsers(3)
	snap := metrics.NewSnapshot()
	waitFor(t, "60 handled messages", func() bool {
		rec.Drain(snap)
		st := snap.Actions[scenario.MessageAction]
		return st != nil && st.Count >= 60
	})
	e.Stop()
	rec.Drain(snap)
	msgs, posts := snap.Actions[scenario.MessageAction], snap.Actions["Post"]
	if msgs.Errors != 0 {
		t.Errorf("%d of %d handler runs failed (a handler during an action?): %v", msgs.Errors, msgs.Count, msgs.Messages)
	}
	if posts == nil || posts.Errors != 0 {
		t.Fatalf("posts: %+v", posts)
	}
	// Each post reaches the 3 members (the author too): at most 3 events a post, hello aside.
	if max := 3*posts.Count + 3; msgs.Count > max {
		t.Errorf("%d messages handled for %d posts: more than 3 a post and the hellos (%d)", msgs.Count, posts.Count, max)
	}
	if hs := snap.Setup.Requests["WS /api/v4/websocket"]; hs == nil || hs.Count != 3 || hs.Status[101] != 3 {
		t.Errorf("handshakes in setup: %+v, want 3 answered 101", hs)
	}
}
