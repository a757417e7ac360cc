// Package servertest starts the real servers tests run beside headroom
// (Prometheus, node_exporter): on 127.0.0.1, with their output in a log,
// killed by PID when the test ends. For tests only.
package servertest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Binaries of Debian's packages, which scripts/test.sh installs.
const (
	Prometheus   = "/usr/bin/prometheus"
	NodeExporter = "/usr/bin/prometheus-node-exporter"
)

// Require fails the test, never skips it, when a server binary is missing.
func Require(t testing.TB, path, pkg string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is missing (%v): run scripts/test.sh, which installs the Debian package %s", path, err, pkg)
	}
}

// FreePort returns a port that was free on 127.0.0.1 a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start starts bin with its output in a log file. The test's cleanup kills
// it by PID (and prints its log if the test failed); on Linux the kernel
// also kills it if the test binary dies first.
func Start(t testing.TB, bin string, args ...string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), filepath.Base(bin)+".log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", bin, b)
		}
	})
}

// WaitOK polls url until it answers 200 OK, at most for timeout.
func WaitOK(t testing.TB, url string, timeout time.Duration) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after %v: %v", url, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
