//go:build unix

// Package rusage reads what this process has used, for a run's generator
// figures and an agent's status.
package rusage

import (
	"runtime"
	"syscall"
	"time"
)

// CPU is the CPU time this process has used, user and system.
func CPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// PeakRSSMB is this process's peak resident memory, in MiB.
func PeakRSSMB() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	if runtime.GOOS == "darwin" { // bytes there
		return float64(ru.Maxrss) / (1 << 20)
	}
	return float64(ru.Maxrss) / 1024 // KiB on Linux and the BSDs
}

// OpenFiles is the soft open-files limit (Go raises it to the hard one at
// start); 0 if unknown.
func OpenFiles() uint64 {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) != nil {
		return 0
	}
	return uint64(r.Cur)
}
