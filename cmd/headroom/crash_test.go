//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/headroom-dev/headroom/result"
)

// A panic in a user's goroutine is caught: exit 5 (never 2, the code for
// bad input), the stack on stderr, and the result written as stopped.
func TestPanicExitsInternalAndKeepsTheResult(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	code, sig, stdout, stderr := outcome(t, command(t, "", []string{"HEADROOM_TEST_PANIC=user"},
		"run", abs(t, "../../examples/chat.star"), "--target", testbedURL(t), "--users", "3", "--duration", "30s", "--out", out, "--quiet", "--no-report"))
	if code != 5 || sig != 0 {
		t.Fatalf("exit %d (signal %v), want 5\n%s\n%s", code, sig, stdout, stderr)
	}
	for _, w := range []string{"headroom: internal error, a bug in headroom", "panic in user ", "HEADROOM_TEST_PANIC=user", "goroutine "} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	res, err := result.Read(out)
	if err != nil || res.Status != result.Stopped {
		t.Fatalf("result: %v %+v", err, res)
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "internal error") || !says(stdout, "This run was stopped early by headroom") {
		t.Errorf("notes %v; stdout:\n%s", res.Notes, stdout)
	}
}

// A fatal runtime error cannot be caught: headroom dies by SIGABRT, not
// with exit 2, and the crash report is kept in the result directory.
func TestFatalErrorDiesBySIGABRTWithItsReport(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	code, sig, _, stderr := outcome(t, command(t, "", []string{"HEADROOM_TEST_PANIC=fatal"},
		"run", abs(t, "../../examples/chat.star"), "--target", testbedURL(t), "--users", "2", "--duration", "30s", "--out", out, "--quiet"))
	if sig != syscall.SIGABRT {
		t.Fatalf("exit %d, signal %v; want death by SIGABRT\n%.2000s", code, sig, stderr)
	}
	report, err := os.ReadFile(filepath.Join(out, CrashFile))
	if err != nil {
		t.Fatal(err)
	}
	// The runtime copies the report from the stacks on (its first line,
	// "fatal error: ...", goes to stderr only).
	if !strings.Contains(string(report), "runtime.fatal") || !strings.Contains(string(report), "headroom/cli.testHook") {
		t.Errorf("crash report:\n%.2000s", report)
	}
	if !strings.Contains(stderr, "fatal error: sync: unlock of unlocked mutex") {
		t.Errorf("stderr:\n%.2000s", stderr)
	}
}

// A file size limit (RLIMIT_FSIZE, as a full disk): the probe file fits,
// the result does not. headroom is not killed by SIGXFSZ, prints its
// tables, says the result could not be written anywhere, exits 1 and
// leaves no temporary file.
func TestFileSizeLimitExits1WithTheTables(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	cmd := command(t, "fsize=1024", []string{"TMPDIR=" + t.TempDir()},
		"run", abs(t, "../../examples/chat.star"), "--target", testbedURL(t), "--users", "3", "--duration", "2s", "--out", out, "--quiet")
	code, sig, stdout, stderr := outcome(t, cmd)
	if code != 1 || sig != 0 {
		t.Fatalf("exit %d (signal %v), want 1\n%s\n%s", code, sig, stdout, stderr)
	}
	for _, w := range []string{"all requests", "action count req/s", "setup request count req/s"} {
		if !says(stdout, w) {
			t.Errorf("no table (%q) on stdout:\n%s", w, stdout)
		}
	}
	for _, w := range []string{"could not write the result to " + out, "file too large", "nor to a fallback directory"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	tmps, _ := filepath.Glob(filepath.Join(out, "*.tmp"))
	if len(tmps) > 0 {
		t.Errorf("temporary files left: %v", tmps)
	}
}
