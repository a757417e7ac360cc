package record

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/har"
	"github.com/headroom-dev/headroom/internal/browser"
	"github.com/headroom-dev/headroom/internal/testing/servertest"
)

// shop is a small web application: a page whose form logs in with fetch
// (a random token, which the next call sends), an image from another
// host, a link to a second page whose script asks for the items.
type shop struct {
	mu     sync.Mutex
	tokens map[string]bool
}

func (s *shop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.Method + " " + r.URL.Path {
	case "GET /":
		// The image's host is TEST-NET-1 (RFC 5737, never routed): the
		// recorder must refuse it before any request leaves loopback, and
		// the test asserts it did. Nothing is loaded from the network.
		io.WriteString(w, `<!doctype html><title>Shop</title><img src="http://192.0.2.1/pixel.png" alt="">
<form id="f"><input id="name"><button>Log in</button></form><p id="me"></p><a id="next" href="/items">Items</a>
<script>
document.getElementById("f").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const login = await (await fetch("/api/login", {method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({user: document.getElementById("name").value})})).json();
  const me = await (await fetch("/api/me", {headers: {"Authorization": "Bearer " + login.token}})).json();
  document.getElementById("me").textContent = me.user;
});
</script>`)
	case "GET /items":
		io.WriteString(w, `<!doctype html><title>Items</title><ul id="items"></ul>
<script>fetch("/api/items").then(r => r.json()).then(items => { document.getElementById("items").textContent = items.join(", "); });</script>`)
	case "POST /api/login":
		var body struct{ User string }
		if json.NewDecoder(r.Body).Decode(&body) != nil || body.User == "" {
			http.Error(w, "who?", http.StatusBadRequest)
			return
		}
		b := make([]byte, 12)
		rand.Read(b)
		token := fmt.Sprintf("%x", b)
		s.tokens[token] = true
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"token": %q}`, token)
	case "GET /api/me":
		if !s.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")] {
			http.Error(w, "no such token", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"user": "ann"}`)
	case "GET /api/items":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `["tea", "cake"]`)
	default:
		http.NotFound(w, r)
	}
}

func steps(t *testing.T, lines string) []Step {
	t.Helper()
	s, err := ParseSteps(strings.NewReader(lines), "test.steps")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A session recorded in a real headless Chromium: a form filled in and
// sent (its fetch calls, the token the first gave the second sent), a
// link followed to a second page; the image from another host refused
// without leaving the machine. Convert reads the file and finds the
// token.
func TestRecordAShopInChromium(t *testing.T) {
	servertest.Require(t, browser.Bin, "chromium")
	srv := httptest.NewServer(&shop{tokens: map[string]bool{}})
	defer srv.Close()
	var progress []string
	rec, err := Record(t.Context(), Options{Steps: steps(t, "visit "+srv.URL+`/
		# log in
		click #name
		type ann
		press Enter
		click #next`), Creator: Creator{Name: "headroom", Version: "test"}, Progress: func(l string) { progress = append(progress, l) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("progress:\n%s", strings.Join(progress, "\n"))
	l := rec.File.Log
	var got []string
	for _, e := range l.Entries {
		got = append(got, fmt.Sprintf("%s %s %s %d", e.PageRef, e.Request.Method, strings.TrimPrefix(e.Request.URL, srv.URL), e.Response.Status))
	}
	want := []string{"page_1 GET / 200", "page_1 POST /api/login 200", "page_1 GET /api/me 200", "page_2 GET /items 200", "page_2 GET /api/items 200"}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("no %q among the entries:\n%s", w, strings.Join(got, "\n"))
		}
	}
	if len(l.Pages) != 2 || l.Pages[0].Title != "Shop" || l.Pages[1].Title != "Items" {
		t.Errorf("pages %+v: want Shop and Items", l.Pages)
	}
	for _, e := range l.Entries {
		switch strings.TrimPrefix(e.Request.URL, srv.URL) {
		case "/api/login":
			if e.Request.PostData == nil || e.Request.PostData.Text != `{"user":"ann"}` || !strings.Contains(e.Response.Content.Text, "token") {
				t.Errorf("the login: sent %+v, answered %q", e.Request.PostData, e.Response.Content.Text)
			}
		case "/api/me":
			if e.Response.Content.Text != `{"user": "ann"}` || e.Time <= 0 || e.Started.IsZero() {
				t.Errorf("/api/me: %+v", e)
			}
		}
	}
	if len(rec.Failures) != 1 || !strings.Contains(rec.Failures[0], "http://192.0.2.1/pixel.png: another host, refused") {
		t.Errorf("failures %q: want the other host's image refused", rec.Failures)
	}
	if len(progress) != 5 || !strings.Contains(progress[4], "click #next: 2 requests, on page 2 (Items)") {
		t.Errorf("progress %q: want a line a step, the last on page 2", progress)
	}

	b, err := json.Marshal(rec.File)
	if err != nil {
		t.Fatal(err)
	}
	hl, err := har.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := har.Convert(hl, har.Options{Source: "shop.har"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Correlations) != 1 || !strings.Contains(sc.Correlations[0], `POST /api/login json "token" -> GET /api/me header authorization`) {
		t.Errorf("correlations %q: want the login's token\n%s", sc.Correlations, sc.Source)
	}
}

// A recording that cannot go on says why: a page that does not answer (nothing
// recorded, so nothing returned), an element that never appears (the
// session so far returned with the error).
func TestRecordSaysWhyItStopped(t *testing.T) {
	servertest.Require(t, browser.Bin, "chromium")
	srv := httptest.NewServer(&shop{tokens: map[string]bool{}})
	defer srv.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/"
	l.Close()

	rec, err := Record(t.Context(), Options{Steps: steps(t, "visit "+closed)})
	if rec != nil || err == nil || !strings.Contains(err.Error(), "visit "+closed+": the page failed to load: connection refused (is the server up?)") {
		t.Errorf("a page nothing serves: %v, %v", rec, err)
	}
	rec, err = Record(t.Context(), Options{Steps: steps(t, "visit "+srv.URL+"\nclick #nothing"), StepTimeout: time.Second})
	if rec == nil || len(rec.File.Log.Entries) == 0 || err == nil || !strings.Contains(err.Error(), "click #nothing: no element matches it within 1s (--step-timeout)") {
		t.Errorf("an element that never appears: %v (%v)", err, rec)
	}
}

// What cannot be recorded is refused before Chromium starts: a first
// step that is not a visit, a host that is not this machine (unless
// allowed), a Chromium that is not there.
func TestRecordRefusesBeforeStarting(t *testing.T) {
	for _, c := range []struct {
		steps, want string
		remote      bool
	}{
		{"click #x", "the first step opens a page", false},
		{"visit http://10.1.2.3:9090/graph", "10.1.2.3 is not this machine; headroom records and sends traffic on loopback only (127.0.0.1, ::1, localhost) unless --allow-remote", false},
		{"visit http://127.0.0.1:9090/\nvisit https://example.com/", "example.com is not this machine", false},
		{"visit http://127.0.0.1:9090/\nvisit /x\nvisit ftp://127.0.0.1/", `visit "ftp://127.0.0.1/": not an http(s) URL`, true},
	} {
		if err := Check(steps(t, c.steps), c.remote); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.steps, err, c.want)
		}
	}
	if err := Check(steps(t, "visit http://[::1]:9090/\nvisit http://localhost:9090/x"), false); err != nil {
		t.Errorf("loopback refused: %v", err)
	}
	_, err := Record(context.Background(), Options{Steps: steps(t, "visit http://127.0.0.1:1/"), Chromium: "/nonexistent/chromium"})
	if !errors.Is(err, ErrNoChromium) || !strings.Contains(err.Error(), "apt-get install chromium") {
		t.Errorf("no Chromium: %v", err)
	}
}

// Steps read from a file say where a mistake is.
func TestParseSteps(t *testing.T) {
	got := steps(t, "# a session\nvisit http://127.0.0.1:9090/graph\n\nclick textarea[name=expr]\ntype rate(up[1m])\npress Enter\nwait 2s\neval window.scrollTo(0, 500)\n")
	want := []Step{{Verb: "visit", Arg: "http://127.0.0.1:9090/graph"}, {Verb: "click", Arg: "textarea[name=expr]"}, {Verb: "type", Arg: "rate(up[1m])"},
		{Verb: "press", Arg: "Enter"}, {Verb: "wait", Arg: "2s", Wait: 2 * time.Second}, {Verb: "eval", Arg: "window.scrollTo(0, 500)"}}
	if !slices.Equal(got, want) {
		t.Errorf("steps %+v\nwant %+v", got, want)
	}
	for in, msg := range map[string]string{
		"visit /\nhover #x":    `s.steps:2: "hover" is no step: the steps are visit, click, type, press, eval, wait`,
		"visit /\nwait soon":   `s.steps:2: wait "soon": want a duration such as 2s or 500ms`,
		"visit /\npress F13":   `s.steps:2: press "F13": the keys are Enter`,
		"# x\n\nclick":         "s.steps:3: click needs its SELECTOR",
		"visit /\nwait -1s\n":  `s.steps:2: wait "-1s"`,
		"visit /\neval\nvisit": "s.steps:2: eval needs its SCRIPT",
	} {
		if _, err := ParseSteps(strings.NewReader(in), "s.steps"); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want %q", in, err, msg)
		}
	}
}
