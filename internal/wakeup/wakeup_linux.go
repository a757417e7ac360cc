package wakeup

import (
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Guard wakes the runtime's poller at the time armed. A nil Guard does
// nothing.
type Guard struct {
	f  *os.File // holds the timerfd in the runtime's poller until Close
	fd uintptr
}

// New returns a Guard, or nil where the kernel gives no timerfd.
func New() *Guard {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil
	}
	// Non-blocking, so os.NewFile registers it with the runtime's poller.
	return &Guard{f: os.NewFile(uintptr(fd), "wakeup"), fd: uintptr(fd)}
}

// Arm wakes the poller d from now (d <= 0: at once), replacing the time
// armed before. timerfd_settime never blocks, so the runtime is not told of
// the call (see internal/rawio).
func (g *Guard) Arm(d time.Duration) {
	if g == nil {
		return
	}
	d = max(d, 1) // a zero it_value disarms
	its := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	syscall.RawSyscall6(unix.SYS_TIMERFD_SETTIME, g.fd, 0, uintptr(unsafe.Pointer(&its)), 0, 0, 0)
}

// Close releases the timerfd.
func (g *Guard) Close() {
	if g != nil {
		g.f.Close()
	}
}
