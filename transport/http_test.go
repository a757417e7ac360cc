package transport

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mccutchen/go-httpbin/v2/httpbin"
)

func server(t *testing.T, h http.Handler) (*url.URL, *atomic.Int64) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	conns := &atomic.Int64{}
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u, conns
}

func TestKeepAliveOneConnectionPerUser(t *testing.T) {
	u, conns := server(t, httpbin.New().Handler())
	c := NewClient(Options{Target: u})
	defer c.Close()
	for i := range 20 {
		var r Response
		c.Do(&Request{Method: "GET", URL: fmt.Sprintf("/get?i=%d", i)}, &r)
		if r.Err != nil || r.Status != 200 {
			t.Fatalf("request %d: status %d err %v", i, r.Status, r.Err)
		}
		if r.BytesIn <= int64(len(r.Body)) || r.BytesOut == 0 {
			t.Errorf("bytes in %d (body %d) out %d", r.BytesIn, len(r.Body), r.BytesOut)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("20 sequential requests opened %d connections, want 1 kept alive", n)
	}
	other := NewClient(Options{Target: u})
	defer other.Close()
	var r Response
	other.Do(&Request{Method: "GET", URL: "/get"}, &r)
	if n := conns.Load(); n != 2 {
		t.Errorf("a second user shares a connection: %d connections, want 2", n)
	}
}

// TestPreconnect: a user's connection opened before its first request
// (over HTTP/1.1 and over TLS with HTTP/2) carries it: no dial in the
// request, one connection in all; with a shared pool there is nothing to
// open.
func TestPreconnect(t *testing.T) {
	u, conns := server(t, httpbin.New().Handler())
	h2srv, h2conns, _ := h2Server(t)
	h2u, _ := url.Parse(h2srv.URL)
	for _, tc := range []struct {
		u     *url.URL
		conns *atomic.Int64
		set   *Settings
	}{{u, conns, nil}, {h2u, h2conns, insecure(t)}} {
		c := NewClient(Options{Target: tc.u, Settings: tc.set})
		defer c.Close()
		if err := c.Preconnect(); err != nil {
			t.Fatal(err)
		}
		var r Response
		c.Do(&Request{Method: "GET", URL: "/get"}, &r)
		if r.Err != nil || r.Phases.Dialed || tc.conns.Load() != 1 || r.HTTP2 != (tc.set != nil) {
			t.Errorf("%s after Preconnect: status %d, err %v, dialed %v, %d connections, HTTP/2 %v; want one connection, dialed before", tc.u.Scheme, r.Status, r.Err, r.Phases.Dialed, tc.conns.Load(), r.HTTP2)
		}
	}
	pool := NewPool(2)
	defer pool.Close()
	c := NewClient(Options{Target: u, Pool: pool})
	if err := c.Preconnect(); err != nil || pool.Open() != 0 {
		t.Errorf("Preconnect with a shared pool: %v, %d of its connections open; want none", err, pool.Open())
	}
}

func TestCookiesArePerUser(t *testing.T) {
	u, _ := server(t, httpbin.New().Handler())
	a, b := NewClient(Options{Target: u}), NewClient(Options{Target: u})
	var r Response
	a.Do(&Request{Method: "GET", URL: "/cookies/set?session=alice"}, &r)
	a.Do(&Request{Method: "GET", URL: "/cookies"}, &r)
	if !strings.Contains(string(r.Body), `"session": "alice"`) && !strings.Contains(string(r.Body), `"session":"alice"`) {
		t.Errorf("user a's cookie not sent back: %s", r.Body)
	}
	b.Do(&Request{Method: "GET", URL: "/cookies"}, &r)
	if strings.Contains(string(r.Body), "alice") {
		t.Errorf("user b sees user a's cookie: %s", r.Body)
	}
	a.Do(&Request{Method: "GET", URL: "/cookies/delete?session="}, &r)
	if _, ok := a.Cookies()["session"]; ok {
		t.Errorf("deleted cookie still kept: %v", a.Cookies())
	}

	// A client may start with cookies (a user's second connection): a copy.
	start := map[string]string{"session": "carol"}
	c := NewClient(Options{Target: u, Cookies: start})
	start["session"] = "mallory"
	c.Do(&Request{Method: "GET", URL: "/cookies"}, &r)
	if !strings.Contains(string(r.Body), "carol") {
		t.Errorf("the starting cookie not sent: %s", r.Body)
	}
}

func TestServerClosingIdleConnectionIsRetriedOnce(t *testing.T) {
	u, conns := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		fmt.Fprint(w, "ok")
	}))
	c := NewClient(Options{Target: u})
	var r Response
	c.Do(&Request{Method: "GET", URL: "/close"}, &r)
	c.Do(&Request{Method: "GET", URL: "/after"}, &r)
	if r.Err != nil || r.Status != 200 {
		t.Fatalf("after a Connection: close, next request failed: %v", r.Err)
	}
	if conns.Load() != 2 {
		t.Errorf("%d connections, want 2", conns.Load())
	}
}

func TestCancelStopsTheRequestInFlight(t *testing.T) {
	u, _ := server(t, httpbin.New().Handler())
	c := NewClient(Options{Target: u, Timeout: 10 * time.Second})
	cancelMidway(t, c, "/delay/5", "the request")
}

// cancelMidway sends GET path, cancels the client 200 ms later, and checks
// that the request ends canceled (not timed out) within 3 s.
func cancelMidway(t *testing.T, c *Client, path, what string) {
	t.Helper()
	done := make(chan Response)
	go func() {
		var r Response
		c.Do(&Request{Method: "GET", URL: path}, &r)
		done <- r
	}()
	time.Sleep(200 * time.Millisecond)
	c.Cancel()
	select {
	case r := <-done:
		if !r.Canceled || r.Timeout {
			t.Errorf("canceled during %s: canceled=%v timeout=%v err=%v", what, r.Canceled, r.Timeout, r.Err)
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("Cancel did not stop %s within 3 s", what)
	}
}

func TestRefusedConnectionIsAnError(t *testing.T) {
	u, _ := url.Parse("http://127.0.0.1:1")
	c := NewClient(Options{Target: u, Timeout: time.Second})
	var r Response
	c.Do(&Request{Method: "GET", URL: "/"}, &r)
	if r.Err == nil || r.Timeout || r.Canceled || r.Status != 0 {
		t.Errorf("refused: err=%v timeout=%v canceled=%v status=%d", r.Err, r.Timeout, r.Canceled, r.Status)
	}
	c.Do(&Request{Method: "GET", URL: "ftp://x/"}, &r)
	if r.Err == nil || !strings.Contains(r.Err.Error(), "bad URL") {
		t.Errorf("bad scheme: %v", r.Err)
	}
}

// TestDefaultHeadersGoToTheTargetOriginOnly: a user's default headers (an
// Authorization token, say) reach the target and nothing else, not even
// the same host on another port; a request's own headers go wherever it
// goes.
func TestDefaultHeadersGoToTheTargetOriginOnly(t *testing.T) {
	seen := func() (*url.URL, *atomic.Value) {
		var got atomic.Value
		u, _ := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got.Store(r.Header.Get("Authorization") + "|" + r.Header.Get("X-Own"))
		}))
		return u, &got
	}
	target, atTarget := seen()
	other, atOther := seen()
	c := NewClient(Options{Target: target})
	defer c.Close()
	defaults := []Header{{"Authorization", "Bearer secret"}}
	for _, tc := range []struct {
		url  string
		seen *atomic.Value
		want string
	}{
		{"/x", atTarget, "Bearer secret|mine"},
		{target.String() + "/x", atTarget, "Bearer secret|mine"}, // the target's origin, spelled out
		{other.String() + "/x", atOther, "|mine"},                // same host, other port: another origin
	} {
		var r Response
		c.Do(&Request{Method: "GET", URL: tc.url, Header: []Header{{"X-Own", "mine"}}, Defaults: defaults}, &r)
		if r.Err != nil {
			t.Fatalf("%s: %v", tc.url, r.Err)
		}
		if got := tc.seen.Load(); got != tc.want {
			t.Errorf("%s: server saw Authorization|X-Own %q, want %q", tc.url, got, tc.want)
		}
	}
	var r Response // a request's own header overrides a default of the same name
	c.Do(&Request{Method: "GET", URL: "/x", Header: []Header{{"authorization", "Basic b3du"}}, Defaults: defaults}, &r)
	if got := atTarget.Load(); got != "Basic b3du|" {
		t.Errorf("override: server saw %q", got)
	}
}

// TestSourceAddress: a client given a local address connects from it.
func TestSourceAddress(t *testing.T) {
	var from atomic.Value
	u, _ := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		from.Store(host)
	}))
	for _, addr := range []string{"127.0.0.2", "127.0.0.3"} {
		c := NewClient(Options{Target: u, LocalAddr: netip.MustParseAddr(addr)})
		var r Response
		c.Do(&Request{Method: "GET", URL: "/"}, &r)
		c.Close()
		if r.Err != nil || from.Load() != addr {
			t.Errorf("LocalAddr %s: the server saw %v (err %v)", addr, from.Load(), r.Err)
		}
	}
}
