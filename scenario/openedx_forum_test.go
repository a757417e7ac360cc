package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario/ws"
	"github.com/headroom-dev/headroom/transport"
)

// referenceForumWeights are the reference's task weights
// (forum-step-load-comparison.txt's locustfile, edx-load-tests'
// discussions_api), by its task names.
var referenceForumWeights = map[string]float64{
	"GET_thread": 7560, "GET_comment_list": 2000, "GET_thread_list": 500, "POST_comment": 500, "DELETE_comment": 300,
	"POST_thread": 220, "PATCH_thread": 92, "PATCH_comment": 83, "DELETE_thread": 40,
}

// fakeForum answers the forum API calls examples/openedx-forum.star
// makes, in the shapes openedx-forum 0.6.0 answers them (read from a real
// one started by scripts/openedx-forum.sh), from a small in-memory store:
// enough to run every task of the script's and check each call it makes
// (the service token, the fields the forum requires, ids that exist). It
// is no model of the forum's costs.
type fakeForum struct {
	mu       sync.Mutex
	token    string
	n        int                       // ids made
	users    map[string]bool           // forum user ids
	threads  map[string]map[string]any // id -> thread
	comments map[string]map[string]any // id -> comment (a response has no parent_id)
	hits     map[string]int            // route pattern -> requests
	wrong    []string                  // requests the real forum would refuse
}

const forumAPI = "/forum/api/v2"

func newFakeForum(t *testing.T) (*fakeForum, *url.URL) {
	f := &fakeForum{token: "0123456789abcdef", users: map[string]bool{}, threads: map[string]map[string]any{},
		comments: map[string]map[string]any{}, hits: map[string]int{}}
	mux := http.NewServeMux()
	for pattern, h := range f.routes() {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.hits[pattern]++
			if r.Header.Get("Authorization") != "Token "+f.token {
				f.wrong = append(f.wrong, pattern+": not the service account's token")
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			body := map[string]any{}
			if r.Method == http.MethodPost || r.Method == http.MethodPut {
				if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
					f.wrong = append(f.wrong, pattern+": a body that is not a JSON object")
				}
			}
			status, reply := h(r, body)
			if status >= 400 && !(status == http.StatusNotFound && pattern == "GET "+forumAPI+"/users/{id}") {
				f.wrong = append(f.wrong, fmt.Sprintf("%s: %d %v", pattern, status, reply))
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(reply)
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.wrong = append(f.wrong, "no such route: "+r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		http.NotFound(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return f, u
}

type forumHandler func(r *http.Request, body map[string]any) (int, any)

// need says which of the fields the forum requires a body lacks, as its 400 would.
func need(body map[string]any, fields ...string) error {
	for _, k := range fields {
		if s, _ := body[k].(string); s == "" {
			return fmt.Errorf("no %s", k)
		}
	}
	return nil
}

func (f *fakeForum) item(kind string, body map[string]any, extra map[string]any) map[string]any {
	f.n++
	it := map[string]any{"id": strconv.Itoa(f.n), "type": kind, "body": body["body"], "user_id": body["user_id"],
		"course_id": body["course_id"], "votes": map[string]any{"up_count": 0}, "abuse_flaggers": []string{}}
	for k, v := range extra {
		it[k] = v
	}
	return it
}

func (f *fakeForum) routes() map[string]forumHandler {
	thread := func(r *http.Request) map[string]any { return f.threads[r.PathValue("id")] }
	comment := func(r *http.Request) map[string]any { return f.comments[r.PathValue("id")] }
	missing := map[string]any{"error": "does not exist"}
	// remove deletes the item the path names from store and answers it, as the forum answers a DELETE.
	remove := func(store map[string]map[string]any) forumHandler {
		return func(r *http.Request, _ map[string]any) (int, any) {
			it := store[r.PathValue("id")]
			if it == nil {
				return http.StatusBadRequest, missing
			}
			delete(store, r.PathValue("id"))
			return http.StatusOK, it
		}
	}
	return map[string]forumHandler{
		"GET " + forumAPI + "/users/{id}": func(r *http.Request, _ map[string]any) (int, any) {
			if !f.users[r.PathValue("id")] {
				return http.StatusNotFound, map[string]any{"error": "user not found"} // asked before making one
			}
			return http.StatusOK, map[string]any{"id": r.PathValue("id")}
		},
		"POST " + forumAPI + "/users": func(_ *http.Request, b map[string]any) (int, any) {
			id, _ := b["id"].(string)
			if err := need(b, "id", "username"); err != nil || f.users[id] {
				return http.StatusBadRequest, map[string]any{"error": "user already exists, or no id"}
			}
			f.users[id] = true
			return http.StatusOK, map[string]any{"id": id, "username": b["username"]}
		},
		"GET " + forumAPI + "/threads": func(r *http.Request, _ map[string]any) (int, any) {
			q := r.URL.Query()
			if q.Get("course_id") == "" || !f.users[q.Get("user_id")] {
				return http.StatusBadRequest, map[string]any{"error": "no course_id, or an unknown user_id"}
			}
			var list []map[string]any
			for _, t := range f.threads {
				if a := q.Get("author_id"); a == "" || t["user_id"] == a {
					list = append(list, t)
				}
			}
			slices.SortFunc(list, func(a, b map[string]any) int { return len(b["id"].(string)) - len(a["id"].(string)) })
			per, _ := strconv.Atoi(q.Get("per_page"))
			if per <= 0 {
				per = 20
			}
			n := len(list)
			return http.StatusOK, map[string]any{"collection": list[:min(per, n)], "thread_count": n, "page": 1, "num_pages": (n + per - 1) / per}
		},
		"POST " + forumAPI + "/course/threads": func(_ *http.Request, b map[string]any) (int, any) {
			if err := need(b, "title", "body", "course_id", "user_id", "commentable_id"); err != nil || !f.users[b["user_id"].(string)] {
				return http.StatusBadRequest, map[string]any{"error": fmt.Sprint("a thread: ", err)}
			}
			t := f.item("thread", b, map[string]any{"title": b["title"], "comments_count": 0})
			f.threads[t["id"].(string)] = t
			return http.StatusOK, t
		},
		"GET " + forumAPI + "/threads/{id}": func(r *http.Request, _ map[string]any) (int, any) {
			t := thread(r)
			if t == nil || !f.users[r.URL.Query().Get("user_id")] {
				return http.StatusBadRequest, missing
			}
			if r.URL.Query().Get("with_responses") != "true" {
				return http.StatusOK, t
			}
			out := map[string]any{"children": []map[string]any{}}
			for k, v := range t {
				out[k] = v
			}
			for _, c := range f.comments {
				if c["thread_id"] == t["id"] && c["parent_id"] == nil {
					out["children"] = append(out["children"].([]map[string]any), c)
				}
			}
			return http.StatusOK, out
		},
		"PUT " + forumAPI + "/threads/{id}": func(r *http.Request, b map[string]any) (int, any) {
			if thread(r) == nil || need(b, "body", "course_id") != nil {
				return http.StatusBadRequest, missing
			}
			thread(r)["body"] = b["body"]
			return http.StatusOK, thread(r)
		},
		"DELETE " + forumAPI + "/threads/{id}": remove(f.threads),
		"PUT " + forumAPI + "/threads/{id}/{op}": func(r *http.Request, b map[string]any) (int, any) {
			return f.mark(thread(r), r.PathValue("op"), b)
		},
		"POST " + forumAPI + "/threads/{id}/comments": func(r *http.Request, b map[string]any) (int, any) {
			if thread(r) == nil || need(b, "body", "course_id", "user_id") != nil {
				return http.StatusBadRequest, missing
			}
			c := f.item("comment", b, map[string]any{"thread_id": r.PathValue("id")})
			f.comments[c["id"].(string)] = c
			return http.StatusOK, c
		},
		"GET " + forumAPI + "/comments/{id}": func(r *http.Request, _ map[string]any) (int, any) {
			if comment(r) == nil {
				return http.StatusBadRequest, missing
			}
			return http.StatusOK, comment(r)
		},
		"POST " + forumAPI + "/comments/{id}": func(r *http.Request, b map[string]any) (int, any) {
			p := comment(r)
			if p == nil || p["parent_id"] != nil || need(b, "body", "course_id", "user_id") != nil {
				return http.StatusBadRequest, map[string]any{"error": "no such response, or a comment of a comment"}
			}
			c := f.item("comment", b, map[string]any{"thread_id": p["thread_id"], "parent_id": p["id"]})
			f.comments[c["id"].(string)] = c
			return http.StatusOK, c
		},
		"PUT " + forumAPI + "/comments/{id}": func(r *http.Request, b map[string]any) (int, any) {
			if comment(r) == nil || need(b, "body", "course_id") != nil {
				return http.StatusBadRequest, missing
			}
			return http.StatusOK, comment(r)
		},
		"DELETE " + forumAPI + "/comments/{id}": remove(f.comments),
		"PUT " + forumAPI + "/comments/{id}/{op}": func(r *http.Request, b map[string]any) (int, any) {
			return f.mark(comment(r), r.PathValue("op"), b)
		},
		"POST " + forumAPI + "/users/{id}/subscriptions": func(r *http.Request, b map[string]any) (int, any) {
			if !f.users[r.PathValue("id")] || b["source_type"] != "thread" || f.threads[fmt.Sprint(b["source_id"])] == nil {
				return http.StatusBadRequest, map[string]any{"error": "no such user or thread"}
			}
			return http.StatusOK, map[string]any{"subscriber_id": r.PathValue("id"), "source_id": b["source_id"]}
		},
	}
}

// missed are the routes never called, sorted.
func (f *fakeForum) missed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.missedLocked()
}

func (f *fakeForum) missedLocked() (out []string) {
	for pattern := range f.routes() {
		if f.hits[pattern] == 0 {
			out = append(out, pattern)
		}
	}
	slices.Sort(out)
	return out
}

// mark is a vote or an abuse flag on a thread or comment.
func (f *fakeForum) mark(it map[string]any, op string, b map[string]any) (int, any) {
	ok := op == "votes" && (b["value"] == "up" || b["value"] == "down") || op == "abuse_flag"
	if it == nil || !ok || !f.users[fmt.Sprint(b["user_id"])] {
		return http.StatusBadRequest, map[string]any{"error": "no such item, operation or user"}
	}
	return http.StatusOK, it
}

func loadForumExample(t *testing.T, vars map[string]string) *Scenario {
	t.Helper()
	src, err := os.ReadFile("../examples/openedx-forum.star")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := Load(context.Background(), "openedx-forum.star", src, Limits{Vars: vars})
	if err != nil {
		t.Fatalf("vars %v: %v", vars, err)
	}
	return sc
}

func forumFile(t *testing.T, token string) string {
	path := filepath.Join(t.TempDir(), "forum.json")
	if err := os.WriteFile(path, []byte(`{"token": "`+token+`", "api_key": "k"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The forum example loads with its settings and makes the reference's
// tasks at the reference's weights, after its 5 s wait.
func TestForumExampleLoads(t *testing.T) {
	file := forumFile(t, "x")
	for _, vars := range []map[string]string{{"forum": file}, {"forum": file, "data": "yes", "threads": "40", "authors": "4", "wait": "2s"}} {
		sc := loadForumExample(t, vars)
		got := map[string]float64{}
		for _, a := range sc.Actions {
			got[a.Name] = a.Weight
		}
		if len(got) != len(referenceForumWeights) {
			t.Errorf("%d tasks, want the reference's %d: %v", len(got), len(referenceForumWeights), got)
		}
		for name, w := range referenceForumWeights {
			if got[name] != w {
				t.Errorf("%s: weight %v, want the reference's %v", name, got[name], w)
			}
		}
	}
}

// The example runs against a fake of the forum's API: the data phase twice
// (the second adds nothing), then every task many times over for each
// user, with not one request the fake does not know or that the real
// forum would refuse, and every route the script means to call called.
func TestForumExampleRuns(t *testing.T) {
	forum, target := newFakeForum(t)
	vars := map[string]string{"forum": forumFile(t, forum.token), "data": "yes", "authors": "2", "threads": "6", "responses": "2"}
	rec := &lockedSamples{}
	newUser := func(sc *Scenario, id int) *User {
		c := transport.NewClient(transport.Options{Target: target, Timeout: 5 * time.Second})
		u := NewUser(sc, Env{ID: id, Seed: 1, HTTP: c, Record: rec, WS: ws.Dialing{Target: target, Timeout: 5 * time.Second}})
		t.Cleanup(func() { u.Close(); c.Close() })
		if out := u.Setup(); out != metrics.OK {
			t.Fatalf("user %d's setup: %v: %v", id, out, rec.failures())
		}
		return u
	}
	count := func() (threads, comments int) {
		forum.mu.Lock()
		defer forum.mu.Unlock()
		return len(forum.threads), len(forum.comments)
	}
	// 6 threads by 2 authors, each with 2 responses and a comment on the first
	const threads, comments = 6, 6 * 3
	for pass := range 2 {
		sc := loadForumExample(t, vars)
		var users []*User
		for id := 1; id <= 3; id++ { // user 3 is no author
			users = append(users, newUser(sc, id))
		}
		if th, co := count(); th != threads || co != comments {
			t.Fatalf("data phase %d: %d threads and %d comments, want %d and %d", pass+1, th, co, threads, comments)
		}
		if pass == 0 {
			continue
		}
		run := func(a *Action) {
			for _, u := range users {
				if out := u.Run(a); out != metrics.OK {
					t.Fatalf("%s: %v: %v", a.Name, out, rec.failures())
				}
			}
		}
		for range 8 {
			for _, a := range sc.Actions {
				run(a)
			}
		}
		// a follow is 3 in 102 PATCH_threads, an abuse flag 1: the PATCHes again
		// until every route has been called (a fixed seed: the same count each run)
		for i := 0; i < 200 && forum.missed() != nil; i++ {
			for _, a := range sc.Actions {
				if strings.HasPrefix(a.Name, "PATCH_") {
					run(a)
				}
			}
		}
	}
	if f := rec.failures(); len(f) > 0 {
		t.Errorf("samples that failed: %v", f)
	}
	forum.mu.Lock()
	defer forum.mu.Unlock()
	if len(forum.wrong) > 0 {
		t.Errorf("requests the forum would refuse: %v", forum.wrong)
	}
	for _, pattern := range forum.missedLocked() {
		t.Errorf("%s never called: a task that does nothing?", pattern)
	}
	// DELETE_thread and DELETE_comment delete what they post: the tasks leave
	// only POST_thread's and POST_comment's
	posted := rec.count("POST "+forumAPI+"/course/threads", metrics.Request) - rec.count("DELETE "+forumAPI+"/threads/{id}", metrics.Request)
	if posted != len(forum.threads)-threads {
		t.Errorf("%d threads more than the data phase's, want the %d posted and not deleted", len(forum.threads)-threads, posted)
	}
}
