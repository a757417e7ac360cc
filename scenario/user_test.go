package scenario

import (
	"runtime"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/transport"
)

// fakeDoer answers every request with a fixed response and keeps what it was sent.
type fakeDoer struct {
	sent   []transport.Request
	status int
	body   string
}

func (f *fakeDoer) Do(req *transport.Request, resp *transport.Response) {
	r := *req // the user reuses its request's slices: keep copies
	r.Header, r.Defaults = append([]transport.Header(nil), req.Header...), append([]transport.Header(nil), req.Defaults...)
	f.sent = append(f.sent, r)
	*resp = transport.Response{Status: f.status, Body: []byte(f.body),
		RawHeader: []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nToken: abc\r\n\r\n")}
}
func (f *fakeDoer) Cookies() map[string]string { return nil }

type samples []metrics.Sample

func (s *samples) Record(x metrics.Sample) { *s = append(*s, x) }

func runAction(t *testing.T, src string, d *fakeDoer) (*samples, metrics.Outcome) {
	t.Helper()
	sc, err := load("u.star", src+"\nactions = [action('A', act)]\n")
	if err != nil {
		t.Fatal(err)
	}
	rec := &samples{}
	u := NewUser(sc, Env{ID: 3, Seed: 1, HTTP: d, Record: rec})
	return rec, u.Run(sc.Actions[0])
}

func TestRequestBuiltins(t *testing.T) {
	d := &fakeDoer{status: 200, body: `{"id": "u1", "n": [1, 2]}`}
	rec, out := runAction(t, `
def act(user):
    user.http.headers["Authorization"] = "Bearer t"
    r = user.http.post("/api/x", json={"a": 1}, params={"q": "v w"}, headers={"X-Y": "z"}, name="create")
    if r.json()["n"][1] != 2 or r.headers["token"] != "abc" or not r.ok:
        fail("bad response view")
    user.http.get("/api/items/42?page=2")
    user.http.request("options", "/api/y", expect=[200, 204])
`, d)
	if out != metrics.OK {
		t.Fatalf("action outcome %v: %+v", out, *rec)
	}
	if len(d.sent) != 3 {
		t.Fatalf("%d requests sent", len(d.sent))
	}
	post := d.sent[0]
	if post.Method != "POST" || post.URL != "/api/x?q=v+w" || string(post.Body) != `{"a":1}` {
		t.Errorf("post: %s %s %s", post.Method, post.URL, post.Body)
	}
	hs := map[string]string{}
	for _, h := range post.Header {
		hs[h.Key] = h.Value
	}
	if hs["X-Y"] != "z" || hs["Content-Type"] != "application/json" || hs["Authorization"] != "" {
		t.Errorf("the request's own headers %v", hs)
	}
	// the user's defaults go apart: the transport sends them to the target only
	if len(post.Defaults) != 1 || post.Defaults[0] != (transport.Header{Key: "Authorization", Value: "Bearer t"}) {
		t.Errorf("default headers %v", post.Defaults)
	}
	names := []string{}
	for _, s := range *rec {
		if s.Kind == metrics.Request {
			names = append(names, s.Name)
		}
	}
	if strings.Join(names, ",") != "create,GET /api/items/42,OPTIONS /api/y" {
		t.Errorf("request names %v", names)
	}
}

// TestResponseJSONPath: r.json(path) gives what indexing r.json() gives, default= stands in
// for a missing value, and a missing one without it fails the action saying what is there.
func TestResponseJSONPath(t *testing.T) {
	d := &fakeDoer{status: 200, body: `{"order": ["p2", "p1"], "posts": {"p1": {"id": "p1", "n": [1, 2.5]}}, "next": null}`}
	rec, out := runAction(t, `
def act(user):
    r = user.http.get("/page")
    if r.json("order") != ["p2", "p1"] or r.json("order.1") != "p1" or r.json("posts.p1.n.1") != 2.5:
        fail("values: %s %s %s" % (r.json("order"), r.json("order.1"), r.json("posts.p1.n.1")))
    if r.json("posts.p1") != r.json()["posts"]["p1"] or r.json("next") != None:
        fail("a dict or a null")
    if r.json("order.2", default=7) != 7 or r.json("posts.p9.id", default=None) != None:
        fail("default")
    if r.json("posts.p1.n.#.x", default=0) != []:
        fail("# over numbers: %s" % r.json("posts.p1.n.#.x", default=0))
`, d)
	if out != metrics.OK {
		t.Fatalf("outcome %v: %+v", out, *rec)
	}
	users := &fakeDoer{status: 200, body: `[{"id": "u1", "name": "a"}, {"name": "b"}, {"id": "u3"}]`}
	rec, out = runAction(t, `
def act(user):
    ids = user.http.get("/users").json("#.id")
    if ids != ["u1", "u3"]:
        fail("#.id: %s" % ids)
`, users)
	if out != metrics.OK {
		t.Fatalf("outcome %v: %+v", out, *rec)
	}
	for path, want := range map[string]string{
		`"order.2"`:     `response.json("order.2"): no index 2 in the list at "order", of 2 (default= gives a value for this case)`,
		`"posts.p1.x"`:  `no "x" in the object at "posts.p1"; its keys: id, n`,
		`"nothing"`:     `no "nothing" in the object at the top level; its keys: next, order, posts`,
		`"order.first"`: `"first" is not an index of the list at "order"`,
		`"next.a"`:      `"a": the value at "next" is a NoneType, not an object or a list`,
		`default=1`:     `response.json: default= is for a path`,
		`"order.#"`:     `response.json: a path cannot end in #`,
		`"posts.#.id"`:  `#: the value at "posts" is a dict, not a list`,
	} {
		rec, out := runAction(t, "def act(user):\n    user.http.get('/page').json("+path+")\n", d)
		last := (*rec)[len(*rec)-1]
		if out != metrics.Failed || !strings.Contains(last.Message, want) {
			t.Errorf("json(%s): outcome %v, message %q; want %q", path, out, last.Message, want)
		}
	}
	// A body that is not JSON is refused with a path too, as without one.
	rec, out = runAction(t, "def act(user):\n    user.http.get('/x').json('a')\n", &fakeDoer{status: 200, body: `{"a": 1, "b": tru}`})
	if last := (*rec)[len(*rec)-1]; out != metrics.Failed || !strings.Contains(last.Message, "status 200 body is not JSON (at offset") {
		t.Errorf("broken body: outcome %v, message %q", out, last.Message)
	}
}

func TestRequestArgumentMistakesFailTheAction(t *testing.T) {
	for src, want := range map[string]string{
		"def act(user):\n    user.http.get(42)\n":                       "URL is a int, want a string",
		"def act(user):\n    user.http.get('/x', jsn={})\n":             "unexpected keyword argument jsn=",
		"def act(user):\n    user.http.get('/x', '/y')\n":               "got 2 positional arguments",
		"def act(user):\n    user.http.post('/x', json={}, body='b')\n": "give json= or body=, not both",
		"def act(user):\n    user.http.get('/x', headers=[1])\n":        "headers= is a list, want a dict",
		"def act(user):\n    user.http.get('/x', expect='200')\n":       "expect= is a string",
		"def act(user):\n    user.http.get('/x', timeout='soon')\n":     "bad duration",
		"def act(user):\n    user.http.get('/x').json()\n":              "body is not JSON",
		"def act(user):\n    user.http.get('/x', long_poll=1)\n":        "long_poll= is a int, want True or False",
	} {
		d := &fakeDoer{status: 200, body: "not json"}
		rec, out := runAction(t, src, d)
		last := (*rec)[len(*rec)-1]
		if out != metrics.Failed || last.Kind != metrics.Action || !strings.Contains(last.Message, want) {
			t.Errorf("%q: outcome %v, message %q; want %q", src, out, last.Message, want)
		}
		if !strings.HasPrefix(last.Message, "u.star:2:") {
			t.Errorf("%q: message %q does not name the line", src, last.Message)
		}
	}
}

// TestLongPollIsAPollSample: long_poll=True files the request as a metrics.Poll (time waited, not
// served); it still counts as a request of the action, and a failed one still fails it.
func TestLongPollIsAPollSample(t *testing.T) {
	d := &fakeDoer{status: 200}
	rec, out := runAction(t, `
def act(user):
    user.http.get("/sync?timeout=30000", name="GET /sync", long_poll=True)
    user.http.request("POST", "/events", name="POST /events", long_poll=True, expect=204)
    user.http.get("/plain", long_poll=False)
`, d)
	if out != metrics.Failed { // POST /events answered 200, not 204
		t.Errorf("action outcome %v, want failed by POST /events", out)
	}
	kinds := map[string]metrics.Kind{}
	for _, s := range *rec {
		kinds[s.Name] = s.Kind
	}
	if kinds["GET /sync"] != metrics.Poll || kinds["POST /events"] != metrics.Poll || kinds["GET /plain"] != metrics.Request {
		t.Errorf("kinds %v, want the two long polls Poll and GET /plain Request", kinds)
	}
	if act := (*rec)[len(*rec)-1]; act.Kind != metrics.Action || act.Requests != 3 {
		t.Errorf("action sample %+v, want an action of 3 requests", act)
	}
}

func TestUnexpectedStatusFailsTheActionButItGoesOn(t *testing.T) {
	d := &fakeDoer{status: 503}
	rec, out := runAction(t, `
def act(user):
    r = user.http.get("/a", name="a")
    user.state["after"] = r.status
    user.http.get("/b", name="b", expect=503)
`, d)
	if out != metrics.Failed || len(d.sent) != 2 {
		t.Fatalf("outcome %v after %d requests", out, len(d.sent))
	}
	var a, b metrics.Sample
	for _, s := range *rec {
		switch s.Name {
		case "a":
			a = s
		case "b":
			b = s
		}
	}
	if a.Outcome != metrics.Failed || a.Status != 503 || b.Outcome != metrics.OK {
		t.Errorf("a %+v b %+v", a, b)
	}
}

// TestReadingTheBodyDoesNotCopyIt: r.text of a large body is a view of the
// response, not a second copy of it.
func TestReadingTheBodyDoesNotCopyIt(t *testing.T) {
	d := &fakeDoer{status: 200, body: strings.Repeat("x", 8<<20)}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, out := runAction(t, `
def act(user):
    r = user.http.get("/big")
    if len(r.text) != 8 * 1024 * 1024 or r.text[:3] != "xxx":
        fail("bad text")
`, d)
	runtime.ReadMemStats(&after)
	if out != metrics.OK {
		t.Fatalf("outcome %v", out)
	}
	// the fake server's own copy of the body is 8 MiB; a copy for r.text would double it
	if got := after.TotalAlloc - before.TotalAlloc; got > 12<<20 {
		t.Errorf("reading an 8 MiB body allocated %d MiB", got>>20)
	}
}

func TestActionSamplesCountTheirRequests(t *testing.T) {
	// An action's sample says how many requests it sent: EditPost with no
	// post yet sends none, and a request refused before sending (a CR in a
	// header) is not one.
	for _, tc := range []struct {
		name, body string
		want       int
	}{
		{"two", "    user.http.get('/a')\n    user.http.post('/b', expect=201)\n", 2}, // the second fails: still sent
		{"none", "    if 'post' in user.state:\n        user.http.put('/posts/1')\n", 0},
		{"refused", "    user.http.get('/a', headers={'X': 'a\\r\\nb'})\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, _ := runAction(t, "def act(user):\n"+tc.body, &fakeDoer{status: 200})
			if got := (*rec)[len(*rec)-1]; got.Kind != metrics.Action || got.Requests != tc.want {
				t.Errorf("action sample %+v, want %d requests", got, tc.want)
			}
		})
	}
}
