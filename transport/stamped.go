package transport

import (
	"crypto/tls"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/headroom-dev/headroom/internal/rawio"
)

// stamped is the TCP connection under TLS, read as rawTrip reads plain
// TCP: with recvmsg and the kernel's arrival stamps (rawio.Stamps),
// through the runtime's poller, so deadlines and Cancel hold as on any
// net.Conn. last is when the newest bytes read arrived: what a response's
// end waited unread over TLS (Response.Held), as on the raw path.
type stamped struct {
	net.Conn
	rc     syscall.RawConn
	stamps rawio.Stamps
	last   time.Time // when the newest bytes read arrived; zero: none since it was zeroed

	// one Read's, for onReady (made once: a closure a read would allocate)
	p       []byte
	n       int
	err     error
	onReady func(fd uintptr) bool
}

// stampReads returns tc read through a stamped, or tc itself where the
// kernel cannot stamp.
func stampReads(tc *net.TCPConn) net.Conn {
	if !rawio.Supported {
		return tc
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return tc
	}
	s := &stamped{Conn: tc, rc: rc}
	if rc.Control(func(fd uintptr) { s.stamps.Bind(fd); err = rawio.StampArrivals(fd) }) != nil || err != nil {
		return tc
	}
	s.onReady = s.ready
	return s
}

// stampedUnder returns the stamped under a TLS connection, or nil.
func stampedUnder(c net.Conn) *stamped {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return nil
	}
	under := tc.NetConn()
	if cc, ok := under.(*counted); ok {
		under = cc.Conn
	}
	s, _ := under.(*stamped)
	return s
}

func (s *stamped) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.p, s.n, s.err = p, 0, nil
	err := s.rc.Read(s.onReady)
	s.p = nil
	if err == nil && s.err != nil {
		err = os.NewSyscallError("recvmsg", s.err)
	}
	switch {
	case err != nil:
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: s.LocalAddr(), Addr: s.RemoteAddr(), Err: err}
	case s.n == 0:
		return 0, io.EOF
	}
	if at := s.stamps.Arrived(); !at.IsZero() {
		s.last = at
	}
	return s.n, nil
}

// ready is RawConn.Read's callback: true when it read or failed, false
// to wait for the socket to be readable.
func (s *stamped) ready(fd uintptr) bool {
	if h := readHook.Load(); h != nil {
		(*h)(fd)
	}
	for {
		s.n, s.err = s.stamps.Recv(s.p)
		if s.err != syscall.EINTR {
			return s.err != syscall.EAGAIN
		}
	}
}
