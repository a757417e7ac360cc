//go:build linux

package main

// Every test file of this package is for Linux: the tests run the built
// binary against real servers and tools (nginx, Synapse, MariaDB, perf,
// chromium) and Linux's limits and signals (Pdeathsig, RLIMIT_FSIZE).

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/testbed"
)

// Environment of the test binary re-run as a launcher (see TestMain).
const (
	execEnv   = "HEADROOM_TEST_EXEC"    // the program to exec
	rlimitEnv = "HEADROOM_TEST_RLIMITS" // e.g. "fsize=4096,nofile=100"
)

var rlimits = map[string]int{"fsize": syscall.RLIMIT_FSIZE, "nofile": syscall.RLIMIT_NOFILE}

// TestMain doubles as a launcher: with HEADROOM_TEST_EXEC set, the test
// binary lowers its own limits (soft and hard) and execs that program,
// which so starts under them. With HEADROOM_TEST_HOG set it is a CPU hog
// (limiter_test.go). Otherwise it runs the tests, with no core files from
// the crash test.
func TestMain(m *testing.M) {
	if d := os.Getenv(hogEnv); d != "" {
		hog(d) // exits
	}
	if prog := os.Getenv(execEnv); prog != "" {
		for _, kv := range strings.Split(os.Getenv(rlimitEnv), ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, err := strconv.ParseUint(v, 10, 64)
			if res, ok := rlimits[k]; !ok || err != nil || syscall.Setrlimit(res, &syscall.Rlimit{Cur: n, Max: n}) != nil {
				os.Stderr.WriteString("launcher: bad limit " + kv + "\n")
				os.Exit(100)
			}
		}
		var env []string
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, execEnv+"=") && !strings.HasPrefix(e, rlimitEnv+"=") {
				env = append(env, e)
			}
		}
		err := syscall.Exec(prog, append([]string{prog}, os.Args[1:]...), env)
		os.Stderr.WriteString("launcher: " + err.Error() + "\n")
		os.Exit(100)
	}
	_ = syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
	dir, err := os.MkdirTemp("", "headroom-bin-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	binDir   string
	binOnce  sync.Once
	binPath  string
	binError error
)

// binary builds headroom once for the package's tests.
func binary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binPath = filepath.Join(binDir, "headroom")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			binError = errors.New("build: " + err.Error() + "\n" + string(out))
		}
	})
	if binError != nil {
		t.Fatal(binError)
	}
	return binPath
}

// command is headroom with args, under the given limits ("" for none)
// and extra environment.
func command(t *testing.T, limits string, env []string, args ...string) *exec.Cmd {
	bin := binary(t)
	cmd := exec.Command(bin, args...)
	if limits != "" {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd = exec.Command(self, args...)
		env = append(env, execEnv+"="+bin, rlimitEnv+"="+limits)
	}
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = t.TempDir() // the default runs/ and any core file land here
	return cmd
}

// outcome runs cmd and returns its exit code (-1 when a signal killed it,
// with the signal), stdout and stderr.
func outcome(t *testing.T, cmd *exec.Cmd) (code int, sig syscall.Signal, stdout, stderr string) {
	t.Helper()
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			return -1, ws.Signal(), o.String(), e.String()
		}
		code = ws.ExitStatus()
	default:
		t.Fatal(err)
	}
	return code, 0, o.String(), e.String()
}

func testbedURL(t *testing.T) string {
	tb := httptest.NewServer(testbed.New(testbed.Config{}).Handler())
	t.Cleanup(tb.Close)
	return tb.URL
}

// TestCtrlCStopsTheRunAndKeepsItsResult runs the real binary, sends it
// SIGINT as a terminal's Ctrl-C would, and checks that it stops within the
// grace period and still writes a result that says it was interrupted.
//
// The target is the testbed, but for the first request for a channel's
// posts, which it never answers: that user is mid-action when Ctrl-C comes,
// so the stop must cut its request at the grace's end (1 s). The stop
// takes that second and the writing of the result: 2 s or so, on a busy
// machine too. A stop that waited for the request would wait for its
// --timeout (10 minutes), and a Ctrl-C not heeded for the run's 5: the
// bound of 30 s lies far from both.
func TestCtrlCStopsTheRunAndKeepsItsResult(t *testing.T) {
	tb := testbed.New(testbed.Config{}).Handler()
	var holding atomic.Bool
	held := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/api/v4/channels/") && strings.HasSuffix(r.URL.Path, "/posts") &&
			holding.CompareAndSwap(false, true) {
			close(held)
			<-r.Context().Done() // headroom gave up on it, or exited
			return
		}
		tb.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	out := filepath.Join(t.TempDir(), "run")
	cmd := command(t, "", nil, "run", abs(t, "../../examples/chat.star"), "--target", srv.URL, "--users", "20", "--ramp", "1s",
		"--duration", "5m", "--grace", "1s", "--timeout", "10m", "--out", out)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	time.Sleep(3 * time.Second)
	select {
	case <-held: // at once, as a rule: most users' first actions ask for posts
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("no user asked for a channel's posts within a minute\n%s", stderr.String())
	}
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit after Ctrl-C: %v\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still running a minute after Ctrl-C\n%s", stderr.String())
	}
	el := time.Since(start)
	t.Logf("stopped %v after Ctrl-C", el.Round(time.Millisecond))
	if el > 30*time.Second || el < time.Second {
		t.Errorf("took %v to stop with a 1 s grace, a user's request held by the target", el)
	}
	res, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != result.Interrupted || len(res.Timeline) < 2 || res.Totals.Count == 0 {
		t.Errorf("result: status %q, %d timeline points, %d requests", res.Status, len(res.Timeline), res.Totals.Count)
	}
	if !says(stdout.String(), "This run was interrupted") {
		t.Errorf("the table does not say the run was interrupted:\n%s", stdout.String())
	}
	if _, err := os.Stat(filepath.Join(out, result.HistogramsFile)); err != nil {
		t.Errorf("no histograms after Ctrl-C: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, CrashFile)); !os.IsNotExist(err) {
		t.Errorf("an empty %s was left behind: %v", CrashFile, err)
	}
}

func abs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// says reports whether out says want, word for word: the summary is
// wrapped and its tables aligned, so spaces and line breaks are not
// compared.
func says(out, want string) bool {
	return strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " "))
}
