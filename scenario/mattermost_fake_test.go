package scenario

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// fakeMattermost answers the Mattermost API v4 calls examples/mattermost.star
// makes, in the shapes a real Mattermost 11 answers them (measured against
// one by scripts/mattermost-e2e.sh), from a small in-memory store: enough
// to run every helper of the script's and check each call it makes, in
// the test command. It is no model of the server's costs: the testbed is
// that, in its own dialect.
type fakeMattermost struct {
	mu       sync.Mutex
	n        int                          // ids made
	users    map[string]string            // username -> id
	tokens   map[string]string            // token -> user id
	channels map[string]*fakeChannel      // id -> channel
	posts    map[string]map[string]any    // id -> post
	conns    map[string][]*websocket.Conn // user id -> its WebSockets
	hits     map[string]int               // route pattern -> requests
	wrong    []string                     // requests the real server would refuse
}

type fakeChannel struct {
	ID, Name, Type string
	Members        map[string]bool
	Posts          []string // oldest first
}

const fakeTeam = "team0000000000000000000000"

func newFakeMattermost(t *testing.T) (*fakeMattermost, *url.URL) {
	m := &fakeMattermost{users: map[string]string{}, tokens: map[string]string{}, channels: map[string]*fakeChannel{},
		posts: map[string]map[string]any{}, conns: map[string][]*websocket.Conn{}, hits: map[string]int{}}
	mux := http.NewServeMux()
	for pattern, h := range m.routes() {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.hits[pattern]++
			me := m.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
			if me == "" && pattern != "POST /api/v4/users" && pattern != "POST /api/v4/users/login" {
				m.wrong = append(m.wrong, pattern+": no session")
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			var body any
			if r.Body != nil {
				json.NewDecoder(r.Body).Decode(&body)
			}
			status, reply := h(r, me, body)
			w.Header().Set("Content-Type", "application/json")
			if t, ok := reply.(token); ok {
				w.Header().Set("Token", t.token)
				reply = t.user
			}
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(reply)
		})
	}
	mux.HandleFunc("GET /api/v4/websocket", m.websocket)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.wrong = append(m.wrong, "no such route: "+r.Method+" "+r.URL.Path)
		m.mu.Unlock()
		http.NotFound(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return m, u
}

type token struct {
	token string
	user  any
}

type handler func(r *http.Request, me string, body any) (int, any)

func (m *fakeMattermost) id(kind string) string {
	m.n++
	return fmt.Sprintf("%s%0*d", kind, 26-len(kind), m.n)
}

func (m *fakeMattermost) post(id string) (int, any) {
	if p, ok := m.posts[id]; ok {
		return 200, p
	}
	return 404, map[string]any{"message": "not found"}
}

// list is a post list, newest first, as the server answers one.
func (m *fakeMattermost) list(ids []string) map[string]any {
	order, posts := []string{}, map[string]any{}
	for _, id := range slices.Backward(ids) {
		order, posts[id] = append(order, id), m.posts[id]
	}
	return map[string]any{"order": order, "posts": posts}
}

func (m *fakeMattermost) channelJSON(c *fakeChannel) map[string]any {
	return map[string]any{"id": c.ID, "team_id": fakeTeam, "name": c.Name, "type": c.Type, "delete_at": 0, "total_msg_count": len(c.Posts)}
}

func (m *fakeMattermost) routes() map[string]handler {
	field := func(body any, k string) string { s, _ := body.(map[string]any)[k].(string); return s }
	okJSON := func(v any) handler { return func(*http.Request, string, any) (int, any) { return 200, v } }
	channel := func(r *http.Request) *fakeChannel { return m.channels[r.PathValue("cid")] }
	return map[string]handler{
		"POST /api/v4/users": func(_ *http.Request, _ string, b any) (int, any) {
			name := field(b, "username")
			if field(b, "email") == "" {
				return 400, map[string]any{"message": "Invalid email."}
			}
			if m.users[name] != "" {
				return 400, map[string]any{"message": "An account with that username already exists."}
			}
			m.users[name] = m.id("u")
			return 201, map[string]any{"id": m.users[name], "username": name}
		},
		"POST /api/v4/users/login": func(_ *http.Request, _ string, b any) (int, any) {
			id := m.users[field(b, "login_id")]
			if id == "" || field(b, "password") == "" {
				return 401, map[string]any{"message": "Enter a valid email or username and/or password."}
			}
			tok := m.id("t")
			m.tokens[tok] = id
			return 200, token{tok, map[string]any{"id": id}}
		},
		"GET /api/v4/users/me":               func(_ *http.Request, me string, _ any) (int, any) { return 200, map[string]any{"id": me} },
		"POST /api/v4/teams/{tid}/members":   func(*http.Request, string, any) (int, any) { return 201, map[string]any{} },
		"GET /api/v4/users":                  okJSON([]any{}),
		"GET /api/v4/users/me/preferences":   okJSON([]any{}),
		"GET /api/v4/users/me/teams":         okJSON([]any{map[string]any{"id": fakeTeam}}),
		"GET /api/v4/users/me/teams/members": okJSON([]any{}),
		"GET /api/v4/users/me/teams/unread":  okJSON([]any{}),
		"GET /api/v4/users/me/teams/{tid}/channels": func(_ *http.Request, me string, _ any) (int, any) {
			out := []any{}
			for _, c := range m.channels {
				if c.Members[me] {
					out = append(out, m.channelJSON(c))
				}
			}
			return 200, out
		},
		"GET /api/v4/users/me/teams/{tid}/channels/members": okJSON([]any{}),
		"GET /api/v4/users/{uid}/teams/{tid}/threads": func(r *http.Request, _ string, _ any) (int, any) {
			threads := []any{}
			for id, p := range m.posts {
				if p["root_id"] == "" && len(threads) < 3 && r.URL.Query().Get("before") == "" {
					threads = append(threads, map[string]any{"id": id})
				}
			}
			return 200, map[string]any{"threads": threads, "total": len(threads)}
		},
		"PUT /api/v4/users/{uid}/teams/{tid}/threads/{pid}/read/{ts}": func(r *http.Request, _ string, _ any) (int, any) {
			return m.post(r.PathValue("pid"))
		},
		"DELETE /api/v4/users/{uid}/teams/{tid}/threads/{pid}/following": func(r *http.Request, _ string, _ any) (int, any) {
			return m.post(r.PathValue("pid"))
		},
		"GET /api/v4/users/{uid}/teams/{tid}/channels/categories": func(_ *http.Request, me string, _ any) (int, any) {
			ids := []string{}
			for _, c := range m.channels {
				if c.Members[me] {
					ids = append(ids, c.ID)
				}
			}
			return 200, map[string]any{"categories": []any{map[string]any{"id": "channels_" + me, "channel_ids": ids}}}
		},
		"PUT /api/v4/users/{uid}/teams/{tid}/channels/categories/{cat}": func(_ *http.Request, _ string, b any) (int, any) { return 200, b },
		"POST /api/v4/users/status/ids":                                 okJSON([]any{}),
		"POST /api/v4/users/ids":                                        okJSON([]any{}),
		"POST /api/v4/users/search":                                     okJSON([]any{}),
		"GET /api/v4/users/username/{name}": func(r *http.Request, _ string, _ any) (int, any) {
			if id := m.users[r.PathValue("name")]; id != "" {
				return 200, map[string]any{"id": id}
			}
			return 404, map[string]any{"message": "not found"}
		},
		"GET /api/v4/teams/{tid}/channels/name/{name}": func(r *http.Request, _ string, _ any) (int, any) {
			for _, c := range m.channels {
				if c.Name == r.PathValue("name") {
					return 200, m.channelJSON(c)
				}
			}
			return 404, map[string]any{"message": "not found"}
		},
		// a team by name, or a team's channels (one pattern: Go's mux would not tell them apart)
		"GET /api/v4/teams/{tid}/{what}": func(r *http.Request, _ string, _ any) (int, any) {
			if r.PathValue("tid") == "name" {
				if r.PathValue("what") != "headroom" {
					return 404, map[string]any{"message": "not found"}
				}
				return 200, map[string]any{"id": fakeTeam}
			}
			out := []any{}
			for _, c := range m.channels {
				if c.Type == "O" {
					out = append(out, m.channelJSON(c))
				}
			}
			return 200, out
		},
		"POST /api/v4/channels": func(_ *http.Request, me string, b any) (int, any) {
			for _, c := range m.channels {
				if c.Name == field(b, "name") {
					return 400, map[string]any{"message": "A channel with that name already exists on the same team."}
				}
			}
			c := &fakeChannel{ID: m.id("c"), Name: field(b, "name"), Type: "O", Members: map[string]bool{me: true}}
			m.channels[c.ID] = c
			return 201, m.channelJSON(c)
		},
		"POST /api/v4/channels/direct": func(_ *http.Request, _ string, b any) (int, any) {
			ids, _ := b.([]any)
			if len(ids) != 2 {
				return 400, map[string]any{"message": "two users"}
			}
			name := fmt.Sprint(ids[0], "__", ids[1])
			for _, c := range m.channels {
				if c.Name == name {
					return 200, m.channelJSON(c)
				}
			}
			c := &fakeChannel{ID: m.id("d"), Name: name, Type: "D", Members: map[string]bool{ids[0].(string): true, ids[1].(string): true}}
			m.channels[c.ID] = c
			return 201, m.channelJSON(c)
		},
		"GET /api/v4/channels/{cid}": func(r *http.Request, _ string, _ any) (int, any) {
			if c := channel(r); c != nil {
				return 200, m.channelJSON(c)
			}
			return 404, map[string]any{"message": "not found"}
		},
		"POST /api/v4/channels/{cid}/members": func(r *http.Request, _ string, b any) (int, any) {
			c := channel(r)
			if c == nil {
				return 404, map[string]any{"message": "not found"}
			}
			c.Members[field(b, "user_id")] = true
			return 201, map[string]any{"channel_id": c.ID}
		},
		"GET /api/v4/channels/{cid}/posts": func(r *http.Request, _ string, _ any) (int, any) {
			c := channel(r)
			if c == nil {
				return 404, map[string]any{"message": "not found"}
			}
			return 200, m.list(c.Posts)
		},
		"GET /api/v4/users/{uid}/channels/{cid}/posts/unread": func(r *http.Request, _ string, _ any) (int, any) {
			if c := channel(r); c != nil {
				return 200, m.list(c.Posts)
			}
			return 404, map[string]any{"message": "not found"}
		},
		"GET /api/v4/channels/{cid}/stats":         okJSON(map[string]any{"member_count": 2}),
		"POST /api/v4/channels/members/me/view":    okJSON(map[string]any{"status": "OK"}),
		"POST /api/v4/teams/{tid}/posts/search":    okJSON(map[string]any{"order": []any{}, "posts": map[string]any{}}),
		"POST /api/v4/teams/{tid}/channels/search": okJSON([]any{}),
		"POST /api/v4/channels/group/search":       okJSON([]any{}),
		"POST /api/v4/reactions":                   okJSON(map[string]any{}),
		"POST /api/v4/posts":                       m.createPost,
		"GET /api/v4/posts/{pid}":                  func(r *http.Request, _ string, _ any) (int, any) { return m.post(r.PathValue("pid")) },
		"GET /api/v4/posts/{pid}/thread": func(r *http.Request, _ string, _ any) (int, any) {
			if s, _ := m.post(r.PathValue("pid")); s != 200 {
				return s, nil
			}
			return 200, m.list([]string{r.PathValue("pid")})
		},
		"PUT /api/v4/posts/{pid}/patch": func(r *http.Request, _ string, b any) (int, any) {
			p := m.posts[r.PathValue("pid")]
			if p == nil {
				return 404, map[string]any{"message": "not found"}
			}
			p["message"] = field(b, "message")
			return 200, p
		},
		"DELETE /api/v4/posts/{pid}": func(r *http.Request, _ string, _ any) (int, any) {
			p := m.posts[r.PathValue("pid")]
			if p == nil {
				return 404, map[string]any{"message": "not found"}
			}
			delete(m.posts, p["id"].(string))
			c := m.channels[p["channel_id"].(string)]
			c.Posts = slices.DeleteFunc(c.Posts, func(id string) bool { return id == p["id"] })
			return 200, map[string]any{"status": "OK"}
		},
	}
}

func (m *fakeMattermost) createPost(_ *http.Request, me string, b any) (int, any) {
	c := m.channels[b.(map[string]any)["channel_id"].(string)]
	root, _ := b.(map[string]any)["root_id"].(string)
	if c == nil || !c.Members[me] {
		return 403, map[string]any{"message": "not a member"}
	}
	if root != "" && m.posts[root] == nil {
		return 400, map[string]any{"message": "Invalid RootId parameter."}
	}
	p := map[string]any{"id": m.id("p"), "channel_id": c.ID, "user_id": me, "root_id": root, "message": b.(map[string]any)["message"],
		"create_at": time.Now().UnixMilli()}
	m.posts[p["id"].(string)], c.Posts = p, append(c.Posts, p["id"].(string))
	raw, _ := json.Marshal(p)
	for id := range c.Members {
		for _, ws := range m.conns[id] {
			ws.WriteJSON(map[string]any{"event": "posted", "data": map[string]any{"post": string(raw)}, "seq": 1})
		}
	}
	return 201, p
}

// websocket holds a user's WebSocket: authenticated by its header, as
// the example connects, greeted with "hello", and sent "posted" events.
func (m *fakeMattermost) websocket(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	me := m.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	m.mu.Unlock()
	if me == "" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
	if err != nil {
		return
	}
	m.mu.Lock()
	m.hits["GET /api/v4/websocket"]++
	m.conns[me] = append(m.conns[me], ws)
	ws.WriteJSON(map[string]any{"event": "hello", "data": map[string]any{"connection_id": me}, "seq": 0})
	m.mu.Unlock()
	for {
		var msg map[string]any
		if ws.ReadJSON(&msg) != nil {
			break
		}
		if msg["action"] != "user_typing" {
			m.mu.Lock()
			m.wrong = append(m.wrong, fmt.Sprintf("WebSocket action %v", msg["action"]))
			m.mu.Unlock()
		}
	}
	m.mu.Lock()
	m.conns[me] = slices.DeleteFunc(m.conns[me], func(c *websocket.Conn) bool { return c == ws })
	m.mu.Unlock()
}
