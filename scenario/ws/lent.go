package ws

import (
	"crypto/tls"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/headroom-dev/headroom/internal/rawio"
)

// readChunk is the size of the buffer a WebSocket connection borrows to read what has arrived.
const readChunk = 4096

var readBuffers = sync.Pool{New: func() any { b := make([]byte, readChunk); return &b }}

// lentConn is a WebSocket's TCP connection that holds a read buffer only while it has unread bytes: it waits
// for data with none (RawConn.Read's callback borrows one from readBuffers only once the socket is
// readable) and gives it back once the bytes are read out. Most connected users sit idle, waiting, and a
// buffer for each would cost as much as the rest of the connection (docs/BENCHMARKS.md); gorilla is
// given a small buffer of its own (wsReadBuffer) for frame headers and control frames.
type lentConn struct {
	*net.TCPConn
	raw  syscall.RawConn
	fill func(fd uintptr) bool // RawConn.Read's callback, made once
	buf  *[]byte               // borrowed; nil while nothing is unread
	r, w int                   // what is unread: (*buf)[r:w]
	err  error                 // the read's error, when it brought no bytes

	stamps rawio.Stamps // the reads', which say when the bytes they read arrived in the kernel
	last   time.Time    // when the newest bytes read arrived; zero until the kernel stamps
}

// wsReadBuffer is gorilla's own read buffer beside a lentConn's; gorilla takes no less than 125 bytes
// (a control frame's largest payload).
const wsReadBuffer = 128

// lend wraps c; a connection that is not TCP is returned as it is.
func lend(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok || !rawio.Supported {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	l := &lentConn{TCPConn: tc, raw: raw}
	l.fill = l.readable
	_ = raw.Control(func(fd uintptr) {
		l.stamps.Bind(fd)
		_ = rawio.StampArrivals(fd) // arrived; without it, when read
	})
	return l
}

// readable reads what has arrived into a borrowed buffer, or gives it back and reports false (wait) when
// nothing has.
func (l *lentConn) readable(fd uintptr) bool {
	b := readBuffers.Get().(*[]byte)
	for {
		n, err := l.stamps.Recv(*b) // its stamp found in Read, where the stack is shallower
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			readBuffers.Put(b)
			return false
		case err != nil:
			readBuffers.Put(b)
			l.err = os.NewSyscallError("read", err)
		case n == 0:
			readBuffers.Put(b)
			l.err = io.EOF
		default:
			l.buf, l.r, l.w = b, 0, n
		}
		return true
	}
}

func (l *lentConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if l.buf == nil {
		l.err = nil
		if err := l.raw.Read(l.fill); err != nil { // closed, or the deadline passed
			if oe, ok := err.(*net.OpError); ok {
				oe.Op = "read"
			}
			return 0, err
		}
		if l.buf != nil {
			if at := l.stamps.Arrived(); !at.IsZero() {
				l.last = at
			}
		}
		if l.buf == nil {
			if l.err == io.EOF {
				return 0, io.EOF
			}
			return 0, &net.OpError{Op: "read", Net: "tcp", Source: l.LocalAddr(), Addr: l.RemoteAddr(), Err: l.err}
		}
	}
	n := copy(p, (*l.buf)[l.r:l.w])
	if l.r += n; l.r == l.w {
		readBuffers.Put(l.buf)
		l.buf = nil
	}
	return n, nil
}

// arrived returns when the message ws just read arrived: the kernel's stamp of the read that brought its
// end, where its connection is stamped (a lentConn, also under TLS) and the stamp is before now; else now,
// when it was read. A reader that comes late (a busy core) is then not counted in the message's
// delivery.
func arrived(ws *websocket.Conn, now time.Time) time.Time {
	c := ws.NetConn()
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if l, ok := c.(*lentConn); ok && !l.last.IsZero() && l.last.Before(now) {
		return l.last
	}
	return now
}
