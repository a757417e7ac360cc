package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/headroom-dev/headroom/cli"
	"github.com/headroom-dev/headroom/internal/rusage"
)

// limits reads what this process may use. Go's os package has already
// raised the soft open-files limit to the hard one at start.
func limits() cli.Limits {
	var l cli.Limits
	l.OpenFiles = rusage.OpenFiles()
	l.Memory, l.MemoryOf = memTotal(), "the machine's memory (MemTotal)"
	if c := cgroupMemory(); c > 0 && (l.Memory == 0 || c < l.Memory) {
		l.Memory, l.MemoryOf = c, "the cgroup's memory limit"
	}
	l.Ports = portRange()
	return l
}

// portRange is the number of ephemeral ports (ip_local_port_range); 0 if
// unknown.
func portRange() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || hi < lo {
		return 0
	}
	return hi - lo + 1
}

// memTotal is MemTotal from /proc/meminfo, in bytes; 0 if unknown.
func memTotal() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// cgroupMemory is this process's cgroup memory limit in bytes (cgroup v2
// memory.max, else v1 memory.limit_in_bytes); 0 when there is none.
func cgroupMemory() uint64 {
	b, _ := os.ReadFile("/proc/self/cgroup")
	var paths []string
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		switch {
		case len(parts) < 3:
		case parts[0] == "0" && parts[1] == "": // v2
			paths = append(paths, filepath.Join("/sys/fs/cgroup", parts[2], "memory.max"), "/sys/fs/cgroup/memory.max")
		case strings.Contains(","+parts[1]+",", ",memory,"): // v1
			paths = append(paths, filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes"), "/sys/fs/cgroup/memory/memory.limit_in_bytes")
		}
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n >= 1<<60 { // "max", or v1's "no limit"
			return 0
		}
		return n
	}
	return 0
}
