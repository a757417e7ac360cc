package scenario

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/transport"
)

// A CR or LF in a header, the method or the URL would end a line of the
// request on the wire: the request is refused, named, and never sent.
func TestRequestsThatWouldSplitOnTheWireAreRefused(t *testing.T) {
	for src, want := range map[string]string{
		// a token read from a response, trailing CRLF and all, then a smuggled request
		"    user.http.headers['X-Token'] = 'abcd\\r\\nContent-Length: 0\\r\\n\\r\\nGET /admin HTTP/1.1'\n    user.http.post('/x')\n": `http.post: header "X-Token" (from user.http.headers) value holds a CR (at byte 4): it would end the header and start another; strip it (e.g. .strip()) before sending`,
		"    user.http.get('/x', headers={'X-Token': 'abcde\\n'})\n":                                                                  `http.get: header "X-Token" value holds an LF (at byte 5): it would end the header and start another`,
		"    user.http.get('/x', headers={'X-A': 'a\\x00b'})\n":                                                                       `http.get: header "X-A" value holds a NUL byte (at byte 1)`,
		"    user.http.get('/x', headers={'X-A\\r\\nX-B': 'v'})\n":                                                                    `http.get: header name "X-A\r\nX-B" holds '\r' (at byte 3), which a name cannot`,
		"    user.http.get('/x', headers={'X A': 'v'})\n":                                                                             `http.get: header name "X A" holds ' ' (at byte 1)`,
		"    user.http.get('/x', headers={'': 'v'})\n":                                                                                `http.get: a header has an empty name`,
		"    user.http.headers['X:Y'] = 'v'\n    user.http.get('/x')\n":                                                               `http.get: header name "X:Y" (from user.http.headers) holds ':' (at byte 1)`,
		"    user.http.request('GET /admin HTTP/1.1\\r\\nX: y\\r\\n\\r\\nGET', '/x')\n":                                               `http.request: method "GET /ADMIN HTTP/1.1\r\nX: Y\r\n\r\nGET" holds ' ' (at byte 3): a method is one word of letters`,
		"    user.http.request('', '/x')\n":                                                                                           `http.request: the method is empty`,
		"    user.http.get('/x\\r\\nHost: evil')\n":                                                                                   `http.get: URL "/x\r\nHost: evil" holds a CR (at byte 2); strip it`,
		"    user.http.get('/x\\x00')\n":                                                                                              `http.get: URL "/x\x00" holds a NUL byte (at byte 2)`,
	} {
		d := &fakeDoer{status: 200}
		rec, out := runAction(t, "def act(user):\n"+src, d)
		msg := last(rec).Message
		if out != metrics.Failed || !strings.Contains(msg, want) {
			t.Errorf("%s: outcome %v, message\n  %q\nwant it to hold\n  %q", src, out, msg, want)
		}
		if len(d.sent) != 0 {
			t.Errorf("%s: %d requests were sent", src, len(d.sent))
		}
	}
}

func TestOrdinaryHeadersPass(t *testing.T) {
	d := &fakeDoer{status: 200}
	rec, out := runAction(t, `
def act(user):
    user.http.headers["Authorization"] = "Bearer abc.def-ghi_jkl~=="
    user.http.request("m-search", "/x?q=a b", headers={"X-Weird!#$%&'*+-.^_|~1": "tab\there, \"quotes\", ünïcödé"})
`, d)
	if out != metrics.OK || len(d.sent) != 1 || d.sent[0].Method != "M-SEARCH" {
		t.Fatalf("outcome %v (%+v), %d sent", out, *rec, len(d.sent))
	}
}

// Against a real server, over headroom's own transport: the server sees
// the clean request, and only it, never the one a token tried to smuggle.
func TestASmuggledRequestNeverReachesTheServer(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
	}))
	defer srv.Close()
	target, _ := url.Parse(srv.URL)
	client := transport.NewClient(transport.Options{Target: target, Timeout: 5 * time.Second})
	defer client.Close()

	sc, err := load("w.star", `
TOKEN = "abc\r\n\r\nGET /admin HTTP/1.1\r\nHost: x\r\n\r\n"  # as a response might hand it over
def bad(user):
    user.http.headers["X-Token"] = TOKEN
    user.http.get("/first")
def good(user):
    user.http.headers["X-Token"] = TOKEN.split("\r")[0]
    user.http.get("/second")
actions = [action("Bad", bad), action("Good", good)]
`)
	if err != nil {
		t.Fatal(err)
	}
	rec := &samples{}
	u := NewUser(sc, Env{ID: 1, Seed: 1, HTTP: client, Record: rec})
	if out := u.Run(sc.Actions[0]); out != metrics.Failed || !strings.Contains(last(rec).Message, `header "X-Token" (from user.http.headers) value holds a CR (at byte 3)`) {
		t.Errorf("outcome %v, message %q", out, last(rec).Message)
	}
	if out := u.Run(sc.Actions[1]); out != metrics.OK {
		t.Errorf("the clean request: %v %q", out, last(rec).Message)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ", ") != "GET /second" {
		t.Errorf("the server saw %q, want only GET /second", seen)
	}
}
