package wakeup

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The guard is of use only in the runtime's own epoll set: there its
// expiry ends the poller's sleep. os.NewFile registers a non-blocking fd;
// a blocking one it would not, and Arm would wake nothing.
func TestGuardIsInTheRuntimesPoller(t *testing.T) {
	g := New()
	if g == nil {
		t.Fatal("New: no timerfd")
	}
	defer g.Close()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var polls []string
	for _, fd := range fds {
		if link, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); link != "anon_inode:[eventpoll]" {
			continue
		}
		info, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", fd.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(info)) { // "tfd:        7 events: 8000201d data: …"
			f := strings.Fields(line)
			if len(f) >= 4 && f[0] == "tfd:" && f[1] == strconv.Itoa(int(g.fd)) {
				if ev, err := strconv.ParseUint(f[3], 16, 32); err != nil || ev&unix.EPOLLIN == 0 {
					t.Fatalf("timerfd %d is in the poller but not for reading: %q", g.fd, line)
				}
				return
			}
		}
		polls = append(polls, string(info))
	}
	t.Fatalf("timerfd %d is in no epoll set of this process; the epoll sets:\n%s", g.fd, strings.Join(polls, "\n"))
}

// Arm sets the time from now, replacing the last; zero or less is at once
// (a zero it_value would disarm).
func TestArmSetsTheTimerfd(t *testing.T) {
	g := New()
	defer g.Close()
	left := func() time.Duration {
		var its unix.ItimerSpec
		if err := unix.TimerfdGettime(int(g.fd), &its); err != nil {
			t.Fatal(err)
		}
		return time.Duration(its.Value.Nano())
	}
	g.Arm(time.Hour)
	if d := left(); d <= 59*time.Minute || d > time.Hour {
		t.Errorf("armed for an hour: %v left", d)
	}
	g.Arm(2 * time.Hour) // replaces, not the earlier of the two
	if d := left(); d <= time.Hour {
		t.Errorf("armed again for two hours: %v left", d)
	}
	g.Arm(-time.Second)
	fds := []unix.PollFd{{Fd: int32(g.fd), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, 60_000); err != nil || n != 1 {
		t.Errorf("armed for the past: poll %d, %v; want it expired", n, err)
	}
}

func TestNilGuardDoesNothing(t *testing.T) {
	var g *Guard
	g.Arm(time.Millisecond)
	g.Close()
}
