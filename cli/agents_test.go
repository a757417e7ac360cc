package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/agents"
)

// An agent refuses a weak token and a coordinator off this machine
// without TLS (unless told the network is trusted), each saying what to
// do; a coordinator refuses to take agents without TLS off loopback, and
// makes the token file it is given when there is none.
func TestAgentsRefuseWeakTokensAndPlaintext(t *testing.T) {
	dir := t.TempDir()
	weak, strong := write(t, dir, "weak", "0123456789abcdef0123\n"), write(t, dir, "strong", agents.MakeToken()+"\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"agent", "--coordinator", "127.0.0.1:1", "--token-file", weak, "--wait", "1s"}, "openssl rand -hex 32"},
		{[]string{"agent", "--coordinator", "10.0.0.1:7070", "--token-file", strong, "--wait", "1s"}, "give --tls-ca"},
		{[]string{"agent", "--coordinator", "coordinator.example:7070", "--token-file", strong, "--wait", "1s"}, "or --plaintext"},
	} {
		code, _, stderr := headroom(t, c.args...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, want %d saying %q:\n%s", c.args, code, ExitUsage, c.want, stderr)
		}
	}

	sc := write(t, dir, "s.star", "def a(user):\n    pass\nactions = [action('A', a)]\n")
	made := filepath.Join(dir, "made-token")
	code, _, stderr := headroom(t, "run", sc, "--target", "http://127.0.0.1:1", "--users", "1", "--duration", "1s",
		"--agents", "1", "--listen", "0.0.0.0:0", "--token-file", made, "--agents-wait", "1s")
	if code == ExitOK || !strings.Contains(stderr, "without TLS") || !strings.Contains(stderr, "--plaintext") {
		t.Errorf("a coordinator on every interface without TLS: exit %d:\n%s", code, stderr)
	}
	b, err := os.ReadFile(made)
	if err != nil {
		t.Fatalf("no token made: %v", err)
	}
	if fi, _ := os.Stat(made); fi.Mode().Perm() != 0o600 || !strings.Contains(stderr, "wrote a new token") {
		t.Errorf("the made token file: mode %v; stderr:\n%s", fi.Mode().Perm(), stderr)
	}
	if err := agents.CheckToken([]byte(strings.TrimSpace(string(b)))); err != nil {
		t.Errorf("the made token %q: %v", b, err)
	}
}
