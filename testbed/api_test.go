package testbed

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// client talks to a testbed over real HTTP on 127.0.0.1.
type client struct {
	t     testing.TB
	base  string
	hc    *http.Client
	token string
}

// startServer runs s on an httptest server (127.0.0.1) until the test ends.
func startServer(t testing.TB, s *Server) *client {
	t.Helper()
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	hc := ts.Client()
	hc.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	return &client{t: t, base: ts.URL, hc: hc}
}

// fast returns a testbed whose service times are a hundredth of the model's (Login takes 0.2 ms).
func fast(t *testing.T) (*Server, *client) {
	s := New(Config{Scale: 0.01})
	return s, startServer(t, s)
}

// as returns a copy of c that sends token as a Bearer token.
func (c *client) as(token string) *client {
	d := *c
	d.token = token
	return &d
}

// do sends body (raw if it is a string, else JSON) and returns the status, headers and response body;
// out, if not nil, receives the JSON body.
func (c *client) do(method, path string, body, out any) (int, http.Header) {
	c.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		r = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	if ct := resp.Header.Get("Content-Type"); path != "/metrics" && ct != "application/json" {
		c.t.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			c.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode, resp.Header
}

// want fails the test if got is not code.
func (c *client) want(code, got int, what string) {
	c.t.Helper()
	if got != code {
		c.t.Fatalf("%s: status %d, want %d", what, got, code)
	}
}

// signup creates a user and logs it in, returning its id and a client sending its token.
func (c *client) signup(name string) (string, *client) {
	c.t.Helper()
	var u user
	code, _ := c.do("POST", "/api/v4/users", map[string]string{"username": name, "password": "pw-" + name}, &u)
	c.want(http.StatusCreated, code, "CreateUser "+name)
	code, h := c.do("POST", "/api/v4/users/login", map[string]string{"login_id": name, "password": "pw-" + name}, nil)
	c.want(http.StatusOK, code, "Login "+name)
	return u.ID, c.as(h.Get("Token"))
}

func TestSignupAndLogin(t *testing.T) {
	_, c := fast(t)
	var u user
	code, _ := c.do("POST", "/api/v4/users", map[string]string{"username": "Alice", "password": "secret"}, &u)
	c.want(http.StatusCreated, code, "CreateUser")
	if u.Username != "alice" || len(u.ID) != idLen {
		t.Fatalf("created %+v, want username alice and a %d-character id", u, idLen)
	}
	code, _ = c.do("POST", "/api/v4/users", map[string]string{"username": "alice", "password": "x"}, nil)
	c.want(http.StatusConflict, code, "CreateUser twice")
	code, _ = c.do("POST", "/api/v4/users/login", map[string]string{"login_id": "alice", "password": "wrong"}, nil)
	c.want(http.StatusUnauthorized, code, "Login with a bad password")

	req, _ := http.NewRequest("POST", c.base+"/api/v4/users/login", strings.NewReader(`{"login_id":"alice","password":"secret"}`))
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	c.want(http.StatusOK, resp.StatusCode, "Login")
	tok := resp.Header.Get("Token")
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "MMAUTHTOKEN" {
			cookie = ck
		}
	}
	if tok == "" || cookie == nil || cookie.Value != tok {
		t.Fatalf("Login: Token header %q, MMAUTHTOKEN cookie %v: want both, equal", tok, cookie)
	}

	var me user
	code, _ = c.as(tok).do("GET", "/api/v4/users/me", nil, &me)
	c.want(http.StatusOK, code, "GetMe with a bearer token")
	if me != u {
		t.Fatalf("GetMe = %+v, want %+v", me, u)
	}
	req, _ = http.NewRequest("GET", c.base+"/api/v4/users/me", nil)
	req.AddCookie(&http.Cookie{Name: "MMAUTHTOKEN", Value: tok})
	resp, err = c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	c.want(http.StatusOK, resp.StatusCode, "GetMe with the cookie")

	var chans []channel
	code, _ = c.as(tok).do("GET", "/api/v4/users/me/channels", nil, &chans)
	c.want(http.StatusOK, code, "GetMyChannels")
	if len(chans) != channelsPerNewUser {
		t.Fatalf("a new user is in %d channels, want %d", len(chans), channelsPerNewUser)
	}
	for _, ch := range chans {
		if ch.Type != channelTypeOpen {
			t.Errorf("channel %s has type %q, want %q", ch.Name, ch.Type, channelTypeOpen)
		}
	}
}

func TestPostsThreadsAndReactions(t *testing.T) {
	_, c := fast(t)
	aliceID, alice := c.signup("alice")
	bobID, bob := c.signup("bob")
	var chans []channel
	alice.do("GET", "/api/v4/users/me/channels", nil, &chans)
	ch := chans[0].ID
	bob.want(http.StatusCreated, first(bob.do("POST", "/api/v4/channels/"+ch+"/members", nil, nil)), "JoinChannel")

	var seeded postList
	code, _ := alice.do("GET", "/api/v4/channels/"+ch+"/posts?per_page=10", nil, &seeded)
	c.want(http.StatusOK, code, "GetChannelPosts")
	if len(seeded.Order) != 10 || len(seeded.Posts) != 10 {
		t.Fatalf("per_page=10 gave %d ids and %d posts", len(seeded.Order), len(seeded.Posts))
	}

	var root post
	code, _ = alice.do("POST", "/api/v4/posts", map[string]string{"channel_id": ch, "message": "hello headroom"}, &root)
	c.want(http.StatusCreated, code, "CreatePost")
	if root.UserID != aliceID || root.ChannelID != ch || root.Message != "hello headroom" || root.CreateAt == 0 {
		t.Fatalf("CreatePost returned %+v", root)
	}
	var reply post
	code, _ = bob.do("POST", "/api/v4/posts", map[string]string{"channel_id": ch, "message": "hi", "root_id": root.ID}, &reply)
	c.want(http.StatusCreated, code, "CreatePost reply")

	var page postList
	alice.do("GET", "/api/v4/channels/"+ch+"/posts?page=0&per_page=2", nil, &page)
	if len(page.Order) != 2 || page.Order[0] != reply.ID || page.Order[1] != root.ID {
		t.Fatalf("newest posts are %v, want [%s %s]", page.Order, reply.ID, root.ID)
	}
	var next postList
	alice.do("GET", "/api/v4/channels/"+ch+"/posts?page=1&per_page=2", nil, &next)
	if len(next.Order) != 2 || next.Order[0] != seeded.Order[0] {
		t.Fatalf("page 1 starts with %v, want the newest seeded post %s", next.Order, seeded.Order[0])
	}

	var th postList
	code, _ = alice.do("GET", "/api/v4/posts/"+reply.ID+"/thread", nil, &th)
	c.want(http.StatusOK, code, "GetPostThread")
	if strings.Join(th.Order, ",") != root.ID+","+reply.ID {
		t.Fatalf("thread order %v, want [%s %s]", th.Order, root.ID, reply.ID)
	}

	var threads struct{ Threads []threadInfo }
	code, _ = alice.do("GET", "/api/v4/users/me/threads", nil, &threads)
	c.want(http.StatusOK, code, "GetThreads")
	if len(threads.Threads) != 1 || threads.Threads[0].ID != root.ID || threads.Threads[0].ReplyCount != 1 {
		t.Fatalf("alice's threads: %+v", threads.Threads)
	}
	if got := strings.Join(threads.Threads[0].Participants, ","); got != strings.Join(sorted(aliceID, bobID), ",") {
		t.Errorf("participants %s, want alice and bob", got)
	}
	c.want(http.StatusOK, first(alice.do("PUT", "/api/v4/users/me/threads/"+root.ID+"/read", nil, nil)), "UpdateThreadRead")
	alice.do("GET", "/api/v4/users/me/threads", nil, &threads)
	if threads.Threads[0].UnreadReplies != 0 {
		t.Errorf("after UpdateThreadRead, %d unread replies, want 0", threads.Threads[0].UnreadReplies)
	}

	var r reaction
	code, _ = bob.do("POST", "/api/v4/reactions", map[string]string{"post_id": root.ID, "emoji_name": "+1"}, &r)
	c.want(http.StatusCreated, code, "SaveReaction")
	alice.do("GET", "/api/v4/posts/"+root.ID+"/thread", nil, &th)
	if rs := th.Posts[root.ID].Metadata.Reactions; len(rs) != 1 || rs[0].UserID != bobID || rs[0].EmojiName != "+1" {
		t.Fatalf("reactions on the root: %+v", rs)
	}

	var unread struct {
		ChannelID string `json:"channel_id"`
		MsgCount  int64  `json:"msg_count"`
	}
	alice.do("GET", "/api/v4/users/me/channels/"+ch+"/unread", nil, &unread)
	if unread.MsgCount != 2 {
		t.Errorf("alice has %d unread, want 2 (her post and bob's reply)", unread.MsgCount)
	}
	c.want(http.StatusOK, first(alice.do("POST", "/api/v4/channels/members/me/view", map[string]string{"channel_id": ch}, nil)), "ViewChannel")
	alice.do("GET", "/api/v4/users/me/channels/"+ch+"/unread", nil, &unread)
	if unread.MsgCount != 0 || unread.ChannelID != ch {
		t.Errorf("after ViewChannel: %+v, want 0 unread in %s", unread, ch)
	}

	c.want(http.StatusForbidden, first(bob.do("PUT", "/api/v4/posts/"+root.ID+"/patch", map[string]string{"message": "mine"}, nil)), "PatchPost by another user")
	var patched post
	code, _ = alice.do("PUT", "/api/v4/posts/"+root.ID+"/patch", map[string]string{"message": "hello again"}, &patched)
	c.want(http.StatusOK, code, "PatchPost")
	if patched.Message != "hello again" {
		t.Errorf("patched message %q", patched.Message)
	}

	var found postList
	alice.do("POST", "/api/v4/posts/search", map[string]string{"terms": "HELLO AGAIN"}, &found)
	if len(found.Order) != 1 || found.Order[0] != root.ID {
		t.Errorf("search found %v, want [%s]", found.Order, root.ID)
	}
	var users []user
	alice.do("POST", "/api/v4/users/search", map[string]string{"term": "bo"}, &users)
	if len(users) != 1 || users[0].ID != bobID {
		t.Errorf("user search found %+v, want bob", users)
	}

	c.want(http.StatusOK, first(alice.do("DELETE", "/api/v4/posts/"+root.ID, nil, nil)), "DeletePost")
	c.want(http.StatusNotFound, first(alice.do("GET", "/api/v4/posts/"+reply.ID+"/thread", nil, nil)), "thread of a deleted root")
	alice.do("GET", "/api/v4/users/me/threads", nil, &threads)
	if len(threads.Threads) != 0 {
		t.Errorf("threads after deleting the root: %+v", threads.Threads)
	}
}

func TestDirectChannel(t *testing.T) {
	_, c := fast(t)
	aliceID, alice := c.signup("alice")
	bobID, bob := c.signup("bob")
	var ch, again channel
	code, _ := alice.do("POST", "/api/v4/channels/direct", []string{aliceID, bobID}, &ch)
	c.want(http.StatusCreated, code, "CreateDirectChannel")
	code, _ = bob.do("POST", "/api/v4/channels/direct", []string{bobID, aliceID}, &again)
	c.want(http.StatusOK, code, "CreateDirectChannel again")
	if ch.ID != again.ID || ch.Type != channelTypeDirect {
		t.Fatalf("direct channels %+v and %+v, want the same one, type D", ch, again)
	}
	code, _ = bob.do("POST", "/api/v4/posts", map[string]string{"channel_id": ch.ID, "message": "dm"}, nil)
	c.want(http.StatusCreated, code, "CreatePost in a direct channel")
	_, carol := c.signup("carol")
	c.want(http.StatusForbidden, first(carol.do("GET", "/api/v4/channels/"+ch.ID+"/posts", nil, nil)), "reading someone else's DM")
	c.want(http.StatusForbidden, first(carol.do("POST", "/api/v4/channels/"+ch.ID+"/members", nil, nil)), "joining a DM")
}

func TestErrors(t *testing.T) {
	s, c := fast(t)
	for name, r := range s.routes {
		if !r.auth {
			continue
		}
		path := strings.NewReplacer("{id}", "x", "{post_id}", "x").Replace(r.path)
		var e map[string]string
		code, _ := c.do(r.method, path, "{}", &e)
		if code != http.StatusUnauthorized || e["error"] == "" {
			t.Errorf("%s without a token: %d %v, want 401 with an error", name, code, e)
		}
	}
	_, alice := c.signup("alice")
	var e map[string]string
	code, _ := alice.do("POST", "/api/v4/posts", `{"channel_id":`, &e)
	if code != http.StatusBadRequest || !strings.Contains(e["error"], "invalid JSON") {
		t.Errorf("bad JSON: %d %v, want 400 saying invalid JSON", code, e)
	}
	code, _ = c.do("POST", "/api/v4/users", `not json`, &e)
	c.want(http.StatusBadRequest, code, "CreateUser with bad JSON")
	code, _ = alice.do("GET", "/api/v4/nothing/here", nil, &e)
	if code != http.StatusNotFound || e["error"] == "" {
		t.Errorf("unknown route: %d %v, want 404 JSON", code, e)
	}
	c.want(http.StatusNotFound, first(alice.do("GET", "/api/v4/posts/nope/thread", nil, nil)), "thread of a missing post")
	c.want(http.StatusBadRequest, first(alice.do("GET", "/api/v4/channels/x/posts?page=-1", nil, nil)), "negative page")
	c.want(http.StatusBadRequest, first(alice.do("POST", "/api/v4/channels/direct", `["a"]`, nil)), "direct channel of one")
	c.want(http.StatusOK, first(c.do("GET", "/healthz", nil, nil)), "healthz")
}

func TestSeedDeterminesContent(t *testing.T) {
	ids := func(seed int64) string {
		st := New(Config{Seed: seed, Channels: 3}).store
		var b strings.Builder
		for _, ch := range st.channels {
			b.WriteString(ch.ID + ch.posts[0].ID + ch.posts[0].Message)
		}
		return b.String()
	}
	if ids(7) != ids(7) {
		t.Error("two stores with seed 7 differ")
	}
	if ids(7) == ids(8) {
		t.Error("stores with seeds 7 and 8 are the same")
	}
}

func TestChannelKeepsNewestPosts(t *testing.T) {
	st := New(Config{Channels: 1}).store
	bot := st.channels[0].posts[0].UserID
	ch := st.channels[0].ID
	for range maxPostsPerChannel + 50 {
		if _, err := st.createPost(bot, ch, "", "x"); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(st.channels[0].posts); n != maxPostsPerChannel {
		t.Errorf("channel holds %d posts, want %d", n, maxPostsPerChannel)
	}
	if n := len(st.posts); n != maxPostsPerChannel {
		t.Errorf("store indexes %d posts, want %d", n, maxPostsPerChannel)
	}
	if n := len(st.threads); n != 0 {
		t.Errorf("%d threads left after their posts were dropped", n)
	}
}

func first(code int, _ http.Header) int { return code }

func sorted(a, b string) []string {
	if a > b {
		return []string{b, a}
	}
	return []string{a, b}
}
