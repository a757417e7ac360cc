// Package transport sends a user's requests. Each user has its own
// keep-alive connection to the target, as a browser has, so connection
// counts, handshakes and per-connection server work match real users; an
// idle user holds only its socket (buffers come from a shared pool while a
// request is in flight).
//
// Latency is measured from the start of the request (including a dial,
// when one is needed) to the end of the response body.
package transport

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// Header is one header line.
type Header struct{ Key, Value string }

// Request is one HTTP request. URL is absolute, or a path ("/api/x") that
// is joined to the target.
type Request struct {
	Method  string
	URL     string
	Header  []Header
	Body    []byte
	Timeout time.Duration // 0 means the client's default
}

// Response is what came back. When Err is set no complete response
// arrived; Timeout and Canceled tell why, when they are the reason.
type Response struct {
	Status    int
	RawHeader []byte // the status line and headers, as serialized; see Headers
	Body      []byte
	Latency   time.Duration
	BytesIn   int64 // bytes read from the connection for this request
	BytesOut  int64 // bytes written
	Err       error
	Timeout   bool
	Canceled  bool
}

// Headers parses RawHeader into header lines, in order. It is done on
// demand: most scenarios never look at most responses' headers.
func (r *Response) Headers() []Header {
	var out []Header
	lines := bytes.Split(r.RawHeader, []byte("\r\n"))
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
	Now         func() time.Time
}

var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 8<<10) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}
)

// ErrCanceled is the error of a request stopped by Cancel.
var ErrCanceled = errors.New("request canceled: user stopped")

// Client sends one user's requests over that user's own connections: one
// kept alive to the target, and one per other host it visits. Do must be
// called from one goroutine at a time; Cancel and Close from any.
type Client struct {
	opt      Options
	jar      map[string]string // cookies of the target host
	mu       sync.Mutex
	conns    map[string]*countingConn // by host:port
	busy     *countingConn
	canceled atomic.Bool
	dialer   net.Dialer

	targetAddr string // host:port of the target, once known
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
	return &Client{opt: opt}
}

// Do sends req and fills resp. It never panics on network trouble: errors
// end up in resp.Err.
func (c *Client) Do(req *Request, resp *Response) {
	*resp = Response{}
	start := c.opt.Now()
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = c.opt.Timeout
	}
	deadline := start.Add(timeout)

	freq := fasthttp.AcquireRequest()
	fresp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(freq)
	defer fasthttp.ReleaseResponse(fresp)

	addr, isTLS, serverName, host, err := c.build(freq, req)
	if err != nil {
		resp.Err = err
		return
	}
	if req.Method == "HEAD" {
		fresp.SkipBody = true
	}
	for attempt := 0; ; attempt++ {
		conn, reused, err := c.conn(addr, isTLS, serverName, deadline)
		if err != nil {
			c.fail(resp, err, start)
			return
		}
		in0, out0 := conn.in, conn.out
		err = c.roundTrip(conn, freq, fresp, deadline)
		resp.BytesIn, resp.BytesOut = conn.in-in0, conn.out-out0
		if err != nil {
			c.drop(addr, conn)
			// A kept-alive connection the server closed meanwhile fails
			// before any response byte: send again, once, on a new one.
			if reused && attempt == 0 && resp.BytesIn == 0 && retryable(err) && !c.canceled.Load() {
				continue
			}
			c.fail(resp, err, start)
			return
		}
		if fresp.ConnectionClose() {
			c.drop(addr, conn)
		}
		break
	}
	resp.Latency = c.opt.Now().Sub(start)
	resp.Status = fresp.StatusCode()
	resp.Body = append([]byte(nil), fresp.Body()...)
	resp.RawHeader = fresp.Header.AppendBytes(nil)
	if host == c.opt.Target.Host {
		for _, v := range fresp.Header.Cookies() {
			c.keepCookie(v)
		}
	}
}

// build fills freq and returns where to send it: host:port, whether TLS,
// the server name, and the URL's host as written. A path goes to the
// target without parsing a URL.
func (c *Client) build(freq *fasthttp.Request, req *Request) (addr string, isTLS bool, serverName, host string, err error) {
	freq.Header.SetMethod(req.Method)
	if strings.HasPrefix(req.URL, "/") {
		t := c.opt.Target
		if c.targetAddr == "" {
			c.targetAddr, c.targetTLS = hostPort(t)
			c.basePath = strings.TrimSuffix(t.Path, "/")
		}
		freq.Header.SetRequestURI(c.basePath + req.URL)
		freq.Header.SetHost(t.Host)
		addr, isTLS, serverName, host = c.targetAddr, c.targetTLS, t.Hostname(), t.Host
	} else {
		u, perr := url.Parse(req.URL)
		if perr != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return "", false, "", "", fmt.Errorf("bad URL %q: want a path like /api/x or an http(s) URL", req.URL)
		}
		freq.SetRequestURI(req.URL)
		addr, isTLS = hostPort(u)
		serverName, host = u.Hostname(), u.Host
	}
	for _, h := range req.Header {
		freq.Header.Set(h.Key, h.Value)
	}
	if host == c.opt.Target.Host {
		for k, v := range c.jar {
			freq.Header.SetCookie(k, v)
		}
	}
	if req.Body != nil {
		freq.SetBodyRaw(req.Body)
	}
	return addr, isTLS, serverName, host, nil
}

func (c *Client) roundTrip(conn *countingConn, freq *fasthttp.Request, fresp *fasthttp.Response, deadline time.Time) error {
	if err := conn.SetDeadline(deadline); err != nil {
		return err
	}
	w := writers.Get().(*bufio.Writer)
	w.Reset(conn)
	err := freq.Write(w)
	if err == nil {
		err = w.Flush()
	}
	w.Reset(nil)
	writers.Put(w)
	if err != nil {
		return err
	}
	r := readers.Get().(*bufio.Reader)
	r.Reset(conn)
	err = fresp.ReadLimitBody(r, c.opt.MaxBodySize)
	if err == nil && r.Buffered() > 0 {
		err = errors.New("server sent more bytes than one response")
	}
	r.Reset(nil)
	readers.Put(r)
	return err
}

// conn returns the user's connection to addr, dialing if it has none.
func (c *Client) conn(addr string, isTLS bool, serverName string, deadline time.Time) (*countingConn, bool, error) {
	if c.canceled.Load() {
		return nil, false, ErrCanceled
	}
	c.mu.Lock()
	conn := c.conns[addr]
	c.busy = conn
	c.mu.Unlock()
	if conn != nil {
		return conn, true, nil
	}
	c.dialer.Deadline = deadline
	raw, err := c.dialer.Dial("tcp", addr)
	if err != nil {
		return nil, false, err
	}
	if isTLS {
		tc := tls.Client(raw, &tls.Config{ServerName: serverName, InsecureSkipVerify: c.opt.Insecure})
		_ = tc.SetDeadline(deadline)
		if err := tc.Handshake(); err != nil {
			raw.Close()
			return nil, false, err
		}
		raw = tc
	}
	conn = &countingConn{Conn: raw}
	c.mu.Lock()
	if c.conns == nil {
		c.conns = map[string]*countingConn{}
	}
	c.conns[addr] = conn
	c.busy = conn
	c.mu.Unlock()
	if c.canceled.Load() { // Cancel ran while we dialed
		return nil, false, ErrCanceled
	}
	return conn, false, nil
}

func (c *Client) drop(addr string, conn *countingConn) {
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
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, fasthttp.ErrTimeout) || isTimeout(err):
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

func (c *Client) keepCookie(raw []byte) {
	ck := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(ck)
	if ck.ParseBytes(raw) != nil {
		return
	}
	name := string(ck.Key())
	expired := ck.MaxAge() < 0 || (!ck.Expire().IsZero() && ck.Expire().Before(c.opt.Now()) && ck.Expire() != fasthttp.CookieExpireUnlimited)
	if expired {
		delete(c.jar, name)
		return
	}
	if c.jar == nil {
		c.jar = map[string]string{}
	}
	c.jar[name] = string(ck.Value())
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

func retryable(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || strings.Contains(err.Error(), "closed")
}

// countingConn counts the bytes a connection carries.
type countingConn struct {
	net.Conn
	in, out int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in += int64(n)
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out += int64(n)
	return n, err
}
