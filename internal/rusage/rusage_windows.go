// Package rusage reads what this process has used, for a run's generator
// figures and an agent's status.
package rusage

import (
	"syscall"
	"time"
)

// CPU is the CPU time this process has used, user and system.
func CPU() time.Duration {
	var creation, exit, kernel, user syscall.Filetime
	if syscall.GetProcessTimes(syscall.Handle(^uintptr(0)), &creation, &exit, &kernel, &user) != nil {
		return 0
	}
	ticks := func(f syscall.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) } // 100 ns each
	return time.Duration((ticks(kernel) + ticks(user)) * 100)
}

// PeakRSSMB is 0 on Windows: its peak working set needs psapi, which the
// syscall package does not expose; reports then leave the figure out.
func PeakRSSMB() float64 { return 0 }

// OpenFiles is 0 (unknown) on Windows, which sets no such limit on sockets.
func OpenFiles() uint64 { return 0 }
