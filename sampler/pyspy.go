package sampler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Errors a sampler returns, wrapped with what it said; callers branch on
// them (the profiler answers each with a 503 and its reason).
var (
	// ErrNoSampler: the sampling program (py-spy, perf) is not installed.
	ErrNoSampler = errors.New("sampler not found")
	// ErrPermission: the sampler may not read the process.
	ErrPermission = errors.New("not permitted to sample the process")
	// ErrNotPython: py-spy found no CPython in the process.
	ErrNotPython = errors.New("not a CPython process")
)

// PySpyVersion is the py-spy the scripts install and the profiler is
// tested with.
const PySpyVersion = "0.4.3"

// PySpyInstall says how to install py-spy.
const PySpyInstall = "pip install py-spy==" + PySpyVersion + " (or ./scripts/py-spy.sh install, which puts it in a venv and prints its path for --py-spy)"

// permissionHint says what lets a sampler read another process.
const permissionHint = "run the profiler as root or as the process's user; with kernel.yama.ptrace_scope above 0 (sysctl), as root only"

// PySpy samples a CPython process and its children with py-spy
// (PySpyVersion): `py-spy record --pid PID --duration N --rate R --format
// raw --subprocesses --nonblocking`, its collapsed stacks made a profile
// (Collapsed.Parse). --nonblocking: the process is not paused to be
// read (a stack is now and then torn, the server not slowed). Idle
// threads are not sampled, so the samples are CPU, with one exception:
// py-spy counts a thread waiting for the GIL as running, so a server of
// several Python threads busy at once (ThreadingHTTPServer, a WSGI
// server's threads) has more samples than CPU, the more the longer
// another thread holds the GIL; GIL (py-spy --gil) counts only the
// thread that holds it, and so misses native code that lets it go
// (bcrypt, zlib, a database driver). A Sample takes the process's
// ptrace access (see permissionHint).
type PySpy struct {
	Path string // the py-spy program; "": py-spy on PATH
	Rate int    // samples a second; 0: 100
	GIL  bool   // only the thread holding the GIL (--gil)
	Proc Proc
}

var _ Sampler = PySpy{}

// Sample runs py-spy over process pid for d (whole seconds, at least 1).
func (s PySpy) Sample(ctx context.Context, pid int, d time.Duration) (Parsed, error) {
	path, err := s.path()
	if err != nil {
		return Parsed{}, err
	}
	rate := s.Rate
	if rate <= 0 {
		rate = 100
	}
	secs := max(int(d/time.Second), 1)
	dir, err := os.MkdirTemp("", "headroom-py-spy-")
	if err != nil {
		return Parsed{}, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "stacks.txt")
	// py-spy ends itself after the duration; the deadline is for one
	// that hangs (a process stopped under it).
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+30*time.Second)
	defer cancel()
	args := []string{"record", "--pid", strconv.Itoa(pid), "--duration", strconv.Itoa(secs), "--rate", strconv.Itoa(rate),
		"--format", "raw", "--output", out, "--subprocesses", "--nonblocking"}
	if s.GIL {
		args = append(args, "--gil")
	}
	cmd := exec.CommandContext(ctx, path, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &limitedWriter{w: &stderr, n: 64 << 10}
	cmd.Env = append(os.Environ(), "RUST_BACKTRACE=0")
	start := time.Now()
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return Parsed{}, fmt.Errorf("py-spy: %w", ctx.Err())
		}
		return Parsed{}, s.explain(pid, err, stderr.String())
	}
	b, err := readBounded(out)
	if err != nil {
		return Parsed{}, fmt.Errorf("py-spy's stacks: %w", err)
	}
	return Collapsed{Period: time.Second / time.Duration(rate), Program: s.Proc.Exe(pid), Start: start, Duration: time.Duration(secs) * time.Second}.Parse(b)
}

func (s PySpy) path() (string, error) {
	p := s.Path
	if p == "" {
		p = "py-spy"
	}
	found, err := exec.LookPath(p)
	if err != nil {
		return "", fmt.Errorf("py-spy %w (%s): install it: %s", ErrNoSampler, p, PySpyInstall)
	}
	return found, nil
}

// explain turns py-spy's failure into an error callers branch on.
func (s PySpy) explain(pid int, err error, stderr string) error {
	said := pySpySaid(stderr)
	if said == "" {
		said = err.Error()
	}
	low := strings.ToLower(stderr)
	switch {
	case !s.Proc.Alive(pid):
		return fmt.Errorf("process %d: %w (py-spy: %s)", pid, ErrGone, said)
	case strings.Contains(low, "permission denied") || strings.Contains(low, "operation not permitted"):
		return fmt.Errorf("py-spy: %w %d (%s): %s", ErrPermission, pid, said, permissionHint)
	case strings.Contains(low, "python version") || strings.Contains(low, "python interpreter"):
		return fmt.Errorf("process %d: %w (py-spy: %s): give --sampler perf for native code", pid, ErrNotPython, said)
	}
	return fmt.Errorf("py-spy: %s", said)
}

// pySpySaid is what py-spy's error output says, in a line: its "Error:"
// line and the first cause, without its stack backtrace.
func pySpySaid(stderr string) string {
	var said []string
	for l := range strings.Lines(stderr) {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "Error:"):
			said = append(said, strings.TrimSpace(strings.TrimPrefix(l, "Error:")))
		case len(said) == 1 && strings.HasPrefix(l, "0:"):
			said = append(said, strings.TrimSpace(strings.TrimPrefix(l, "0:")))
		case strings.HasPrefix(l, "Stack backtrace"):
			return firstLine(strings.Join(said, ": "))
		}
	}
	return firstLine(strings.Join(said, ": "))
}

// readBounded reads a sampler's output file, MaxInput at most.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxInput+1))
	if err == nil && len(b) > MaxInput {
		err = fmt.Errorf("more than %d MiB: not read", MaxInput>>20)
	}
	return b, err
}

// limitedWriter keeps the first n bytes written to it, and drops the rest.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.n -= k
		_, _ = l.w.Write(p[:k])
	}
	return len(p), nil
}

// firstLine is s's first line, at most 300 bytes: what a sampler said,
// for an HTTP answer and a log.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return cut(s, 300)
}
