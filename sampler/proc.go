package sampler

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrGone is a process that is not there (any more): the server exited,
// or was restarted under another PID.
var ErrGone = errors.New("no such process")

// Proc reads processes from a proc file system.
type Proc struct {
	// Root is the proc file system; "": /proc.
	Root string
}

func (pr Proc) path(pid int, name string) string {
	root := pr.Root
	if root == "" {
		root = "/proc"
	}
	return filepath.Join(root, strconv.Itoa(pid), name)
}

// Alive tells whether process pid exists (a zombie does not count).
func (pr Proc) Alive(pid int) bool {
	st, err := pr.stat(pid)
	return err == nil && st.state != "Z" && st.state != "X"
}

// Exe is the file process pid runs (its /proc/PID/exe); "" when it cannot
// be read (another user's process, without root).
func (pr Proc) Exe(pid int) string {
	exe, err := os.Readlink(pr.path(pid, "exe"))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(exe, " (deleted)")
}

// Python tells whether process pid runs CPython: its program is named
// python…, or it maps a libpython (an embedding program: uwsgi).
func (pr Proc) Python(pid int) bool {
	if strings.HasPrefix(filepath.Base(pr.Exe(pid)), "python") {
		return true
	}
	maps, err := os.ReadFile(pr.path(pid, "maps"))
	return err == nil && bytes.Contains(maps, []byte("/libpython"))
}

// stat is what /proc/PID/stat says of a process.
type stat struct {
	comm, state string
	ppid        int
	start       uint64 // clock ticks after boot
	cpu         uint64 // clock ticks: its user and system time, and its waited-for children's
}

func (pr Proc) stat(pid int) (stat, error) {
	b, err := os.ReadFile(pr.path(pid, "stat"))
	if err != nil {
		return stat{}, err
	}
	// "pid (comm) state ppid ... starttime(22nd)": comm may hold spaces and parentheses.
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return stat{}, fmt.Errorf("%s: not a stat line", pr.path(pid, "stat"))
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 20 {
		return stat{}, fmt.Errorf("%s: not a stat line", pr.path(pid, "stat"))
	}
	st := stat{comm: s[open+1 : end], state: f[0]}
	st.ppid, _ = strconv.Atoi(f[1])
	st.start, _ = strconv.ParseUint(f[19], 10, 64)
	for _, n := range f[11:15] { // utime, stime, cutime, cstime
		t, _ := strconv.ParseUint(n, 10, 64)
		st.cpu += t
	}
	return st, nil
}

// Tick is the clock tick /proc/PID/stat counts CPU time in: USER_HZ,
// 100 a second on every Linux Go runs on.
const Tick = 10 * time.Millisecond

// CPU is the CPU time the kernel counted for pid and its descendants: each
// one's user and system time, and that of the children each has waited
// for (a worker that exited and was reaped still counts). Between two
// calls it is the CPU the tree spent, whatever its threads did.
func (pr Proc) CPU(pid int) (time.Duration, error) {
	if _, err := pr.stat(pid); err != nil {
		return 0, err
	}
	var ticks uint64
	for _, p := range pr.Tree(pid) {
		if st, err := pr.stat(p); err == nil {
			ticks += st.cpu
		}
	}
	return time.Duration(ticks) * Tick, nil
}

// pids lists the processes there are.
func (pr Proc) pids() []int {
	root := pr.Root
	if root == "" {
		root = "/proc"
	}
	ents, _ := os.ReadDir(root)
	var out []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// Tree is pid and its descendants, pid first.
func (pr Proc) Tree(pid int) []int {
	children := map[int][]int{}
	for _, p := range pr.pids() {
		if st, err := pr.stat(p); err == nil {
			children[st.ppid] = append(children[st.ppid], p)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out) && len(out) < 4096; i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// Named finds the process named name: its command name (/proc/PID/comm)
// or the file name of a word of its command line is name ("python3",
// "server.py", "gunicorn"). Of several, the one whose parent is not one
// of them (gunicorn's master, not its workers: --subprocesses follows
// those); more than one such is an error that names them. Process self
// (the profiler, whose own command line names name) is never one.
func (pr Proc) Named(name string, self int) (int, error) {
	var match []int
	for _, p := range pr.pids() {
		if p != self && pr.named(p, name) {
			match = append(match, p)
		}
	}
	var roots []int
	for _, p := range match {
		if st, err := pr.stat(p); err == nil && st.state != "Z" && !slices.Contains(match, st.ppid) {
			roots = append(roots, p)
		}
	}
	switch len(roots) {
	case 0:
		return 0, fmt.Errorf("no process named %q: %w", name, ErrGone)
	case 1:
		return roots[0], nil
	}
	slices.Sort(roots)
	if len(roots) > 10 {
		roots = roots[:10]
	}
	return 0, fmt.Errorf("%d processes are named %q (%s): give --pid", len(roots), name, strings.Trim(fmt.Sprint(roots), "[]"))
}

func (pr Proc) named(pid int, name string) bool {
	if st, err := pr.stat(pid); err == nil && st.comm == name {
		return true
	}
	cmd, err := os.ReadFile(pr.path(pid, "cmdline"))
	if err != nil {
		return false
	}
	for _, w := range bytes.Split(bytes.TrimRight(cmd, "\x00"), []byte{0}) {
		if filepath.Base(string(w)) == name {
			return true
		}
	}
	return false
}

// Target is the process to profile: by PID, or by name, found again at
// each profile (a server restarted has another PID).
type Target struct {
	PID  int
	Name string
}

// Find is the target's PID now; an error wrapping ErrGone when it is
// not there.
func (t Target) Find(pr Proc) (int, error) {
	if t.Name != "" {
		return pr.Named(t.Name, os.Getpid())
	}
	if !pr.Alive(t.PID) {
		return 0, fmt.Errorf("process %d: %w (exited, or restarted under another PID: --name finds it again)", t.PID, ErrGone)
	}
	return t.PID, nil
}

func (t Target) String() string {
	if t.Name != "" {
		return fmt.Sprintf("the process named %q", t.Name)
	}
	return fmt.Sprintf("process %d", t.PID)
}
