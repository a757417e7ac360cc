package testbed

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// wsDial opens the WebSocket of c's user: with the token at the upgrade, or (challenge) by the
// authentication_challenge message. It returns the connection after its hello.
func wsDial(t *testing.T, c *client, challenge bool) *websocket.Conn {
	t.Helper()
	h := http.Header{}
	if !challenge {
		h.Set("Authorization", "Bearer "+c.token)
	}
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(c.base, "http")+"/api/v4/websocket", h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	if challenge {
		if err := ws.WriteJSON(map[string]any{"seq": 1, "action": "authentication_challenge", "data": map[string]string{"token": c.token}}); err != nil {
			t.Fatal(err)
		}
		if r := wsNext(t, ws); r["status"] != "OK" || r["seq_reply"] != 1.0 {
			t.Fatalf("challenge answered %v, want status OK, seq_reply 1", r)
		}
	}
	if ev := wsNext(t, ws); ev["event"] != "hello" || ev["seq"] != 0.0 {
		t.Fatalf("first event %v, want hello with seq 0", ev)
	}
	return ws
}

// wsNext reads the next message, within 5 s.
func wsNext(t *testing.T, ws *websocket.Conn) map[string]any {
	t.Helper()
	ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	var m map[string]any
	if err := ws.ReadJSON(&m); err != nil {
		t.Fatalf("read: %v", err)
	}
	return m
}

// wsPing sends a ping action and returns every event that arrived before its reply: what the server had
// queued for this connection until then.
func wsPing(t *testing.T, ws *websocket.Conn, seq int) []map[string]any {
	t.Helper()
	if err := ws.WriteJSON(map[string]any{"seq": seq, "action": "ping"}); err != nil {
		t.Fatal(err)
	}
	var before []map[string]any
	for {
		m := wsNext(t, ws)
		if m["seq_reply"] == float64(seq) {
			return before
		}
		before = append(before, m)
	}
}

func TestWebSocketEventsReachChannelMembers(t *testing.T) {
	s, c := fast(t)
	_, alice := c.signup("alice")
	bobID, bob := c.signup("bob")
	_, carol := c.signup("carol")
	// A channel of alice's that carol is not in; bob joins it.
	var chans, carolChans []channel
	alice.do("GET", "/api/v4/users/me/channels", nil, &chans)
	carol.do("GET", "/api/v4/users/me/channels", nil, &carolChans)
	ch := ""
	for _, a := range chans {
		if !slices.ContainsFunc(carolChans, func(c channel) bool { return c.ID == a.ID }) {
			ch = a.ID
			break
		}
	}
	if ch == "" {
		t.Fatalf("carol is in every channel of alice's (%d): the test needs one she is not in", len(chans))
	}
	bob.want(http.StatusCreated, first(bob.do("POST", "/api/v4/channels/"+ch+"/members", nil, nil)), "JoinChannel")

	wsA := wsDial(t, alice, false)
	wsB := wsDial(t, bob, true)
	wsC := wsDial(t, carol, false)

	var p post
	alice.want(http.StatusCreated, first(alice.do("POST", "/api/v4/posts", map[string]string{"channel_id": ch, "message": "hello"}, &p)), "CreatePost")
	for name, ws := range map[string]*websocket.Conn{"alice": wsA, "bob": wsB} {
		ev := wsNext(t, ws)
		var got post
		data, _ := ev["data"].(map[string]any)
		if ev["event"] != "posted" || ev["seq"] != 1.0 || json.Unmarshal([]byte(data["post"].(string)), &got) != nil || got.ID != p.ID {
			t.Errorf("%s got %v, want posted (seq 1) of post %s", name, ev, p.ID)
		}
	}
	if evs := wsPing(t, wsC, 2); len(evs) != 0 {
		t.Errorf("carol, not a member, got %v", evs)
	}

	// typing goes to the other members, not the typist.
	if err := wsB.WriteJSON(map[string]any{"seq": 2, "action": "user_typing", "data": map[string]string{"channel_id": ch}}); err != nil {
		t.Fatal(err)
	}
	if r := wsNext(t, wsB); r["status"] != "OK" || r["seq_reply"] != 2.0 {
		t.Errorf("user_typing answered %v", r)
	}
	if ev := wsNext(t, wsA); ev["event"] != "typing" || ev["seq"] != 2.0 || ev["data"].(map[string]any)["user_id"] != bobID {
		t.Errorf("alice got %v, want bob's typing (seq 2)", ev)
	}
	// a reaction to the post, and a view (to the viewer's own connections only).
	bob.want(http.StatusCreated, first(bob.do("POST", "/api/v4/reactions", map[string]string{"post_id": p.ID, "emoji_name": "tada"}, nil)), "SaveReaction")
	bob.want(http.StatusOK, first(bob.do("POST", "/api/v4/channels/members/me/view", map[string]string{"channel_id": ch}, nil)), "ViewChannel")
	if evs := wsPing(t, wsA, 3); len(evs) != 1 || evs[0]["event"] != "reaction_added" {
		t.Errorf("alice got %v, want reaction_added only", evs)
	}
	if evs := wsPing(t, wsB, 4); len(evs) != 2 || evs[0]["event"] != "reaction_added" || evs[1]["event"] != "channel_viewed" {
		t.Errorf("bob got %v, want reaction_added then channel_viewed", evs)
	}

	if n := s.hub.open.Load(); n != 3 {
		t.Errorf("%d connections open, want 3", n)
	}
	// carol closes: the server answers with a close frame, her connection already gone from its count.
	wsC.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"))
	wsC.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := wsC.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Errorf("carol's close answered %v, want a normal close frame", err)
	}
	resp, err := c.hc.Get(c.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`testbed_websocket_connections 2`,
		`testbed_websocket_events_total{event="posted"} 2`,
		`testbed_websocket_events_total{event="typing"} 1`,
		`testbed_websocket_events_total{event="reaction_added"} 2`,
		`testbed_websocket_events_total{event="channel_viewed"} 1`,
		`testbed_websocket_events_dropped_total 0`,
	} {
		if !strings.Contains(string(text), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestWebSocketRefusesWithoutSession(t *testing.T) {
	_, c := fast(t)
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(c.base, "http")+"/api/v4/websocket", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.WriteJSON(map[string]any{"seq": 1, "action": "authentication_challenge", "data": map[string]string{"token": "not-a-session"}})
	if r := wsNext(t, ws); r["status"] != "FAIL" || r["seq_reply"] != 1.0 {
		t.Errorf("a bad token answered %v, want status FAIL", r)
	}
	ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err = ws.ReadMessage()
	if !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
		t.Errorf("after the refusal: %v, want a close frame 1008 (policy violation)", err)
	}
}
