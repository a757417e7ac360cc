package transport

// HTTP/2, as browsers and k6 speak it: negotiated by ALPN on https targets
// (Config.HTTP1 keeps to HTTP/1.1), or with prior knowledge on http ones
// (Config.H2C). The protocol is golang.org/x/net/http2's: a user's
// connection becomes its ClientConn, and each request a stream on it, one
// at a time as the user sends them. HTTP/1.1 keeps its own path (wire.go).

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

// h2 is the HTTP/2 configuration of every connection: compression is
// headroom's (it asks and decodes itself), and a response's head is
// bounded as HTTP/1.1's is.
var h2 = &http2.Transport{DisableCompression: true, MaxHeaderListSize: maxHead, StrictMaxConcurrentStreams: true}

// counted counts the bytes a connection reads and writes, below TLS: an
// HTTP/2 request's share is what moved since the last request on the
// connection ended (frames the connection's own reader took, PINGs and
// window updates included). On a connection of one user that is its
// request's; on one shared by many (Pool), the totals are exact and each
// request's share is not. The TLS handshake is not counted, as it is not
// over HTTP/1.1.
type counted struct {
	net.Conn
	in, out atomic.Int64
}

func (c *counted) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.in.Add(int64(n))
	return n, err
}

func (c *counted) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.out.Add(int64(n))
	return n, err
}

// h2Conn reports whether raw, just dialed, speaks HTTP/2: TLS that
// negotiated h2, or plain TCP under Config.H2C.
func h2Conn(raw net.Conn, isTLS bool, set *Settings) bool {
	if tc, ok := raw.(*tls.Conn); ok {
		return tc.ConnectionState().NegotiatedProtocol == "h2"
	}
	return !isTLS && set.h2c
}

// newH2 makes conn an HTTP/2 connection: the client preface and SETTINGS
// are written here, the server's read by the ClientConn's own goroutine.
func newH2(conn *connection) error {
	under := conn.Conn
	if tc, ok := under.(*tls.Conn); ok {
		under = tc.NetConn()
	}
	bytes, ok := under.(*counted)
	if !ok {
		return errors.New("http2: the connection's bytes are not counted")
	}
	cc, err := h2.NewClientConn(conn.Conn)
	if err != nil {
		return fmt.Errorf("http2: %w", err)
	}
	conn.h2, conn.counted, conn.raw = cc, bytes, nil
	bytes.in.Store(0) // the handshake's
	bytes.out.Store(0)
	return nil
}

// settle waits, on an HTTP/2 connection a Pool is to share, for the
// server's SETTINGS, which come before its answer to a PING: until they
// do, x/net assumes 100 streams, and a server that allows fewer refuses
// the streams past its limit, or resets them with PROTOCOL_ERROR once it
// has the client's ack. On failure conn is closed.
func settle(conn *connection, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := conn.h2.Ping(ctx); err != nil {
		closed := conn.h2.State().Closed // x/net's reader ended it: its reason (a bad SETTINGS) and the PING's write race
		conn.Close()
		if closed && ctx.Err() == nil {
			return fmt.Errorf("http2: client conn could not be established: the connection ended while waiting for the server's SETTINGS (%w)", err)
		}
		return fmt.Errorf("http2: waiting for the server's SETTINGS: %w", err)
	}
	return nil
}

// h2Trip sends req to a as one stream on conn (h2Stream). A failure that
// was the stream's leaves conn for the next request; any other drops it.
// On a Pool's connection, which other users' streams may share, a stream
// of its own failing, or refused (a GOAWAY fails the streams past its last
// and leaves those before it to finish), gives the stream back alone: the
// pool retires a connection that can take no more.
func (c *Client) h2Trip(conn *connection, req *Request, a *aim, deadline time.Time, resp *Response) error {
	err := c.h2Stream(conn, req, a, deadline, resp)
	switch {
	case err == nil:
	case conn.pool != nil && (streamOnly(err) || unprocessed(err)):
		c.giveBack(conn)
	case streamOnly(err) && conn.h2.CanTakeNewRequest():
		c.giveBack(conn) // the stream failed, not the connection: free for the next request
	default:
		c.drop(a.addr, conn)
	}
	return err
}

// h2Stream sends req as one stream on conn and reads its response into
// resp: its status, its head as HTTP/1.1 would have it (for Headers and
// cookies), its body within the body limit; its coding in c.parser.coding.
func (c *Client) h2Stream(conn *connection, req *Request, a *aim, deadline time.Time, resp *Response) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	c.mu.Lock()
	c.stopH2 = cancel // Cancel ends the stream
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.stopH2 = nil
		c.mu.Unlock()
	}()
	if c.canceled.Load() {
		return ErrCanceled
	}
	hr, err := c.h2Request(ctx, req, a)
	if err != nil {
		return err
	}
	defer func() { // what moved since the last request on conn ended: over a shared one, totals exact, shares not
		resp.BytesIn += conn.counted.in.Swap(0)
		resp.BytesOut += conn.counted.out.Swap(0)
	}()
	hresp, err := conn.h2.RoundTrip(hr)
	if err != nil {
		return err
	}
	c.parser.first = c.opt.Now() // the response's head has come

	defer hresp.Body.Close()
	limit := c.opt.MaxBodySize
	if hresp.ContentLength > int64(limit) {
		return fmt.Errorf("%w: %d bytes, the limit %d", errTooLarge, hresp.ContentLength, limit)
	}
	body, err := readBody(hresp.Body, int(hresp.ContentLength), limit, "")
	if err != nil {
		return err
	}
	resp.Status, resp.Body = hresp.StatusCode, body
	resp.RawHeader = h2Head(hresp)
	c.parser.coding = parseCoding([]byte(hresp.Header.Get("Content-Encoding")))
	c.parser.cookies = len(hresp.Header["Set-Cookie"]) > 0 // the head is read for them only then
	return nil
}

// h2Request is req as net/http's request: the headers Do would write (the
// defaults, overridden by the request's own, cookies, User-Agent,
// Accept-Encoding), less those HTTP/2 forbids.
func (c *Client) h2Request(ctx context.Context, req *Request, a *aim) (*http.Request, error) {
	scheme := "http"
	if a.isTLS {
		scheme = "https"
	}
	hr, err := http.NewRequestWithContext(ctx, req.Method, "", nil) // the URL made here, not parsed again
	if err != nil {
		return nil, err
	}
	hr.URL.Scheme, hr.URL.Host = scheme, a.host
	hr.URL.Opaque = string(appendURI(nil, a.uri)) // the request target exactly: RequestURI returns it
	hr.Host = a.host
	for _, hs := range [2][]Header{a.defaults, req.Header} {
		for _, h := range hs {
			switch k := http.CanonicalHeaderKey(h.Key); k {
			case "Host":
				hr.Host = h.Value
			case "Content-Length", "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade":
				// framing HTTP/2 does itself
			default:
				hr.Header[k] = []string{h.Value}
			}
		}
	}
	if _, ok := hr.Header["User-Agent"]; !ok {
		hr.Header["User-Agent"] = []string{"headroom"}
	}
	if _, ok := hr.Header["Accept-Encoding"]; !ok && c.accept != "" {
		hr.Header["Accept-Encoding"] = []string{c.accept}
	}
	if len(a.jar) > 0 {
		given := hr.Header.Get("Cookie")
		v := appendCookies([]byte(given), a.jar, given != "")
		hr.Header["Cookie"] = []string{string(v[:len(v)-2])} // less its CRLF
	}
	if req.Body != nil || req.Method == "POST" || req.Method == "PUT" || req.Method == "PATCH" {
		hr.Body = io.NopCloser(bytes.NewReader(req.Body))
		hr.ContentLength = int64(len(req.Body))
		hr.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(req.Body)), nil }
		if len(req.Body) == 0 {
			hr.Body = http.NoBody
		}
	}
	return hr, nil
}

// h2Head writes a response's status and headers as an HTTP/1.1 head
// would hold them.
func h2Head(r *http.Response) []byte {
	b := append(make([]byte, 0, 256), "HTTP/2.0 "...) // an API's head fits; a larger one grows
	b = strconv.AppendInt(b, int64(r.StatusCode), 10)
	b = append(append(append(b, ' '), http.StatusText(r.StatusCode)...), "\r\n"...)
	for k, vs := range r.Header {
		for _, v := range vs {
			b = appendHeader(b, k, v)
		}
	}
	return append(b, "\r\n"...)
}

// readBody reads a body to its end, at most limit bytes (past them, an
// error whose text ends in what: " once decoded", say), starting with
// room for hint bytes when it is a length known (0 or more; -1: none).
func readBody(r io.Reader, hint, limit int, what string) ([]byte, error) {
	size := 512
	if hint >= 0 { // the length is known: room for it, and for the read that finds its end
		size = hint + 1
	}
	b := make([]byte, 0, min(size, limit+1))
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):min(cap(b), limit+1)])
		b = b[:len(b)+n]
		if len(b) > limit {
			return nil, fmt.Errorf("%w of %d bytes%s", errTooLarge, limit, what)
		}
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// streamOnly reports whether err, of an HTTP/2 request, ended its stream
// alone and left the connection as it was: the server reset the stream,
// the request timed out or was canceled (x/net resets it), its body
// passed the limit (likewise).
func streamOnly(err error) bool {
	var se http2.StreamError
	return errors.As(err, &se) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, ErrCanceled) || errors.Is(err, errTooLarge)
}

// errTooLarge is what a body past the limit's error wraps.
var errTooLarge = errors.New("response body is larger than the limit")

// h2Again reports whether a request that failed with err on an HTTP/2
// connection may be sent again: up to 3 times when the server left its
// stream unprocessed (past a GOAWAY's last stream, which x/net says as
// "graceful shutdown GOAWAY"; REFUSED_STREAM, as a server whose stream
// limit the client has not heard yet sends; a connection that could no
// longer take it), or once, for an idempotent request on a kept-alive
// connection (reused), when the connection was gone (a GoAwayError: closed
// after a GOAWAY that may have named the stream).
func h2Again(err error, idempotent, reused bool, attempt int) bool {
	if unprocessed(err) {
		return attempt < 3
	}
	var ga http2.GoAwayError
	return reused && attempt == 0 && idempotent && (errors.As(err, &ga) || retryable(err) || strings.Contains(err.Error(), "client connection lost"))
}

// unprocessed reports whether err says the server left the stream
// unprocessed: past a GOAWAY's last stream, REFUSED_STREAM, or a connection
// that could no longer take it.
func unprocessed(err error) bool {
	if msg := err.Error(); strings.Contains(msg, "graceful shutdown GOAWAY") || strings.Contains(msg, "client conn not usable") {
		return true
	}
	var se http2.StreamError
	return errors.As(err, &se) && se.Code == http2.ErrCodeRefusedStream
}
