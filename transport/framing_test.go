//go:build unix

package transport

import (
	"bytes"
	"context"
	"net"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mccutchen/go-httpbin/v2/httpbin"
)

// TestEveryFramingOnOneConnection sends responses of each framing over one
// kept-alive connection: the parser must end each exactly where it ends,
// or the next request would read the rest of the last.
func TestEveryFramingOnOneConnection(t *testing.T) {
	u, conns := server(t, httpbin.New().Handler())
	c := NewClient(Options{Target: u})
	defer c.Close()
	do := func(method, path string, body []byte) Response {
		t.Helper()
		var r Response
		c.Do(&Request{Method: method, URL: path, Body: body}, &r)
		if r.Err != nil {
			t.Fatalf("%s %s: %v", method, path, r.Err)
		}
		return r
	}
	if r := do("GET", "/stream/3", nil); r.Status != 200 || bytes.Count(r.Body, []byte("\n")) != 3 ||
		!strings.Contains(strings.ToLower(string(r.RawHeader)), "transfer-encoding: chunked") {
		t.Errorf("chunked: status %d, %d lines, head %q", r.Status, bytes.Count(r.Body, []byte("\n")), r.RawHeader)
	}
	if r := do("GET", "/bytes/300000", nil); r.Status != 200 || len(r.Body) != 300000 {
		t.Errorf("large body: status %d, %d bytes, want 300000", r.Status, len(r.Body))
	}
	if r := do("HEAD", "/get", nil); r.Status != 200 || len(r.Body) != 0 {
		t.Errorf("HEAD: status %d, %d body bytes", r.Status, len(r.Body))
	}
	if r := do("GET", "/status/204", nil); r.Status != 204 || len(r.Body) != 0 {
		t.Errorf("204: status %d, %d body bytes", r.Status, len(r.Body))
	}
	big := bytes.Repeat([]byte("x"), 1<<20) // larger than a pooled buffer: written the ordinary way
	if r := do("POST", "/anything", big); r.Status != 200 || r.BytesOut < 1<<20 || !bytes.Contains(r.Body, []byte("eHh4eHh4")) /* base64 of x */ {
		t.Errorf("1 MiB POST: status %d, %d bytes out", r.Status, r.BytesOut)
	}
	if r := do("GET", "/get?after=all", nil); r.Status != 200 || !bytes.Contains(r.Body, []byte(`"after"`)) {
		t.Errorf("after the others: status %d body %.80s", r.Status, r.Body)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections, want the one kept alive", n)
	}
}

func TestBodyLargerThanTheLimitFails(t *testing.T) {
	u, _ := server(t, httpbin.New().Handler())
	c := NewClient(Options{Target: u, MaxBodySize: 1000})
	defer c.Close()
	var r Response
	c.Do(&Request{Method: "GET", URL: "/bytes/5000"}, &r)
	if r.Err == nil || !strings.Contains(r.Err.Error(), "larger than the limit") || r.Timeout {
		t.Errorf("5000-byte body with a 1000-byte limit: err %v timeout %v", r.Err, r.Timeout)
	}
	c.Do(&Request{Method: "GET", URL: "/bytes/500"}, &r)
	if r.Err != nil || len(r.Body) != 500 {
		t.Errorf("then a 500-byte body: err %v, %d bytes", r.Err, len(r.Body))
	}
}

// TestTimeoutFiresWithinOnePercent checks the deadline a kept-alive
// connection keeps between requests: a timeout fires no earlier than
// asked and at most 1% of it late. In virtual time, against go-httpbin in
// memory, so the 1% is checked as it is, with no slack for a busy machine.
func TestTimeoutFiresWithinOnePercent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt, _ := inMemory(t, httpbin.New().Handler())
		opt.Timeout = 500 * time.Millisecond
		c := NewClient(opt)
		defer c.Close()
		var r Response
		c.Do(&Request{Method: "GET", URL: "/get"}, &r) // sets the connection's deadline
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		time.Sleep(100 * time.Millisecond) // the deadline kept is now too early: it must move
		c.Do(&Request{Method: "GET", URL: "/delay/3"}, &r)
		if !r.Timeout || r.Latency < 500*time.Millisecond || r.Latency > 505*time.Millisecond {
			t.Errorf("timeout %v after %v, want a timeout at 500-505 ms", r.Timeout, r.Latency)
		}
		c.Do(&Request{Method: "GET", URL: "/delay/3", Timeout: 200 * time.Millisecond}, &r) // shorter: must move too
		if !r.Timeout || r.Latency < 200*time.Millisecond || r.Latency > 202*time.Millisecond {
			t.Errorf("per-request timeout %v after %v, want a timeout at 200-202 ms", r.Timeout, r.Latency)
		}
	})
}

func TestTLS(t *testing.T) {
	srv := httptest.NewTLSServer(httpbin.New().Handler())
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	c := NewClient(Options{Target: u, Settings: insecure(t)})
	defer c.Close()
	for _, path := range []string{"/get", "/stream/2", "/bytes/100000", "/get"} {
		var r Response
		c.Do(&Request{Method: "GET", URL: path}, &r)
		if r.Err != nil || r.Status != 200 {
			t.Fatalf("GET %s over TLS: status %d err %v", path, r.Status, r.Err)
		}
	}
	strict := NewClient(Options{Target: u})
	defer strict.Close()
	var r Response
	strict.Do(&Request{Method: "GET", URL: "/get"}, &r)
	if r.Err == nil || !strings.Contains(r.Err.Error(), "certificate") {
		t.Errorf("self-signed certificate without Insecure: %v", r.Err)
	}
}

// TestRequestLargerThanTheSocketBuffer makes the raw path's write stop
// half-way (tiny socket buffers, a server slow to read): the rest must go
// out the ordinary way and the response still be read.
func TestRequestLargerThanTheSocketBuffer(t *testing.T) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1) })
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	req := appendRequest(nil, "POST", "/", "x", nil, nil, nil, bytes.Repeat([]byte("y"), 8000), "") // fits a pooled buffer: the raw path
	size := len(req)
	got := make(chan int, 1)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		time.Sleep(100 * time.Millisecond) // let the client's buffer fill
		n := 0
		buf := make([]byte, 512)
		for n < size {
			k, err := s.Read(buf)
			if err != nil {
				break
			}
			n += k
			time.Sleep(time.Millisecond)
		}
		got <- n
		_, _ = s.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	}()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 1) })
	}}
	raw, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rc, _ := raw.(*net.TCPConn).SyscallConn()
	conn := &connection{Conn: raw, raw: rc}
	conn.onReady = conn.ready
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	wb := getBuf()
	*wb = append((*wb)[:0], req...)
	var p respParser
	p.reset(1<<20, false)
	var resp Response
	if err := rawTrip(conn, wb, &p, &resp, nil); err != nil {
		t.Fatal(err)
	}
	if n := <-got; n < len(req) || resp.BytesOut != int64(len(req)) || p.status != 200 {
		t.Errorf("server read %d bytes, client wrote %d of %d, status %d", n, resp.BytesOut, len(req), p.status)
	}
}

// TestCancelStopsTheDial: a user removed while its connection is still
// being set up (here a TLS handshake the server never answers) stops at
// once instead of at the timeout; and that handshake, left alone, is a
// timeout.
func TestCancelStopsTheDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // accepts, never answers
		}
	}()
	u, _ := url.Parse("https://" + ln.Addr().String())
	cancelMidway(t, NewClient(Options{Target: u, Timeout: 10 * time.Second, Settings: insecure(t)}), "/", "the handshake")

	c := NewClient(Options{Target: u, Timeout: 300 * time.Millisecond, Settings: insecure(t)})
	var r Response
	c.Do(&Request{Method: "GET", URL: "/"}, &r)
	if !r.Timeout || r.Latency > 2*time.Second {
		t.Errorf("unanswered handshake: timeout=%v after %v, err %v", r.Timeout, r.Latency, r.Err)
	}
}
