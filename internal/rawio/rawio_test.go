package rawio

import (
	"net"
	"syscall"
	"testing"
)

// TestReadWritePeek: on a connected pair of loopback sockets, an empty socket
// says EAGAIN to Read and Peek, Peek leaves what arrived for Read, and Write's
// bytes are Read's.
func TestReadWritePeek(t *testing.T) {
	c, s := loopbackPair(t)
	raw := func(conn net.Conn) syscall.RawConn {
		rc, err := conn.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		return rc
	}
	rc, rs := raw(c), raw(s)
	buf := make([]byte, 16)
	rs.Control(func(fd uintptr) {
		if _, err := Read(fd, buf); err != syscall.EAGAIN {
			t.Errorf("Read of an empty socket: %v, want EAGAIN", err)
		}
		if _, err := Peek(fd, buf[:1]); err != syscall.EAGAIN {
			t.Errorf("Peek of an empty socket: %v, want EAGAIN", err)
		}
	})
	rc.Control(func(fd uintptr) {
		if n, err := Write(fd, []byte("hello")); n != 5 || err != nil {
			t.Errorf("Write: %d, %v", n, err)
		}
	})
	// Wait until the bytes are there, through the poller, then peek and read.
	var got string
	rs.Read(func(fd uintptr) bool {
		n, err := Peek(fd, buf[:1])
		if err == syscall.EAGAIN {
			return false
		}
		if n != 1 || err != nil || buf[0] != 'h' {
			t.Errorf("Peek: %d %q, %v", n, buf[:n], err)
		}
		n, err = Read(fd, buf)
		if err != nil {
			t.Errorf("Read: %v", err)
		}
		got = string(buf[:n])
		return true
	})
	if got != "hello" {
		t.Errorf("read %q after peeking, want hello", got)
	}
	if n, err := Read(^uintptr(0), buf); err != syscall.EBADF || n != 0 {
		t.Errorf("Read of a bad fd: %d, %v; want 0, EBADF", n, err)
	}
}

// loopbackPair is a connected pair of loopback TCP sockets, closed when
// the test ends: the client's end and the server's.
func loopbackPair(t *testing.T) (c, s net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if c, err = net.Dial("tcp", ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if s, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return c, s
}
