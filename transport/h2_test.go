package transport

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mccutchen/go-httpbin/v2/httpbin"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
)

// h2Server is go-httpbin over TLS with HTTP/2 on, /proto answering the
// protocol a request came over, /hang saying on hung that a request came
// and answering none; conns counts the connections it accepted.
func h2Server(t *testing.T) (srv *httptest.Server, conns *atomic.Int64, hung chan struct{}) {
	bin := httpbin.New().Handler()
	hung = make(chan struct{}, 1)
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/proto":
			w.Write([]byte(r.Proto))
		case "/hang":
			hung <- struct{}{}
			<-r.Context().Done()
		default:
			bin.ServeHTTP(w, r)
		}
	}))
	conns = new(atomic.Int64)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, conns, hung
}

// TestHTTP2 against go-httpbin over TLS: ALPN picks h2, a user's requests
// are streams on its one connection, and what HTTP/1.1 does works the same
// there: bodies both ways, redirects with cookies set on the way, gzip, the
// body limit, a timeout (the stream reset, the connection kept), Cancel.
func TestHTTP2(t *testing.T) {
	srv, conns, hung := h2Server(t)
	u, _ := url.Parse(srv.URL)
	c := NewClient(Options{Target: u, Settings: insecure(t), MaxBodySize: 64 << 10, Timeout: 5 * time.Second})
	defer c.Close()
	do := func(req Request) Response {
		t.Helper()
		var r Response
		c.Do(&req, &r)
		return r
	}
	for range 3 {
		if r := do(Request{Method: "GET", URL: "/proto"}); r.Err != nil || !r.HTTP2 || string(r.Body) != "HTTP/2.0" || r.BytesIn == 0 || r.BytesOut == 0 {
			t.Fatalf("GET /proto: %d %q, HTTP2 %v, %d bytes in, %d out, err %v", r.Status, r.Body, r.HTTP2, r.BytesIn, r.BytesOut, r.Err)
		}
	}
	r := do(Request{Method: "POST", URL: "/redirect-to?url=/anything&status_code=307", Body: []byte(`{"a":1}`), Header: []Header{{"Content-Type", "application/json"}}})
	var echo struct{ Method, Data string }
	if r.Err != nil || r.Redirects != 1 || json.Unmarshal(r.Body, &echo) != nil || echo.Method != "POST" || echo.Data != `{"a":1}` {
		t.Errorf("POST redirected by a 307: %d, %d redirects, %+v, err %v", r.Status, r.Redirects, echo, r.Err)
	}
	if r := do(Request{Method: "GET", URL: "/cookies/set?flavour=oat"}); r.Err != nil || r.Redirects != 1 || !strings.Contains(string(r.Body), `"flavour": "oat"`) {
		t.Errorf("a cookie set by a redirect over HTTP/2: %d %q, err %v", r.Status, clipBytes(r.Body, 200), r.Err)
	}
	if r := do(Request{Method: "GET", URL: "/gzip"}); r.Err != nil || !strings.Contains(string(r.Body), `"gzipped": true`) {
		t.Errorf("GET /gzip over HTTP/2: %d %q, err %v", r.Status, clipBytes(r.Body, 200), r.Err)
	}
	if r := do(Request{Method: "GET", URL: "/bytes/100000"}); r.Err == nil || !strings.Contains(r.Err.Error(), "larger than the limit") {
		t.Errorf("a body past the limit: %d, err %v", r.Status, r.Err)
	}
	if r := do(Request{Method: "GET", URL: "/delay/3", Timeout: 200 * time.Millisecond}); !r.Timeout || r.Latency < 200*time.Millisecond {
		t.Errorf("a slow response: timeout %v after %v, err %v", r.Timeout, r.Latency, r.Err)
	}
	if r := do(Request{Method: "GET", URL: "/proto"}); r.Err != nil || !r.HTTP2 {
		t.Errorf("after the timeout: %d, err %v", r.Status, r.Err)
	}
	if n := conns.Load(); n > 2 {
		t.Errorf("%d connections for one user's requests: want its one (a second after the body past the limit at most)", n)
	}
	go func() { <-hung; c.Cancel() }() // once the stream is open and waiting
	if r := do(Request{Method: "GET", URL: "/hang"}); !r.Canceled {
		t.Errorf("Cancel during a stream: canceled %v after %v, err %v", r.Canceled, r.Latency, r.Err)
	}
}

// TestHTTP1AndH2C: --http1 keeps to HTTP/1.1 where the server offers h2;
// --h2c speaks HTTP/2 with prior knowledge on an http:// target.
func TestHTTP1AndH2C(t *testing.T) {
	srv, _, _ := h2Server(t)
	u, _ := url.Parse(srv.URL)
	set, _ := Config{Insecure: true, HTTP1: true}.Settings()
	c := NewClient(Options{Target: u, Settings: set})
	defer c.Close()
	var r Response
	c.Do(&Request{Method: "GET", URL: "/proto"}, &r)
	if r.Err != nil || r.HTTP2 || string(r.Body) != "HTTP/1.1" {
		t.Errorf("HTTP1: %q, HTTP2 %v, err %v", r.Body, r.HTTP2, r.Err)
	}

	plain := httptest.NewServer(h2c.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(r.Proto)) }), &http2.Server{}))
	defer plain.Close()
	u, _ = url.Parse(plain.URL)
	set, _ = Config{H2C: true}.Settings()
	c = NewClient(Options{Target: u, Settings: set})
	defer c.Close()
	for range 2 {
		c.Do(&Request{Method: "GET", URL: "/"}, &r)
		if r.Err != nil || !r.HTTP2 || string(r.Body) != "HTTP/2.0" {
			t.Errorf("H2C: %q, HTTP2 %v, err %v", r.Body, r.HTTP2, r.Err)
		}
	}
	if _, err := (Config{HTTP1: true, H2C: true}).Settings(); err == nil {
		t.Error("HTTP1 and H2C together: no error")
	}
}

// An HTTP/2 response's head is kept as HTTP/1.1's is: a status line, a
// line a field value, a blank line; Set-Cookie lines are what the jar reads.
func TestH2Head(t *testing.T) {
	r := &http.Response{StatusCode: 404, Header: http.Header{"Set-Cookie": {"a=1", "b=2"}}}
	if got, want := string(h2Head(r)), "HTTP/2.0 404 Not Found\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n"; got != want {
		t.Errorf("head %q, want %q", got, want)
	}
	r.Header["Content-Type"] = []string{"text/plain"}
	got := parseHeaders(h2Head(r))
	if len(got) != 3 || !slices.Contains(got, Header{"Content-Type", "text/plain"}) || !slices.Contains(got, Header{"Set-Cookie", "b=2"}) {
		t.Errorf("fields read back %v, want the 3 given", got)
	}
}
