// Package transport sends a user's requests. Each user has its own
// keep-alive connection to the target, as a browser has, so connection
// counts, handshakes and per-connection server work match real users; an
// idle user holds only its socket (buffers come from a shared pool while a
// request is in flight). It speaks HTTP/1.1 itself (wire.go), so that a
// request costs one write, one read and one copy of the response.
//
// Latency is measured from the start of the request (including a dial,
// when one is needed) to the end of the response body.
package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Header is one header line.
type Header struct{ Key, Value string }

// Request is one HTTP request. URL is absolute, or a path ("/api/x") that
// is joined to the target.
type Request struct {
	Method string
	URL    string
	Header []Header // the request's own headers: sent wherever it goes
	// Defaults are the user's default headers (an Authorization, say): sent
	// only when the request goes to the target's origin (scheme, host and
	// port), as cookies are, so a token never leaks to another host. Header
	// entries of the same name override them.
	Defaults []Header
	Body     []byte
	Timeout  time.Duration // 0 means the client's default
}

// Response is what came back. When Err is set no complete response
// arrived; Timeout and Canceled tell why, when they are the reason.
type Response struct {
	Status    int
	RawHeader []byte // the status line and headers, as serialized; see Headers
	Body      []byte // the caller's: the client never writes to it again (it may be viewed as a string without copying)
	Latency   time.Duration
	BytesIn   int64 // bytes read from the connection for this request
	BytesOut  int64 // bytes written
	Err       error
	Timeout   bool
	Canceled  bool
}

// Headers parses RawHeader into header lines, in order. It is done on
// demand: most scenarios never look at most responses' headers.
func (r *Response) Headers() []Header { return parseHeaders(r.RawHeader) }

func parseHeaders(head []byte) []Header {
	var out []Header
	lines := bytes.Split(head, []byte("\r\n"))
	for i, l := range lines {
		if i == 0 || len(l) == 0 { // the status line; the blank end
			continue
		}
		k, v, ok := bytes.Cut(l, []byte(":"))
		if !ok {
			continue
		}
		out = append(out, Header{Key: string(k), Value: string(bytes.TrimSpace(v))})
	}
	return out
}

// Options configure clients.
type Options struct {
	Target      *url.URL      // where paths go; scheme http or https
	Timeout     time.Duration // default per-request timeout, dial included
	Insecure    bool          // skip TLS certificate checks
	MaxBodySize int           // bytes; larger responses fail; default 64 MiB
	// LocalAddr, if valid, is the source address of the user's
	// connections: one address holds only so many connections to one
	// target (its ephemeral ports), so a large run spreads its users over
	// several (any 127.x.y.z reaches a loopback target).
	LocalAddr netip.Addr
	Now       func() time.Time
}

// ErrCanceled is the error of a request stopped by Cancel.
var ErrCanceled = errors.New("request canceled: user stopped")

// Client sends one user's requests over that user's own connections: one
// kept alive to the target, and one per other host it visits. Do must be
// called from one goroutine at a time; Cancel and Close from any.
type Client struct {
	opt      Options
	jar      map[string]string // cookies of the target host
	mu       sync.Mutex
	conns    map[string]*connection // by host:port
	busy     *connection
	canceled atomic.Bool
	dialing  context.CancelFunc // stops the dial in flight, if any
	parser   respParser         // the response being read; Do's alone

	targetAddr string // host:port of the target: its origin, with targetTLS
	targetTLS  bool
	basePath   string // the target URL's path, prefixed to request paths
}

// NewClient returns a client for one user.
func NewClient(opt Options) *Client {
	if opt.MaxBodySize <= 0 {
		opt.MaxBodySize = 64 << 20
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 10 * time.Second
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	c := &Client{opt: opt}
	c.targetAddr, c.targetTLS = hostPort(opt.Target)
	c.basePath = strings.TrimSuffix(opt.Target.Path, "/")
	return c
}

// Do sends req and fills resp. It never panics on network trouble: errors
// end up in resp.Err.
//
// A request that may have reached the server is sent again only when its
// method is idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE, or any
// request with an Idempotency-Key header), and only once, when a
// kept-alive connection failed before any response byte: a POST the
// server read and then dropped is an error, as in browsers. A connection
// idle for probeIdle or more is checked before reuse, so one the server
// closed meanwhile is replaced without sending anything on it.
func (c *Client) Do(req *Request, resp *Response) {
	*resp = Response{}
	start := c.opt.Now()
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = c.opt.Timeout
	}
	deadline := start.Add(timeout)

	if err := checkRequest(req); err != nil {
		resp.Err = err
		return
	}
	addr, isTLS, serverName, host, uri, err := c.route(req)
	if err != nil {
		resp.Err = err
		return
	}
	var jar map[string]string
	if host == c.opt.Target.Host {
		jar = c.jar
	}
	var defaults []Header
	if addr == c.targetAddr && isTLS == c.targetTLS {
		defaults = req.Defaults
	}
	// Buffers are taken from the pool only while bytes move: a user
	// waiting for a dial or a slow response holds none.
	p := &c.parser
	defer c.release()
	var conn *connection
	for attempt := 0; ; attempt++ {
		var reused bool
		conn, reused, err = c.conn(addr, isTLS, serverName, start, deadline)
		if err != nil {
			c.fail(resp, err, start)
			return
		}
		wb := getBuf()
		*wb = appendRequest((*wb)[:0], req.Method, uri, host, defaults, req.Header, jar, req.Body)
		p.reset(c.opt.MaxBodySize, req.Method == "HEAD")
		err = c.roundTrip(conn, wb, p, deadline, timeout, resp)
		if err != nil {
			c.drop(addr, conn)
			// A kept-alive connection the server closed meanwhile fails
			// before any response byte: send again, once, on a new one,
			// if sending twice cannot do harm.
			if reused && attempt == 0 && resp.BytesIn == 0 && retryable(err) && !c.canceled.Load() &&
				(resp.BytesOut == 0 || idempotent(req)) {
				continue
			}
			c.fail(resp, err, start)
			return
		}
		if p.close {
			c.drop(addr, conn)
		}
		break
	}
	end := c.opt.Now()
	conn.used = end
	resp.Latency = end.Sub(start)
	if end.After(deadline.Add(timeout / 100)) {
		// Complete, but past the timeout (a connect the kernel held, a
		// response that finished as the deadline fired): a timeout, as
		// documented, whatever arrived.
		c.fail(resp, os.ErrDeadlineExceeded, start)
		return
	}
	resp.Status = p.status
	resp.RawHeader, resp.Body = p.result()
	if p.cookies && host == c.opt.Target.Host {
		c.keepCookies(resp.RawHeader)
	}
}

// idempotent reports whether req may be sent twice without harm (RFC 9110
// 9.2.2, and the Idempotency-Key convention).
func idempotent(req *Request) bool {
	switch req.Method {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	for _, h := range req.Header {
		if strings.EqualFold(h.Key, "Idempotency-Key") || strings.EqualFold(h.Key, "X-Idempotency-Key") {
			return true
		}
	}
	return false
}

// ErrBadRequest is the error of a request that cannot be written as
// HTTP/1.1: a CR, LF or NUL in its method, a header name or value, or a
// method or header name that is not a token.
var ErrBadRequest = errors.New("request cannot be sent")

// checkRequest refuses a request whose bytes would change its framing on
// the wire (header injection, request smuggling). Scenarios check the
// same before they get here, with a better message; this is the last
// line. The path needs no check: appendURI escapes control bytes.
func checkRequest(req *Request) error {
	if !isToken(req.Method) {
		return fmt.Errorf("%w: method %q is not an HTTP token", ErrBadRequest, req.Method)
	}
	for _, hs := range [2][]Header{req.Defaults, req.Header} {
		for _, h := range hs {
			if !isToken(h.Key) {
				return fmt.Errorf("%w: header name %q is not an HTTP token", ErrBadRequest, h.Key)
			}
			if strings.ContainsAny(h.Value, "\r\n\x00") {
				return fmt.Errorf("%w: header %q holds a CR, LF or NUL", ErrBadRequest, h.Key)
			}
		}
	}
	return nil
}

// isToken reports whether s is a non-empty RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// release returns the response buffer to the pool.
func (c *Client) release() {
	if c.parser.buf != nil {
		putBuf(c.parser.buf)
	}
	c.parser = respParser{}
}

// route returns where req goes: host:port, whether TLS, the server name,
// the Host header and the request target. A path goes to the target
// without parsing a URL.
func (c *Client) route(req *Request) (addr string, isTLS bool, serverName, host, uri string, err error) {
	if strings.HasPrefix(req.URL, "/") {
		t := c.opt.Target
		uri = req.URL
		if c.basePath != "" {
			uri = c.basePath + req.URL
		}
		return c.targetAddr, c.targetTLS, t.Hostname(), t.Host, uri, nil
	}
	u, perr := url.Parse(req.URL)
	if perr != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", false, "", "", "", fmt.Errorf("bad URL %q: want a path like /api/x or an http(s) URL", req.URL)
	}
	addr, isTLS = hostPort(u)
	return addr, isTLS, u.Hostname(), u.Host, u.RequestURI(), nil
}

// roundTrip sends the serialized request in wb on conn, returning wb to
// the pool once written, and reads the response into p, counting bytes
// into resp.
//
// The connection's deadline is kept when it already lies between this
// request's deadline and 1% of the timeout after it: a keep-alive user then
// changes its timers about once per 1% of the timeout rather than on every
// request, and a timeout fires at most 1% late.
func (c *Client) roundTrip(conn *connection, wb *[]byte, p *respParser, deadline time.Time, timeout time.Duration, resp *Response) error {
	if conn.deadline.Before(deadline) || conn.deadline.Sub(deadline) > timeout/100 {
		d := deadline.Add(timeout / 100)
		if err := conn.SetDeadline(d); err != nil {
			putBuf(wb)
			return err
		}
		conn.deadline = d
	}
	if c.canceled.Load() { // Cancel may have set its past deadline before ours replaced it
		putBuf(wb)
		return ErrCanceled
	}
	if conn.raw != nil && len(*wb) <= bufSize {
		return rawTrip(conn, wb, p, resp, &c.canceled)
	}
	n, err := conn.Write(*wb)
	putBuf(wb)
	resp.BytesOut += int64(n)
	if err != nil {
		return err
	}
	for {
		n, err := conn.Read(p.space())
		resp.BytesIn += int64(n)
		eof := errors.Is(err, io.EOF)
		if err != nil && !eof {
			return err
		}
		done, perr := p.advance(n, eof)
		if perr != nil || done {
			return perr
		}
	}
}

// rawTrip is roundTrip on a plain TCP connection, driven by readiness as
// an event loop is: the request is written from inside RawConn.Read's
// callback, after the runtime has reset the socket's read readiness, and
// the callback then waits for the response instead of trying a read that
// would only find the socket empty. One write and (for a small response)
// one read per request, and no allocation.
func rawTrip(conn *connection, wb *[]byte, p *respParser, resp *Response, stop *atomic.Bool) error {
	t := &conn.trip
	*t = trip{wb: wb, p: p, resp: resp, deadline: conn.deadline, stop: stop}
	defer t.end()
	for {
		if err := conn.raw.Read(conn.onReady); err != nil {
			return err
		}
		if t.err != nil || t.done {
			return t.err
		}
		n, err := conn.Write((*t.wb)[t.sent:]) // only after the socket's buffer was full
		t.sent += n
		resp.BytesOut += int64(n)
		if err != nil {
			return err
		}
		t.written()
	}
}

// trip is the state of one rawTrip, kept in its connection so that the
// callback is a method value made once per connection.
type trip struct {
	wb       *[]byte // the request until it is written, then nil
	sent     int
	p        *respParser
	resp     *Response
	deadline time.Time    // the connection's: the poller enforces it only while the callback waits
	stop     *atomic.Bool // the client's canceled flag; nil: none
	done     bool
	err      error
}

// written returns the request's buffer once it is all sent.
func (t *trip) written() {
	putBuf(t.wb)
	t.wb = nil
}

func (t *trip) end() {
	if t.wb != nil {
		putBuf(t.wb)
	}
	*t = trip{}
}

// ready is RawConn.Read's callback for rawTrip: true ends the trip (or
// hands a partial write back to rawTrip), false waits for readiness.
func (c *connection) ready(fd uintptr) bool {
	t := &c.trip
	if t.wb != nil {
		for req := *t.wb; t.sent < len(req); {
			n, err := syscall.Write(int(fd), req[t.sent:])
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
				return true // the socket's buffer is full: finish with a blocking write
			case err != nil:
				t.err = os.NewSyscallError("write", err)
				return true
			}
			t.sent += n
			t.resp.BytesOut += int64(n)
		}
		t.written()
		return false // wait until the response starts to arrive
	}
	for {
		n, err := syscall.Read(int(fd), t.p.space())
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return false
		case err != nil:
			t.err = os.NewSyscallError("read", err)
			return true
		}
		t.resp.BytesIn += int64(n)
		t.done, t.err = t.p.advance(n, n == 0)
		if t.done || t.err != nil {
			return true
		}
		// More is coming without a pause: the poller, which enforces the
		// deadline and Cancel, is not consulted until the socket is
		// drained, so check both here (a server streaming without end).
		if t.stop != nil && t.stop.Load() {
			t.err = ErrCanceled
			return true
		}
		if !time.Now().Before(t.deadline) {
			t.err = os.ErrDeadlineExceeded
			return true
		}
	}
}

// probeIdle is how long a kept-alive connection may sit unused before it
// is checked (one non-blocking peek) for a close or stray bytes from the
// server before the next request goes on it.
const probeIdle = 100 * time.Millisecond

// conn returns the user's connection to addr, dialing if it has none (or
// if the one it has was closed by the server while idle).
func (c *Client) conn(addr string, isTLS bool, serverName string, now, deadline time.Time) (*connection, bool, error) {
	if c.canceled.Load() {
		return nil, false, ErrCanceled
	}
	c.mu.Lock()
	conn := c.conns[addr]
	c.busy = conn
	c.mu.Unlock()
	if conn != nil {
		if now.Sub(conn.used) < probeIdle || conn.alive() {
			return conn, true, nil
		}
		c.drop(addr, conn)
	}
	raw, err := c.dial(addr, isTLS, serverName, deadline)
	if err != nil {
		return nil, false, err
	}
	if !c.opt.Now().Before(deadline) { // connected, but too late (a connect the kernel held)
		raw.Close()
		return nil, false, os.ErrDeadlineExceeded
	}
	conn = &connection{Conn: raw, used: now}
	if tc, ok := raw.(*net.TCPConn); ok {
		if rc, err := tc.SyscallConn(); err == nil {
			conn.raw, conn.onReady = rc, conn.ready
		}
	}
	c.mu.Lock()
	if c.conns == nil {
		c.conns = map[string]*connection{}
	}
	c.conns[addr] = conn
	c.busy = conn
	c.mu.Unlock()
	if c.canceled.Load() { // Cancel ran while we dialed
		return nil, false, ErrCanceled
	}
	return conn, false, nil
}

// alive peeks at an idle connection without blocking: false when the
// server closed or reset it, or sent bytes no request asked for (the
// connection is then out of step). TLS connections are peeked at below
// TLS: any record from the server (a close_notify, say) counts as stray.
func (conn *connection) alive() bool {
	rc := conn.raw
	if rc == nil {
		tc, ok := conn.Conn.(*tls.Conn)
		if !ok {
			return true
		}
		sc, ok := tc.NetConn().(syscall.Conn)
		if !ok {
			return true
		}
		var err error
		if rc, err = sc.SyscallConn(); err != nil {
			return true
		}
	}
	alive := true
	var b [1]byte
	err := rc.Control(func(fd uintptr) {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = n < 0 && (err == syscall.EAGAIN || err == syscall.EINTR)
	})
	return alive && err == nil
}

// dial connects to addr (and does the TLS handshake) on a goroutine of
// its own. Name resolution, connect and handshake need deep stacks (Go's
// DNS client alone over 6 KB): run on the user's goroutine they would
// double its stack for good, while this goroutine's stack is freed when
// it ends. See docs/BENCHMARKS.md, memory per idle user.
func (c *Client) dial(addr string, isTLS bool, serverName string, deadline time.Time) (net.Conn, error) {
	type dialed struct {
		conn net.Conn
		err  error
	}
	// Cancel stops a dial in flight through its context.
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	c.mu.Lock()
	c.dialing = cancel
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.dialing = nil
		c.mu.Unlock()
	}()
	if c.canceled.Load() { // Cancel ran before the dial could be stopped
		return nil, ErrCanceled
	}
	done := make(chan dialed, 1)
	insecure := c.opt.Insecure
	local := c.opt.LocalAddr
	go func() {
		var d net.Dialer
		if local.IsValid() {
			d.LocalAddr = &net.TCPAddr{IP: local.AsSlice()}
			d.Control = bindNoPort
		}
		raw, err := d.DialContext(ctx, "tcp", addr)
		if err == nil && isTLS {
			tc := tls.Client(raw, &tls.Config{ServerName: serverName, InsecureSkipVerify: insecure})
			if err = tc.HandshakeContext(ctx); err != nil {
				raw.Close()
			}
			raw = tc
		}
		done <- dialed{raw, err}
	}()
	r := <-done
	return r.conn, r.err
}

// bindNoPort lets a socket bound to a source address take its port at
// connect time (IP_BIND_ADDRESS_NO_PORT), as an unbound one does: the
// port then need only be free towards that destination, so one address
// serves every target with its whole port range.
func bindNoPort(_, _ string, rc syscall.RawConn) error {
	const ipBindAddressNoPort = 24 // linux/in.h
	return rc.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, ipBindAddressNoPort, 1)
	})
}

func (c *Client) drop(addr string, conn *connection) {
	c.mu.Lock()
	if c.conns[addr] == conn {
		delete(c.conns, addr)
	}
	if c.busy == conn {
		c.busy = nil
	}
	c.mu.Unlock()
	conn.Close()
}

func (c *Client) fail(resp *Response, err error, start time.Time) {
	resp.Latency = c.opt.Now().Sub(start)
	switch {
	case c.canceled.Load():
		resp.Canceled, resp.Err = true, ErrCanceled
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		resp.Timeout, resp.Err = true, fmt.Errorf("timeout after %v", resp.Latency.Round(time.Millisecond))
	default:
		resp.Err = err
	}
}

// Cancel stops the request in flight, if any, and every later one: they
// end with Canceled set. Safe to call from any goroutine.
func (c *Client) Cancel() {
	c.canceled.Store(true)
	c.mu.Lock()
	if c.busy != nil {
		_ = c.busy.SetDeadline(time.Unix(1, 0))
	}
	if c.dialing != nil {
		c.dialing()
	}
	c.mu.Unlock()
}

// Close closes the user's connections.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, conn := range c.conns {
		conn.Close()
		delete(c.conns, k)
	}
}

// Cookies returns the cookies kept for the target host.
func (c *Client) Cookies() map[string]string { return c.jar }

// keepCookies applies a response's Set-Cookie headers to the jar: a new
// value replaces the old, an expired cookie is deleted.
func (c *Client) keepCookies(head []byte) {
	for _, h := range parseHeaders(head) {
		if !strings.EqualFold(h.Key, "Set-Cookie") {
			continue
		}
		ck, err := http.ParseSetCookie(h.Value)
		if err != nil {
			continue
		}
		if ck.MaxAge < 0 || (!ck.Expires.IsZero() && ck.Expires.Before(c.opt.Now())) {
			delete(c.jar, ck.Name)
			continue
		}
		if c.jar == nil {
			c.jar = map[string]string{}
		}
		c.jar[ck.Name] = ck.Value
	}
}

func hostPort(u *url.URL) (string, bool) {
	isTLS := u.Scheme == "https"
	if u.Port() != "" {
		return u.Host, isTLS
	}
	if isTLS {
		return net.JoinHostPort(u.Hostname(), "443"), true
	}
	return net.JoinHostPort(u.Hostname(), "80"), false
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// retryable reports whether err says the server closed the connection
// (rather than answered badly or too slowly).
func retryable(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}

// connection is one kept-alive connection.
type connection struct {
	net.Conn
	raw      syscall.RawConn // plain TCP: the socket, for rawTrip; nil for TLS
	onReady  func(fd uintptr) bool
	trip     trip
	deadline time.Time // the deadline last set on it
	used     time.Time // when it was dialed or last finished a request
}
