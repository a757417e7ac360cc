package sampler

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PerfInstall says how to install perf.
const PerfInstall = "apt-get install linux-perf (Debian; linux-tools-$(uname -r) on Ubuntu)"

// Perf samples native code (a C server: nginx, PostgreSQL) with Linux
// perf: `perf record -F HZ -g -p PIDS -- sleep N` over the process and
// the children it has when the profile starts, then `perf script`, whose
// stacks are collapsed and made a profile. Its functions are the
// programs' and libraries' symbols, each with its file (a library or
// program, "[unknown]" where it has no symbols); a sample stands for the
// period perf gives (a software clock in a VM). It needs
// perf_event_paranoid to allow it (root does), and reads only what the
// process's binaries' symbols say.
type Perf struct {
	Path string // the perf program; "": perf on PATH
	Hz   int    // samples a second; 0: 99
	Proc Proc
}

var _ Sampler = Perf{}

// Sample runs perf over process pid and its children for d.
func (s Perf) Sample(ctx context.Context, pid int, d time.Duration) (Parsed, error) {
	path := s.Path
	if path == "" {
		path = "perf"
	}
	path, err := exec.LookPath(path)
	if err != nil {
		return Parsed{}, fmt.Errorf("perf %w: install it: %s", ErrNoSampler, PerfInstall)
	}
	hz := s.Hz
	if hz <= 0 {
		hz = 99
	}
	secs := max(int(d/time.Second), 1)
	dir, err := os.MkdirTemp("", "headroom-perf-")
	if err != nil {
		return Parsed{}, err
	}
	defer os.RemoveAll(dir)
	data := filepath.Join(dir, "perf.data")
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+30*time.Second)
	defer cancel()
	pids := strings.Trim(strings.ReplaceAll(fmt.Sprint(s.Proc.Tree(pid)), " ", ","), "[]")
	var stderr bytes.Buffer
	rec := exec.CommandContext(ctx, path, "record", "--freq", strconv.Itoa(hz), "--call-graph", "fp", "--pid", pids, "--output", data, "--quiet", "--", "sleep", strconv.Itoa(secs))
	rec.Stdout, rec.Stderr = io.Discard, &limitedWriter{w: &stderr, n: 64 << 10}
	start := time.Now()
	if err := rec.Run(); err != nil {
		if ctx.Err() != nil {
			return Parsed{}, fmt.Errorf("perf record: %w", ctx.Err())
		}
		return Parsed{}, s.explain(pid, err, stderr.String())
	}
	stderr.Reset()
	script := exec.CommandContext(ctx, path, "script", "--input", data, "--fields", "comm,pid,period,ip,sym,dso")
	script.Stderr = &limitedWriter{w: &stderr, n: 64 << 10}
	out, err := script.StdoutPipe()
	if err != nil {
		return Parsed{}, err
	}
	if err := script.Start(); err != nil {
		return Parsed{}, fmt.Errorf("perf script: %w", err)
	}
	b, rerr := io.ReadAll(io.LimitReader(out, MaxInput+1))
	if len(b) > MaxInput {
		_ = script.Process.Kill()
		rerr = fmt.Errorf("more than %d MiB of stacks: not read", MaxInput>>20)
	}
	if err := script.Wait(); err != nil && rerr == nil {
		rerr = fmt.Errorf("%v: %s", err, firstLine(stderr.String()))
	}
	if rerr != nil {
		return Parsed{}, fmt.Errorf("perf script: %w", rerr)
	}
	folded, period, skipped := Fold(b)
	p, err := Collapsed{Period: period, Program: s.Proc.Exe(pid), Start: start, Duration: time.Duration(secs) * time.Second}.Parse(folded)
	if err == nil && skipped > 0 {
		if p.Skipped += skipped; p.Why == "" {
			p.Why = fmt.Sprintf("past %d distinct stacks", MaxStacks)
		}
	}
	return p, err
}

func (s Perf) explain(pid int, err error, stderr string) error {
	said := firstLine(stderr)
	if said == "" {
		said = err.Error()
	}
	low := strings.ToLower(stderr)
	switch {
	case !s.Proc.Alive(pid) || strings.Contains(low, "no such process"):
		return fmt.Errorf("process %d: %w (perf: %s)", pid, ErrGone, said)
	case strings.Contains(low, "permission") || strings.Contains(low, "perf_event_paranoid") || strings.Contains(low, "not permitted"):
		return fmt.Errorf("perf: %w %d (%s): run the profiler as root, or lower kernel.perf_event_paranoid (sysctl)", ErrPermission, pid, said)
	}
	return fmt.Errorf("perf record: %s", said)
}

// Fold collapses `perf script --fields comm,pid,period,ip,sym,dso`'s
// samples into collapsed stacks (Collapsed.Parse's input), root first, a
// process frame at the root as py-spy writes one; period is the time a
// sample stands for (the first sample's: perf's clock gives each the
// same), 10 ms when none says. Distinct stacks past MaxStacks are left
// out, and counted.
func Fold(script []byte) (folded []byte, period time.Duration, skipped int) {
	count := map[string]int64{}
	var order []string
	var stack []string // leaf first
	var head string
	flush := func() {
		if head == "" || len(stack) == 0 {
			head, stack = "", stack[:0]
			return
		}
		slices.Reverse(stack)
		key := head + ";" + strings.Join(stack, ";")
		if _, ok := count[key]; !ok {
			if len(count) >= MaxStacks {
				skipped++
				head, stack = "", stack[:0]
				return
			}
			order = append(order, key)
		}
		count[key]++
		head, stack = "", stack[:0]
	}
	for len(script) > 0 {
		var line []byte
		if i := bytes.IndexByte(script, '\n'); i >= 0 {
			line, script = script[:i], script[i+1:]
		} else {
			line, script = script, nil
		}
		if len(line) > MaxLine {
			continue
		}
		s := string(line)
		switch {
		case strings.TrimSpace(s) == "":
			flush()
		case s[0] != ' ' && s[0] != '\t': // "comm pid period": comm may hold spaces
			flush()
			f := strings.Fields(s)
			if len(f) < 3 {
				continue
			}
			if n, err := strconv.ParseInt(f[len(f)-1], 10, 64); err == nil && n > 0 && period == 0 {
				period = time.Duration(n)
			}
			comm := strings.Join(f[:len(f)-2], " ")
			head = fmt.Sprintf("process %s:%q", f[len(f)-2], comm)
		case head != "":
			stack = append(stack, perfFrame(s))
		}
	}
	flush()
	var buf bytes.Buffer
	for _, k := range order {
		fmt.Fprintf(&buf, "%s %d\n", k, count[k])
	}
	if period <= 0 {
		period = 10 * time.Millisecond
	}
	return buf.Bytes(), period, skipped
}

// perfFrame is a perf script frame, "addr symbol (dso)", as a collapsed
// frame "symbol (dso's file name)"; an unknown symbol is "[unknown]",
// its program's file name beside it.
func perfFrame(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, " \t"); i > 0 {
		s = strings.TrimSpace(s[i+1:]) // the address
	}
	sym, dso := s, ""
	if strings.HasSuffix(s, ")") {
		if i := strings.LastIndex(s, " ("); i >= 0 {
			sym, dso = strings.TrimSpace(s[:i]), s[i+2:len(s)-1]
		}
	}
	sym = strings.NewReplacer(";", ":", "\n", " ").Replace(sym) // ';' splits frames
	if sym == "" {
		sym = "[unknown]"
	}
	if dso == "" || dso == "[unknown]" {
		return sym
	}
	return sym + " (" + strings.ReplaceAll(filepath.Base(dso), ";", ":") + ")"
}
