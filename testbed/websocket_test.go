package testbed

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
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

// TestWebSocketCostsInVirtualTime checks the WebSocket costs of the capacity model exactly, with
// synctest's clock and connections registered without sockets: a post reaching 3 connections holds its
// worker 3 event costs longer; once a second the connections' upkeep holds a worker; a typing event,
// from a WebSocket action, takes a worker of its own.
func TestWebSocketCostsInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const eventCost, connCost = time.Millisecond, 10 * time.Millisecond
		s := New(Config{Workers: 1, EventCost: eventCost, ConnCost: connCost})
		h := s.Handler()
		tok := loginInBubble(t, h)
		alice := s.store.session(tok)
		ch := s.store.myChannels(alice)[0].ID
		users := []string{alice}
		for _, name := range []string{"bob", "carol"} {
			u, err := s.store.createUser(name, "pw")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.store.joinChannel(u.ID, ch); err != nil && !errors.Is(err, errConflict) {
				t.Fatal(err)
			}
			users = append(users, u.ID)
		}
		var conns []*wsConn
		for _, u := range users {
			c := &wsConn{userID: u, out: make(chan any, 16)}
			if quit := s.hub.add(c); quit != nil {
				go s.connWork(quit)
			}
			conns = append(conns, c)
		}
		added := time.Now()
		defer func() {
			for _, c := range conns {
				s.hub.remove(c) // the last one ends connWork
			}
		}()

		start := time.Now()
		req := httptest.NewRequest("POST", "/api/v4/posts", strings.NewReader(`{"channel_id":"`+ch+`","message":"hi"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		if rec := serveTo(h, req); rec.Code != http.StatusCreated {
			t.Fatalf("CreatePost: %d %s", rec.Code, rec.Body)
		}
		if got, want := time.Since(start), s.ServiceTime("CreatePost")+3*eventCost; got != want {
			t.Errorf("CreatePost reaching 3 connections took %v, want its service time and 3 event costs, %v", got, want)
		}
		for i, c := range conns {
			if len(c.out) != 1 {
				t.Errorf("connection %d holds %d events, want the post", i, len(c.out))
			}
		}

		// At 1 s the upkeep of 3 connections holds the only worker for 30 ms: GetMe at 1.001 s waits.
		time.Sleep(time.Until(added.Add(time.Second + time.Millisecond)))
		start = time.Now()
		if rec := serveTo(h, getMe(tok)); rec.Code != http.StatusOK {
			t.Fatalf("GetMe: %d", rec.Code)
		}
		if got, want := time.Since(start), 3*connCost-time.Millisecond+s.ServiceTime("GetMe"); got != want {
			t.Errorf("GetMe during the upkeep took %v, want %v", got, want)
		}

		// bob types: 2 events (to alice and carol) on a worker of their own.
		start = time.Now()
		if r := s.act(users[1], wsAction{Seq: 1, Action: "user_typing", Data: json.RawMessage(`{"channel_id":"` + ch + `"}`)}); r.Status != "OK" {
			t.Fatalf("user_typing: %+v", r)
		}
		if got := time.Since(start); got != 2*eventCost {
			t.Errorf("2 typing events took %v of a worker, want %v", got, 2*eventCost)
		}
	})
}

// TestTypingWhileDirectChannelsAreMade types over WebSocket in one goroutine while another creates
// direct channels: the typing check reads the store's channels under its lock. It read them without,
// which the race detector finds here, and which a testbed on 8 cores found as a crash ("concurrent map
// read and map write") with 9,000 chat users (bench/many-cores.sh).
func TestTypingWhileDirectChannelsAreMade(t *testing.T) {
	s := New(Config{Scale: 0.001, EventCost: -1})
	alice, err := s.store.createUser("alice", "pw")
	if err != nil {
		t.Fatal(err)
	}
	ch := s.store.myChannels(alice.ID)[0].ID
	others := make([]string, 100)
	for i := range others {
		u, err := s.store.createUser(fmt.Sprintf("u%d", i), "pw")
		if err != nil {
			t.Fatal(err)
		}
		others[i] = u.ID
	}
	done := make(chan error, 1)
	go func() {
		for _, id := range others {
			if _, created, err := s.store.directChannel(alice.ID, alice.ID, id); err != nil || !created {
				done <- fmt.Errorf("direct channel with %s: created %v, %v", id, created, err)
				return
			}
		}
		done <- nil
	}()
	for range len(others) {
		if r := s.act(alice.ID, wsAction{Seq: 1, Action: "user_typing", Data: json.RawMessage(`{"channel_id":"` + ch + `"}`)}); r.Status != "OK" {
			t.Fatalf("user_typing: %+v", r)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
