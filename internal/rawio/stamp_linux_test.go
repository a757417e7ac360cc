package rawio

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// TestReadStampedSaysWhenBytesArrived: on a stamped loopback socket, the
// stamp of what was read lies between the clock before the peer's write and
// after it (loopback delivers inside the write), whenever it is read; 20 ms
// later it is still the arrival's. An unstamped socket reads with no stamp.
// Until the kernel stamps (a moment after the first socket asks), reads say
// no stamp: the caller counts nothing then.
func TestReadStampedSaysWhenBytesArrived(t *testing.T) {
	c, s := loopbackPair(t)
	rs, err := s.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var st Stamps
	buf := make([]byte, 16)
	read := func() (string, time.Time) {
		var got string
		var at time.Time
		rs.Read(func(fd uintptr) bool {
			n, stamp, err := st.ReadStamped(fd, buf)
			if err == syscall.EAGAIN {
				return false
			}
			if err != nil {
				t.Errorf("ReadStamped: %v", err)
			}
			got, at = string(buf[:n]), stamp
			return true
		})
		return got, at
	}

	if _, err := c.Write([]byte("plain")); err != nil {
		t.Fatal(err)
	}
	if got, at := read(); got != "plain" || !at.IsZero() {
		t.Errorf("unstamped: read %q stamped %v, want plain and no stamp", got, at)
	}

	rs.Control(func(fd uintptr) {
		if err := StampArrivals(fd); err != nil {
			t.Fatalf("StampArrivals: %v", err)
		}
	})
	// The kernel turns stamping on for the whole machine a moment later (a
	// deferred static key, net_enable_timestamp), if no socket had it on:
	// until then, segments come unstamped.
	for i := 0; ; i++ {
		if _, err := c.Write([]byte("w")); err != nil {
			t.Fatal(err)
		}
		if _, at := read(); !at.IsZero() {
			break
		}
		if i == 1000 {
			t.Fatal("no segment was stamped in 1,000 tries, a millisecond apart")
		}
		time.Sleep(time.Millisecond)
	}
	before := time.Now()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	time.Sleep(20 * time.Millisecond)
	got, at := read()
	if got != "hello" || at.Before(before.Truncate(time.Microsecond)) || at.After(after) {
		t.Errorf("read %q stamped %v, want hello stamped in [%v, %v]", got, at, before, after)
	}
	if held := time.Since(at); held < 20*time.Millisecond {
		t.Errorf("read %v after its arrival, want the 20 ms slept at least", held)
	}
}
