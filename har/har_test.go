package har

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/runner"
	"github.com/headroom-dev/headroom/scenario"
)

// app is a small API whose every session is its own: a login gives a
// random token (and a cookie), the token gives a random CSRF value, a
// created item a random id, the user a random number. A request that
// sends a value of another session is refused, as a real application
// refuses a stale token.
type app struct {
	mu     sync.Mutex
	tokens map[string]*session
}

type session struct {
	user   int64
	csrf   string
	cookie string
	items  map[string]bool
}

func newApp() *app { return &app{tokens: map[string]*session{}} }

func random(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return fmt.Sprintf("%x", b)
}

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w.Header().Set("X-Request-Id", random(12)) // noise: no request sends it back
	if r.URL.Path == "/static/app.js" {
		w.Header().Set("Content-Type", "application/javascript")
		io.WriteString(w, "console.log('app')")
		return
	}
	if r.Method == "POST" && r.URL.Path == "/api/login" {
		var body struct{ User, Password string }
		if json.NewDecoder(r.Body).Decode(&body) != nil || body.Password != "pw" {
			http.Error(w, "bad login", http.StatusUnauthorized)
			return
		}
		n, _ := rand.Int(rand.Reader, big.NewInt(1e9))
		s := &session{user: 10_000 + n.Int64(), csrf: random(16), cookie: random(16), items: map[string]bool{}}
		tok := random(24)
		a.tokens[tok] = s
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: s.cookie, Path: "/"})
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"token": tok, "user": map[string]any{"id": s.user, "name": body.User}})
		return
	}
	s := a.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	if c, err := r.Cookie("sid"); s == nil || err != nil || c.Value != s.cookie {
		http.Error(w, "who are you?", http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch p := r.URL.Path; {
	case r.Method == "GET" && p == "/api/me":
		json.NewEncoder(w).Encode(map[string]any{"csrf": s.csrf, "theme": "dark"})
	case r.Method == "POST" && p == "/api/items":
		var body struct {
			Title string
			Owner int64
			Nonce string
		}
		if r.Header.Get("X-CSRF-Token") != s.csrf || json.NewDecoder(r.Body).Decode(&body) != nil || body.Owner != s.user {
			http.Error(w, `{"error": "forbidden"}`, http.StatusForbidden)
			return
		}
		id := "item-" + random(8)
		s.items[id] = true
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"item": map[string]any{"id": id, "title": body.Title}})
	case strings.HasPrefix(p, "/api/items/") && s.items[strings.TrimPrefix(p, "/api/items/")]:
		if r.Method == "DELETE" {
			delete(s.items, strings.TrimPrefix(p, "/api/items/"))
			w.WriteHeader(http.StatusNoContent)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"id": strings.TrimPrefix(p, "/api/items/"), "owner": s.user})
	default:
		http.Error(w, `{"error": "no such thing"}`, http.StatusNotFound)
	}
}

// record plays a browser's session against base and records it as a
// HAR file does: three pages, their assets, a request to another origin,
// every response's body.
func record(t *testing.T, base string) []byte {
	jar := &cookieJar{}
	var entries []map[string]any
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	at := start
	do := func(page, method, u string, headers map[string]string, body any) map[string]any {
		var rb io.Reader
		var text string
		if body != nil {
			b, _ := json.Marshal(body)
			text, rb = string(b), bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, u, rb)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("User-Agent", "Mozilla/5.0")
		jar.apply(req)
		var status int
		var respHeaders []map[string]string
		var respText, mime string
		if strings.HasPrefix(u, base) {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			jar.keep(resp)
			status, respText, mime = resp.StatusCode, string(b), resp.Header.Get("Content-Type")
			for k, vs := range resp.Header {
				for _, v := range vs {
					respHeaders = append(respHeaders, map[string]string{"name": k, "value": v})
				}
			}
		} else {
			status, mime = 204, "text/plain" // the other origin is not asked: its answer is recorded
		}
		var reqHeaders []map[string]string
		for k, vs := range req.Header {
			for _, v := range vs {
				reqHeaders = append(reqHeaders, map[string]string{"name": k, "value": v})
			}
		}
		e := map[string]any{"pageref": page, "startedDateTime": at.Format(time.RFC3339Nano), "time": 20,
			"request":  map[string]any{"method": method, "url": u, "headers": reqHeaders},
			"response": map[string]any{"status": status, "headers": respHeaders, "content": map[string]any{"mimeType": mime, "text": respText}}}
		if body != nil {
			e["request"].(map[string]any)["postData"] = map[string]any{"mimeType": "application/json", "text": text}
		}
		entries = append(entries, e)
		at = at.Add(50 * time.Millisecond)
		var v map[string]any
		json.Unmarshal([]byte(respText), &v)
		return v
	}
	login := do("p1", "POST", base+"/api/login", nil, map[string]any{"user": "ann", "password": "pw"})
	do("p1", "GET", base+"/static/app.js", nil, nil)
	do("p1", "GET", "http://analytics.invalid/collect?e=login", nil, nil)
	auth := map[string]string{"Authorization": "Bearer " + login["token"].(string)}
	at = at.Add(800 * time.Millisecond)
	me := do("p2", "GET", base+"/api/me", auth, nil)
	item := do("p2", "POST", base+"/api/items", map[string]string{"Authorization": auth["Authorization"], "X-CSRF-Token": me["csrf"].(string)},
		map[string]any{"title": "hello", "owner": login["user"].(map[string]any)["id"], "nonce": "1b4e28ba-2fa1-11d2-883f-0016d3cca427"})
	id := item["item"].(map[string]any)["id"].(string)
	at = at.Add(1200 * time.Millisecond)
	do("p3", "GET", base+"/api/items/"+id+"?fields=all", auth, nil)
	do("p3", "DELETE", base+"/api/items/"+id, auth, nil)
	har := map[string]any{"log": map[string]any{"version": "1.2",
		"pages":   []map[string]any{{"id": "p1", "title": "Log in"}, {"id": "p2", "title": "New item"}, {"id": "p3", "title": "The item"}},
		"entries": entries}}
	b, err := json.Marshal(har)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// cookieJar is the recording browser's cookies.
type cookieJar struct{ cs []*http.Cookie }

func (j *cookieJar) keep(r *http.Response) { j.cs = append(j.cs, r.Cookies()...) }
func (j *cookieJar) apply(r *http.Request) {
	for _, c := range j.cs {
		r.AddCookie(c)
	}
}

// A session recorded against one instance of the application, converted,
// runs against a fresh instance without edits: every token, CSRF value, id
// and number the recording's server made is taken from the fresh server's
// responses. What looks made for the session but came from no response is
// listed, and the assets and other origins are left out.
func TestAConvertedSessionRunsAgainstAFreshServer(t *testing.T) {
	recorded := httptest.NewServer(newApp())
	h := record(t, recorded.URL)
	recorded.Close()
	l, err := Read(bytes.NewReader(h))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := Convert(l, Options{Source: "session.har"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the scenario:\n%s", sc.Source)
	want := [][2]string{{`POST /api/login json "token"`, "GET /api/items/{id} header authorization"},
		{`POST /api/login json "user.id"`, `POST /api/items "owner" in the body`},
		{`GET /api/me json "csrf"`, "POST /api/items header x-csrf-token"},
		{`POST /api/items json "item.id"`, "DELETE /api/items/{id} path"}}
	for _, w := range want {
		if !slices.ContainsFunc(sc.Correlations, func(c string) bool { return strings.Contains(c, w[0]) && strings.Contains(c, w[1]) }) {
			t.Errorf("correlations:\n%s\nwant %s used by %s", strings.Join(sc.Correlations, "\n"), w[0], w[1])
		}
	}
	if len(sc.Correlations) != 4 {
		t.Errorf("%d correlations, want 4 (the request ids are noise no request sent back)", len(sc.Correlations))
	}
	if u := strings.Join(sc.Uncorrelated, "\n"); !strings.Contains(u, `"nonce" in the body = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"`) {
		t.Errorf("not correlated: %q; want the client's nonce", sc.Uncorrelated)
	}
	if sc.Kept != 5 || sc.Assets != 1 || len(sc.Elsewhere) != 1 {
		t.Errorf("kept %d, assets %d, elsewhere %q: want 5, 1 and the analytics origin", sc.Kept, sc.Assets, sc.Elsewhere)
	}

	res := runFresh(t, sc, newApp(), 10, 4*time.Second)
	names := map[string]int64{}
	for _, r := range res.Requests {
		names[r.Name] = r.Count
	}
	t.Logf("totals %+v; by name %v", res.Totals, names)
	if res.Totals.Count == 0 || res.Totals.Errors != 0 {
		t.Errorf("totals %+v: want every request answered as recorded on a fresh server", res.Totals)
	}
	for _, n := range []string{"POST /api/login", "POST /api/items", "GET /api/items/{id}", "DELETE /api/items/{id}"} {
		if names[n] == 0 {
			t.Errorf("no %s in the run: %v", n, names)
		}
	}
}

// What is not a HAR file, or holds what headroom does not send, is
// refused with what it is.
func TestReadRefusesWhatIsNoSession(t *testing.T) {
	for in, want := range map[string]string{
		`{"log": {"entries": [{"request": {"method": "GET", "url": "ftp://x/y"}}]}}`: `entry 1: "ftp://x/y" is not an http(s) URL`,
		`{"log": {"entries": [{"request": {"url": "http://x/y"}}]}}`:                 "entry 1 (http://x/y): no method",
		`{"nolog": {}}`: `not a HAR file: no "log"`,
		`[1, 2`:         "not a HAR file",
	} {
		if _, err := Read(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

// A value a response listed is taken from its place in the list only when
// the server made it (an id: it has digits); a name the list gave (a
// metric's, as Prometheus's UI lists them) is sent as recorded, since a
// fresh server's list may hold other names at that place.
func TestListedNamesStayAsRecorded(t *testing.T) {
	entry := func(method, url, mime, body string) string {
		return fmt.Sprintf(`{"startedDateTime": "2026-11-29T10:00:00Z", "time": 5, "request": {"method": %q, "url": %q, "headers": []},
			"response": {"status": 200, "headers": [], "content": {"mimeType": %q, "text": %q}}}`, method, url, mime, body)
	}
	h := `{"log": {"version": "1.2", "entries": [` + strings.Join([]string{
		entry("GET", "http://127.0.0.1:9090/api/v1/label/__name__/values", "application/json",
			`{"status": "success", "data": ["go_goroutines", "prometheus_http_requests_total", "up"]}`),
		entry("GET", "http://127.0.0.1:9090/api/v1/query?query=prometheus_http_requests_total", "application/json", `{"status": "success"}`),
		entry("GET", "http://127.0.0.1:9090/api/items", "application/json", `{"items": [{"id": "c0ffee42beef", "title": "first item"}]}`),
		entry("GET", "http://127.0.0.1:9090/api/items/c0ffee42beef", "application/json", `{"title": "first item"}`),
	}, ",") + `]}}`
	l, err := Read(strings.NewReader(h))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := Convert(l, Options{Source: "list.har"})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(sc.Correlations, "\n")
	if len(sc.Correlations) != 1 || !strings.Contains(got, `GET /api/items json "items.0.id"`) {
		t.Errorf("correlations:\n%s\nwant the listed id alone (items.0.id), not the listed metric name", got)
	}
	if !strings.Contains(string(sc.Source), `query=prometheus_http_requests_total`) {
		t.Errorf("the metric's name is not sent as recorded:\n%s", sc.Source)
	}
}

// formApp is a server-rendered login, as Django's and Rails' are: each
// time it serves the login page it makes two tokens, one in a hidden
// input and one in a meta tag; the form's POST must send the input's back
// in its body and the meta's in a header, each once.
type formApp struct {
	mu         sync.Mutex
	form, meta map[string]bool
}

func (a *formApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case r.Method == "GET" && r.URL.Path == "/login":
		f, m := random(16), random(16)
		a.form[f], a.meta[m] = true, true
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><meta name="csrf-token" content="%s">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>Log in</title></head>
<body><form method="post" action="/login"><input type='hidden' value='%s' name='csrfmiddlewaretoken'>
<input name="username"><input type="password" name="password"><button>Log in</button></form></body></html>`, m, f)
	case r.Method == "POST" && r.URL.Path == "/login":
		f, m := r.PostFormValue("csrfmiddlewaretoken"), r.Header.Get("X-CSRF-Token")
		if !a.form[f] || !a.meta[m] || r.PostFormValue("password") != "correct-horse" {
			http.Error(w, "CSRF verification failed", http.StatusForbidden)
			return
		}
		delete(a.form, f)
		delete(a.meta, m)
		io.WriteString(w, "welcome")
	default:
		http.NotFound(w, r)
	}
}

// A form's CSRF tokens, which a page gave in a hidden input and a meta
// tag, are taken from the page as the scenario runs: the converted session
// logs in on a fresh server, whose tokens are new each time.
func TestCSRFTokensInAPageAreCorrelated(t *testing.T) {
	recorded := httptest.NewServer(&formApp{form: map[string]bool{}, meta: map[string]bool{}})
	resp, err := http.Get(recorded.URL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	find := func(re string) string {
		m := regexp.MustCompile(re).FindSubmatch(page)
		if m == nil {
			t.Fatalf("no %s in the page:\n%s", re, page)
		}
		return string(m[1])
	}
	meta, form := find(`content="([0-9a-f]+)"`), find(`value='([0-9a-f]+)'`)
	body := "csrfmiddlewaretoken=" + form + "&username=ann&password=correct-horse"
	req, _ := http.NewRequest("POST", recorded.URL+"/login", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-CSRF-Token", meta)
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the recorded login: %v %v", resp, err)
	}
	resp.Body.Close()
	recorded.Close()
	har := map[string]any{"log": map[string]any{"version": "1.2", "entries": []any{
		map[string]any{"startedDateTime": "2026-11-29T10:00:00Z", "time": 5,
			"request":  map[string]any{"method": "GET", "url": recorded.URL + "/login", "headers": []any{}},
			"response": map[string]any{"status": 200, "headers": []any{}, "content": map[string]any{"mimeType": "text/html; charset=utf-8", "text": string(page)}}},
		map[string]any{"startedDateTime": "2026-11-29T10:00:02Z", "time": 5,
			"request": map[string]any{"method": "POST", "url": recorded.URL + "/login",
				"headers":  []any{map[string]string{"name": "X-CSRF-Token", "value": meta}, map[string]string{"name": "Content-Type", "value": "application/x-www-form-urlencoded"}},
				"postData": map[string]any{"mimeType": "application/x-www-form-urlencoded", "text": body}},
			"response": map[string]any{"status": 200, "headers": []any{}, "content": map[string]any{"mimeType": "text/plain", "text": "welcome"}}},
	}}}
	b, _ := json.Marshal(har)
	l, err := Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := Convert(l, Options{Source: "form.har"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the scenario:\n%s", sc.Source)
	got := strings.Join(sc.Correlations, "\n")
	for _, want := range []string{`GET /login html <input name="csrfmiddlewaretoken"> -> POST /login body`, `GET /login html <meta name="csrf-token"> -> POST /login header x-csrf-token`} {
		if !strings.Contains(got, want) {
			t.Errorf("correlations:\n%s\nwant %s", got, want)
		}
	}

	res := runFresh(t, sc, &formApp{form: map[string]bool{}, meta: map[string]bool{}}, 5, 3*time.Second)
	logins := int64(0)
	for _, r := range res.Requests {
		if r.Name == "POST /login" {
			logins = r.Count
		}
	}
	if res.Totals.Errors != 0 || logins == 0 {
		t.Errorf("totals %+v, %d logins: want every login let in by the fresh server's tokens", res.Totals, logins)
	}
}

// runFresh runs the converted scenario for users over d against a fresh
// server of app, as a user of convert would, and returns the result.
func runFresh(t *testing.T, sc *Scenario, app http.Handler, users int, d time.Duration) *result.Result {
	t.Helper()
	fresh := httptest.NewServer(app)
	defer fresh.Close()
	s, err := scenario.Load(context.Background(), "session.star", sc.Source, scenario.Limits{})
	if err != nil {
		t.Fatalf("the scenario does not load: %v", err)
	}
	target, _ := url.Parse(fresh.URL)
	res, err := (&runner.Bounded{Common: runner.Common{Scenario: s, Target: target, Seed: 1, Timeout: 10 * time.Second, Grace: time.Second,
		Out: t.TempDir()}, Users: users, Duration: d}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}
