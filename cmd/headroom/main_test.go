package main

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/testbed"
)

// TestCtrlCStopsTheRunAndKeepsItsResult runs the real binary, sends it
// SIGINT as a terminal's Ctrl-C would, and checks that it stops within the
// grace period and still writes a result that says it was interrupted.
func TestCtrlCStopsTheRunAndKeepsItsResult(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "headroom")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	tb := httptest.NewServer(testbed.New(testbed.Config{}).Handler())
	defer tb.Close()
	out := filepath.Join(dir, "run")
	cmd := exec.Command(bin, "run", "../../examples/chat.star", "--target", tb.URL, "--users", "20", "--ramp", "1s",
		"--duration", "5m", "--grace", "2s", "--out", out)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit after Ctrl-C: %v\n%s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("still running 15 s after Ctrl-C\n%s", stderr.String())
	}
	if el := time.Since(start); el > 6*time.Second {
		t.Errorf("took %v to stop with a 2 s grace", el)
	}
	res, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != result.Interrupted || len(res.Timeline) < 2 || res.Totals.Count == 0 {
		t.Errorf("result: status %q, %d timeline points, %d requests", res.Status, len(res.Timeline), res.Totals.Count)
	}
	if !strings.Contains(stdout.String(), "run: interrupted") {
		t.Errorf("the table does not say the run was interrupted:\n%s", stdout.String())
	}
	if _, err := os.Stat(filepath.Join(out, result.HistogramsFile)); err != nil {
		t.Errorf("no histograms after Ctrl-C: %v", err)
	}
}
