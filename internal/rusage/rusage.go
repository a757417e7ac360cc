//go:build unix

// Package rusage reads what this process has used, for a run's generator
// figures and an agent's status.
package rusage

import (
	"os"
	"runtime"
	"strconv"
	"strings"
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

// PeakRSSMB is this process's peak resident memory, in MiB: on Linux its
// memory's own high-water mark (VmHWM), since getrusage's also counts
// what the parent held when it started this one (a vfork shares the
// parent's memory up to the exec, and the kernel keeps its peak: a run
// started by a test process of 300 MB would say 300 MB).
func PeakRSSMB() float64 {
	if kb, ok := VmHWM("self"); ok {
		return float64(kb) / 1024
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	if runtime.GOOS == "darwin" { // bytes there
		return float64(ru.Maxrss) / (1 << 20)
	}
	return float64(ru.Maxrss) / 1024 // KiB on Linux and the BSDs
}

// VmHWM is the peak resident memory, in KiB, of process pid ("self", or a
// number) since it last started a program, as Linux's /proc says; false
// where there is none (another system, a process gone).
func VmHWM(pid string) (int64, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb, err == nil
		}
	}
	return 0, false
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
