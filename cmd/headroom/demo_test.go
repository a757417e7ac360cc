//go:build linux

package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The README's main command with its port taken by another server (a
// Mattermost on 8065, its default): it exits at once, says so, and sends
// that server nothing.
func TestDemoLoadsOnlyItsOwnTestbed(t *testing.T) {
	var got atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { got.Add(1) }))
	defer other.Close()
	cmd := exec.Command("bash", filepath.Join("..", "..", "scripts", "demo.sh"))
	cmd.Env = append(cmd.Environ(), fmt.Sprintf("PORT=%d", other.Listener.Addr().(*net.TCPAddr).Port))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "is taken by another server") || !strings.Contains(string(out), "set PORT") {
		t.Errorf("demo.sh with its port taken: %v\n%s", err, out)
	}
	if n := got.Load(); n != 0 {
		t.Errorf("the other server got %d requests", n)
	}
	t.Logf("refused after %v (go build included)", time.Since(start).Round(time.Millisecond))
}
