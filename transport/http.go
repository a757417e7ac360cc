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
	"maps"
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
	Timeout  time.Duration // 0 means the client's default; with redirects, for them all
	// NoRedirect: a 3xx is the response. By default up to MaxRedirects are
	// followed (redirect.go).
	NoRedirect bool
}

// Response is what came back. When Err is set no complete response
// arrived (or its body could not be decoded); Timeout and Canceled tell
// why, when they are the reason. A compressed body (Content-Encoding gzip,
// deflate, br or zstd) is decoded: Body is what the server meant, BytesIn
// what crossed the wire.
type Response struct {
	Status    int
	RawHeader []byte // the status line and headers, as serialized; see Headers
	Body      []byte // the caller's: the client never writes to it again (it may be viewed as a string without copying)
	Latency   time.Duration
	// Queued is the part of Latency spent waiting for a connection of a
	// shared Pool to come free, before anything was sent.
	Queued   time.Duration
	BytesIn  int64 // bytes read from the connection for this request
	BytesOut int64 // bytes written
	Err      error
	Timeout  bool
	Canceled bool
	// Redirects is how many redirects were followed to this response; URL,
	// when there were any, is where it came from (absolute). Latency,
	// Queued and the bytes are then the sums over every hop.
	Redirects int
	URL       string
	// HTTP2: the response came over HTTP/2 (else HTTP/1.x).
	HTTP2 bool
	// Held is the part of Latency the response's last bytes waited in the
	// kernel, arrived, for headroom to read them: the generator's own delay
	// (a saturated core, a stall), not the target's. The kernel stamps each
	// segment as it arrives (SO_TIMESTAMPNS); plain HTTP/1.1 on Linux only,
	// 0 elsewhere and until the kernel stamps (a moment after a run's first
	// connection asks). With redirects, the last response's.
	Held time.Duration
	// Phases are where Latency went; with redirects, the sums over the hops.
	Phases Phases
}

// Phases are where a request's time went, as k6 splits it
// (http_req_connecting, tls_handshaking, waiting, receiving).
type Phases struct {
	// Dialed: the request made a new connection, and DNS (when its host
	// is a name), Connect and TLS (when it is https) are that
	// connection's. A request on a kept-alive connection made none.
	Dialed            bool
	DNS, Connect, TLS time.Duration
	// Wait is from sending the request to the response's first byte (the
	// time to first byte); Receive from that byte to the response's end.
	// Both 0 without a response.
	Wait, Receive time.Duration
}

// add adds o's durations to ph's: a redirect's hop.
func (ph *Phases) add(o Phases) {
	ph.Dialed = ph.Dialed || o.Dialed
	ph.DNS += o.DNS
	ph.Connect += o.Connect
	ph.TLS += o.TLS
	ph.Wait += o.Wait
	ph.Receive += o.Receive
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
	Target  *url.URL      // where paths go; scheme http or https
	Timeout time.Duration // default per-request timeout, dial included
	// Settings are the run's TLS and compression (Config.Settings); nil:
	// the defaults, Config{}'s.
	Settings    *Settings
	MaxBodySize int // bytes; larger responses fail; default 64 MiB
	// LocalAddr, if valid, is the source address of the user's
	// connections: one address holds only so many connections to one
	// target (its ephemeral ports), so a large run spreads its users over
	// several (any 127.x.y.z reaches a loopback target).
	LocalAddr netip.Addr
	// Cookies, if any, are the target host's cookies the client starts
	// with (copied): a second client of one user (a background lane) sends
	// the cookies the user held when it began.
	Cookies map[string]string
	Now     func() time.Time
	// Pool, if set, holds the connections to the target, shared with other
	// clients (the open model's --connections); nil: the client's own.
	Pool *Pool
	// Dial, if set, makes the connections to the target in place of TCP
	// (LocalAddr then unused): the seam where a test serves the target in
	// memory (net.Pipe), in virtual time (testing/synctest).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
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
	tls      *tls.Config        // the user's (Settings.userTLS), made at its first TLS connection
	stopH2   context.CancelFunc // ends the HTTP/2 stream in flight, if any
	accept   string             // Accept-Encoding sent unless a request sets its own; "" none

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
	if opt.Settings == nil {
		opt.Settings = defaults
	}
	c := &Client{opt: opt}
	if opt.Settings.compress {
		c.accept = acceptEncoding
	}
	if len(opt.Cookies) > 0 {
		c.jar = maps.Clone(opt.Cookies)
	}
	c.targetAddr, c.targetTLS = hostPort(opt.Target)
	c.basePath = strings.TrimSuffix(opt.Target.Path, "/")
	return c
}

// Do sends req and fills resp, following redirects unless req.NoRedirect
// (redirect.go). It never panics on network trouble: errors end up in
// resp.Err.
func (c *Client) Do(req *Request, resp *Response) {
	c.hop(req, resp)
	if !req.NoRedirect && resp.Err == nil && isRedirect(resp.Status) {
		c.follow(req, resp)
	}
}

// hop sends req and fills resp: one request, one response.
//
// A request that may have reached the server is sent again only when its
// method is idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE, or any
// request with an Idempotency-Key header), and only once, when a
// kept-alive connection failed before any response byte: a POST the
// server read and then dropped is an error, as in browsers. A connection
// idle for probeIdle or more is checked before reuse, so one the server
// closed meanwhile is replaced without sending anything on it.
func (c *Client) hop(req *Request, resp *Response) {
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
	a, err := c.aimAt(req)
	if err != nil {
		resp.Err = err
		return
	}
	// Buffers are taken from the pool only while bytes move: a user
	// waiting for a dial or a slow response holds none.
	p := &c.parser
	defer c.release()
	var conn *connection
	var sent time.Time
	for attempt := 0; ; attempt++ {
		var reused bool
		conn, reused, err = c.conn(a.addr, a.isTLS, a.serverName, start, deadline, resp)
		if err != nil {
			c.fail(resp, err, start)
			return
		}
		sent = start // a kept-alive connection, free at once: the request goes now (one clock read fewer a request)
		if resp.Phases.Dialed || resp.Queued > 0 || attempt > 0 {
			sent = c.opt.Now()
		}
		if conn.h2 != nil {
			if err = c.h2Trip(conn, req, &a, deadline.Add(timeout/100), resp); err != nil {
				if !c.canceled.Load() && h2Again(err, idempotent(req), reused, attempt) {
					continue
				}
				c.fail(resp, err, start)
				return
			}
			break
		}
		wb := getBuf()
		*wb = appendRequest((*wb)[:0], req.Method, a.uri, a.host, a.defaults, req.Header, a.jar, req.Body, c.accept)
		p.reset(c.opt.MaxBodySize, req.Method == "HEAD")
		err = c.roundTrip(conn, wb, p, deadline, timeout, resp)
		if err != nil {
			c.drop(a.addr, conn)
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
			c.drop(a.addr, conn)
		}
		break
	}
	c.finish(conn, resp, a.host, start, sent, deadline, timeout)
}

// finish ends a request whose response was read on conn: the connection
// freed, the latency, the status, head and body (decoded) in resp, cookies
// kept. A response complete past the timeout is a timeout.
func (c *Client) finish(conn *connection, resp *Response, host string, start, sent, deadline time.Time, timeout time.Duration) {
	p := &c.parser
	end := c.opt.Now()
	if conn.h2 == nil { // an HTTP/2 one may be shared: its streams say when it is idle
		conn.used = end
	}
	if !p.first.IsZero() {
		resp.Phases.Wait, resp.Phases.Receive = p.first.Sub(sent), end.Sub(p.first)
	}
	if !p.close { // the response is read: the connection is free for the next request
		c.giveBack(conn)
	}
	resp.Latency = end.Sub(start)
	if end.After(deadline.Add(timeout / 100)) {
		// Complete, but past the timeout (a connect the kernel held, a
		// response that finished as the deadline fired): a timeout, as
		// documented, whatever arrived.
		resp.Status, resp.RawHeader, resp.Body = 0, nil, nil
		c.fail(resp, os.ErrDeadlineExceeded, start)
		return
	}
	resp.HTTP2 = conn.h2 != nil
	if conn.h2 == nil { // HTTP/2's head, body and cookies flag are h2Stream's (release zeroed the parser)
		resp.Status = p.status
		resp.RawHeader, resp.Body = p.result()
	}
	coding := p.coding
	if p.cookies && host == c.opt.Target.Host {
		c.keepCookies(resp.RawHeader)
	}
	if coding != identity && len(resp.Body) > 0 { // decoded outside Latency: the client's work, not the server's
		body, err := decode(coding, resp.Body, c.opt.MaxBodySize)
		if err != nil { // no usable response, as a broken framing
			resp.Status, resp.RawHeader, resp.Body, resp.Err = 0, nil, nil, err
			return
		}
		resp.Body = body
	}
}

// aim is where a request goes (Client.route) and what goes with it there.
type aim struct {
	addr, serverName, host, uri string
	isTLS                       bool
	defaults                    []Header          // the user's default headers: to the target's origin only
	jar                         map[string]string // the user's cookies: to the target's host only
}

// aimAt routes req and picks what goes with it.
func (c *Client) aimAt(req *Request) (aim, error) {
	var a aim
	var err error
	if a.addr, a.isTLS, a.serverName, a.host, a.uri, err = c.route(req); err != nil {
		return a, err
	}
	if a.host == c.opt.Target.Host {
		a.jar = c.jar
	}
	if a.addr == c.targetAddr && a.isTLS == c.targetTLS {
		a.defaults = req.Defaults
	}
	return a, nil
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
	if c.busy != nil && c.busy.h2 == nil { // HTTP/2: the stream alone ends (stopH2), the connection may be shared
		_ = c.busy.SetDeadline(time.Unix(1, 0))
	}
	if c.dialing != nil {
		c.dialing()
	}
	if c.stopH2 != nil {
		c.stopH2()
	}
	c.mu.Unlock()
}

// Preconnect opens the user's keep-alive connection to the target, the TLS
// handshake with it, if it has none, and sends nothing: the open model's
// users set up in advance hold theirs before the window, so that its first
// arrivals do not each dial (a storm of the pool's size, the generator's
// choice, not the target's load). Its phases are not recorded. With a
// shared Pool there is nothing to do: the pool dials as requests need.
func (c *Client) Preconnect() error {
	if c.opt.Pool != nil {
		return nil
	}
	now := c.opt.Now()
	var resp Response
	conn, _, err := c.conn(c.targetAddr, c.targetTLS, c.opt.Target.Hostname(), now, now.Add(c.opt.Timeout), &resp)
	if err != nil {
		return err
	}
	c.unbusy(conn)
	return nil
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
