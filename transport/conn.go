package transport

// One kept-alive connection's life: dialing it (from a source address, if
// asked), a request's round trip on it (the raw path of one write and one
// read on plain TCP), checking it before reuse, dropping it.

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/headroom-dev/headroom/internal/rawio"
	"golang.org/x/net/http2"
)

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
	if conn.arrivals != nil {
		conn.arrivals.last = time.Time{} // what it says next is this response's
	}
	n, err := conn.Write(*wb)
	putBuf(wb)
	resp.BytesOut += int64(n)
	if err != nil {
		return err
	}
	for {
		n, err := conn.Read(p.space())
		if n > 0 && p.first.IsZero() {
			p.first = c.opt.Now()
		}
		resp.BytesIn += int64(n)
		eof := errors.Is(err, io.EOF)
		if err != nil && !eof {
			return err
		}
		done, perr := p.advance(n, eof)
		if done && perr == nil && conn.arrivals != nil && !conn.arrivals.last.IsZero() { // wall clocks both, as rawTrip's
			resp.Held = max(time.Since(conn.arrivals.last), 0)
		}
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

// readHook, when set (tests only), runs before each read of a response
// from the socket fd: a generator that reads late. Atomic: a reader a
// test left behind (an HTTP/2 connection's) reads it while another sets it.
var readHook atomic.Pointer[func(fd uintptr)]

// ready is RawConn.Read's callback for rawTrip: true ends the trip (or
// hands a partial write back to rawTrip), false waits for readiness.
func (c *connection) ready(fd uintptr) bool {
	t := &c.trip
	if t.wb != nil {
		for req := *t.wb; t.sent < len(req); {
			n, err := rawio.Write(fd, req[t.sent:])
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
	if h := readHook.Load(); h != nil {
		(*h)(fd)
	}
	for {
		n, arrived, err := c.stamps.ReadStamped(fd, t.p.space())
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return false
		case err != nil:
			t.err = os.NewSyscallError("read", err)
			return true
		}
		var now time.Time // the raw path is real sockets': no clock but the wall's, as the kernel's stamps
		if n > 0 && t.p.first.IsZero() {
			now = time.Now()
			t.p.first = now
		}
		t.resp.BytesIn += int64(n)
		t.done, t.err = t.p.advance(n, n == 0)
		if t.done && !arrived.IsZero() {
			if now.IsZero() {
				now = time.Now()
			}
			t.resp.Held = max(now.Sub(arrived), 0)
		}
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
func (c *Client) conn(addr string, isTLS bool, serverName string, now, deadline time.Time, resp *Response) (*connection, bool, error) {
	if c.canceled.Load() {
		return nil, false, ErrCanceled
	}
	if pl := c.opt.Pool; pl != nil && addr == c.targetAddr && isTLS == c.targetTLS {
		return c.pooled(pl, addr, isTLS, serverName, now, deadline, resp)
	}
	c.mu.Lock()
	conn := c.conns[addr]
	c.busy = conn
	c.mu.Unlock()
	if conn != nil {
		if conn.h2 != nil && conn.h2.CanTakeNewRequest() || conn.h2 == nil && (now.Sub(conn.used) < probeIdle || conn.alive()) {
			return conn, true, nil
		}
		c.drop(addr, conn)
	}
	conn, err := c.connect(addr, isTLS, serverName, now, deadline, &resp.Phases)
	if err != nil {
		return nil, false, err
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

// connect dials a new connection to addr, its phases into ph.
func (c *Client) connect(addr string, isTLS bool, serverName string, now, deadline time.Time, ph *Phases) (*connection, error) {
	raw, err := c.dial(addr, isTLS, serverName, deadline, ph)
	if err != nil {
		return nil, err
	}
	if !c.opt.Now().Before(deadline) { // connected, but too late (a connect the kernel held)
		raw.Close()
		return nil, os.ErrDeadlineExceeded
	}
	conn := &connection{Conn: raw, used: now, arrivals: stampedUnder(raw)}
	if h2Conn(raw, isTLS, c.opt.Settings) {
		if err := newH2(conn); err != nil {
			raw.Close()
			return nil, err
		}
		return conn, nil
	}
	if tc, ok := raw.(*net.TCPConn); ok && rawio.Supported {
		if rc, err := tc.SyscallConn(); err == nil {
			conn.raw, conn.onReady = rc, conn.ready
			_ = rc.Control(func(fd uintptr) { _ = rawio.StampArrivals(fd) }) // Response.Held; without it, 0
		}
	}
	return conn, nil
}

// pooled takes a connection to the target from the shared pool pl: an
// idle one (checked as the client's own would be), a new one while the
// pool has room, or the first to come back, waiting until the deadline or
// Cancel. The wait is added to resp.Queued.
func (c *Client) pooled(pl *Pool, addr string, isTLS bool, serverName string, now, deadline time.Time, resp *Response) (*connection, bool, error) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	c.mu.Lock()
	c.dialing = cancel // Cancel ends the wait too
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.dialing = nil
		c.mu.Unlock()
	}()
	for {
		if c.canceled.Load() {
			return nil, false, ErrCanceled
		}
		t0 := c.opt.Now()
		conn, dial, waited, err := pl.take(ctx)
		if waited {
			resp.Queued += c.opt.Now().Sub(t0)
		}
		switch {
		case err != nil && c.canceled.Load():
			return nil, false, ErrCanceled
		case err != nil:
			return nil, false, os.ErrDeadlineExceeded
		case dial:
			c.mu.Lock()
			c.dialing = nil
			c.mu.Unlock()
			conn, err = c.connect(addr, isTLS, serverName, c.opt.Now(), deadline, &resp.Phases)
			if err == nil && conn.h2 != nil {
				err = settle(conn, deadline)
			}
			if err != nil {
				pl.gone()
				return nil, false, err
			}
			conn.pool = pl
			if conn.h2 != nil {
				pl.share(conn)
			}
			return c.hold(conn, false)
		}
		switch {
		case conn.h2 != nil && conn.h2.CanTakeNewRequest(), conn.h2 == nil && (c.opt.Now().Sub(conn.used) < probeIdle || conn.alive()):
			return c.hold(conn, true)
		case conn.h2 != nil:
			pl.put(conn) // a GOAWAY came: the stream back, the connection retired
		default:
			conn.Close() // closed by the server while idle: its place goes to a new one
			pl.gone()
		}
	}
}

// hold marks conn as the one the client's request is on, for Cancel.
func (c *Client) hold(conn *connection, reused bool) (*connection, bool, error) {
	c.mu.Lock()
	c.busy = conn
	c.mu.Unlock()
	if c.canceled.Load() { // Cancel ran before conn was the busy one
		if conn.h2 != nil {
			c.giveBack(conn) // a pool's HTTP/2 connection may be shared: the stream alone was the client's
		} else {
			c.drop("", conn)
		}
		return nil, false, ErrCanceled
	}
	return conn, reused, nil
}

// giveBack ends a request that left conn reusable: a pooled connection
// goes back to its pool.
func (c *Client) giveBack(conn *connection) {
	if conn.pool == nil {
		return
	}
	c.unbusy(conn)
	conn.pool.put(conn)
}

// unbusy ends the client's hold on conn: Cancel no longer reaches it.
func (c *Client) unbusy(conn *connection) {
	c.mu.Lock()
	if c.busy == conn {
		c.busy = nil
	}
	c.mu.Unlock()
}

// alive peeks at an idle connection without blocking: false when the
// server closed or reset it, or sent bytes no request asked for (the
// connection is then out of step). TLS connections are peeked at below
// TLS: any record from the server (a close_notify, say) counts as stray.
func (conn *connection) alive() bool {
	if !rawio.Supported { // Windows: found out by the request instead (sent again if it may be)
		return true
	}
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
		_, err := rawio.Peek(fd, b[:])
		alive = err == syscall.EAGAIN || err == syscall.EINTR
	})
	return alive && err == nil
}

// dial connects to addr (and does the TLS handshake) on a goroutine of
// its own. Name resolution, connect and handshake need deep stacks (Go's
// DNS client alone over 6 KB): run on the user's goroutine they would
// double its stack for good, while this goroutine's stack is freed when
// it ends. See docs/BENCHMARKS.md, memory per idle user.
func (c *Client) dial(addr string, isTLS bool, serverName string, deadline time.Time, ph *Phases) (net.Conn, error) {
	type dialed struct {
		conn net.Conn
		err  error
		ph   Phases
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
	var conf *tls.Config
	set := c.opt.Settings
	if isTLS {
		if c.tls == nil {
			c.tls = set.userTLS()
		}
		conf = c.tls.Clone() // the session cache is the user's still
		conf.ServerName = serverName
		if !set.http1 {
			conf.NextProtos = []string{"h2", "http/1.1"}
		}
	}
	count := isTLS && !set.http1 || !isTLS && set.h2c // HTTP/2 may be spoken: its bytes are counted below it
	local := c.opt.LocalAddr
	dial := c.opt.Dial
	now := c.opt.Now
	go func() {
		var ph Phases
		t := now()
		var raw net.Conn
		var err error
		if dial == nil {
			var d net.Dialer
			if local.IsValid() {
				d.LocalAddr = &net.TCPAddr{IP: local.AsSlice()}
				d.Control = bindNoPort
			}
			raw, err = dialTCP(ctx, &d, addr, &ph, now)
		} else {
			raw, err = dial(ctx, "tcp", addr)
		}
		ph.Connect = now().Sub(t) - ph.DNS
		if tc, ok := raw.(*net.TCPConn); ok && err == nil && isTLS { // Response.Held over TLS, as rawTrip's
			raw = stampReads(tc)
		}
		if err == nil && count {
			raw = &counted{Conn: raw}
		}
		if err == nil && isTLS {
			t = now()
			tc := tls.Client(raw, conf)
			if err = tc.HandshakeContext(ctx); err != nil {
				raw.Close()
			}
			raw = tc
			ph.TLS = now().Sub(t)
		}
		ph.Dialed = true
		done <- dialed{raw, err, ph}
	}()
	r := <-done
	*ph = r.ph
	return r.conn, r.err
}

// dialTCP connects to addr, resolving its host first when it is a name
// (the time that took in ph.DNS), then trying its addresses in the
// resolver's order.
func dialTCP(ctx context.Context, d *net.Dialer, addr string, ph *Phases, now func() time.Time) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return d.DialContext(ctx, "tcp", addr)
	}
	t := now()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	ph.DNS = now().Sub(t)
	if err != nil {
		return nil, err
	}
	for _, ip := range ips {
		var conn net.Conn
		if conn, err = d.DialContext(ctx, "tcp", net.JoinHostPort(ip.Unmap().String(), port)); err == nil {
			return conn, nil
		}
	}
	return nil, err
}

// drop closes conn, ending the client's request on it, and frees its
// place in its pool if it has one (a pool's HTTP/2 connection once,
// whichever of the clients whose streams it carried drops it first).
func (c *Client) drop(addr string, conn *connection) {
	if conn.pool != nil && conn.h2 != nil {
		c.unbusy(conn)
		conn.pool.fail(conn)
		return
	}
	c.mu.Lock()
	if conn.pool == nil && c.conns[addr] == conn {
		delete(c.conns, addr)
	}
	if c.busy == conn {
		c.busy = nil
	}
	c.mu.Unlock()
	conn.Close()
	if conn.pool != nil {
		conn.pool.gone()
	}
}

// connection is one kept-alive connection.
type connection struct {
	net.Conn
	raw      syscall.RawConn   // plain TCP: the socket, for rawTrip; nil for TLS and HTTP/2
	h2       *http2.ClientConn // an HTTP/2 connection's; nil for HTTP/1.1
	counted  *counted          // HTTP/2: the bytes read and written below TLS
	onReady  func(fd uintptr) bool
	trip     trip
	stamps   rawio.Stamps // rawTrip's reads, which say when a response's end arrived (Response.Held)
	arrivals *stamped     // TLS: the socket under it, which says the same of roundTrip's reads; nil otherwise
	deadline time.Time    // the deadline last set on it
	used     time.Time    // when it was dialed or last finished a request
	pool     *Pool        // the shared pool it belongs to; nil: a client's own
	streams  int          // pooled HTTP/2: streams open on it (pool.mu)
	muxed    bool         // pooled HTTP/2: among the pool's shared ones (pool.mu)
}

// Close closes the connection (an HTTP/2 one's streams with it).
func (c *connection) Close() error {
	if c.h2 != nil {
		return c.h2.Close()
	}
	return c.Conn.Close()
}
