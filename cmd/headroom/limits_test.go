//go:build linux

package main

import (
	"strings"
	"syscall"
	"testing"
)

// Under a lowered open-files limit (soft and hard, so Go cannot raise it),
// more users than fit are refused with exit 2 before anything is sent.
func TestOpenFilesLimitRefusesTooManyUsers(t *testing.T) {
	code, sig, stdout, stderr := outcome(t, command(t, "nofile=200", nil,
		"run", abs(t, "../../examples/chat.star"), "--target", testbedURL(t), "--users", "500", "--duration", "5s", "--out", t.TempDir()+"/run"))
	if code != 2 || sig != 0 {
		t.Fatalf("exit %d (signal %v), want 2\n%s\n%s", code, sig, stdout, stderr)
	}
	for _, w := range []string{"--users 500 needs 564 open files", "this process may open 200 (ulimit -n)", "run at most 136 users"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	if strings.Contains(stderr, "running ") {
		t.Errorf("the run started:\n%s", stderr)
	}
}

func TestLimitsAreRead(t *testing.T) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		t.Fatal(err)
	}
	l := limits()
	if l.OpenFiles != r.Cur || l.OpenFiles == 0 {
		t.Errorf("open files %d, getrlimit says %d", l.OpenFiles, r.Cur)
	}
	if l.Memory < 64<<20 || l.MemoryOf == "" {
		t.Errorf("memory %d bytes (%s)", l.Memory, l.MemoryOf)
	}
	t.Logf("open files %d; memory %d MiB, %s", l.OpenFiles, l.Memory>>20, l.MemoryOf)
}
