package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What headroom record cannot do is refused before Chromium starts, with
// the fix, and leaves no file behind.
func TestRecordRefuses(t *testing.T) {
	dir := t.TempDir()
	steps := write(t, dir, "bad.steps", "# the session\nclick #go\nhover #menu\n")
	exists := write(t, dir, "exists.har", "{}")
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"off loopback", []string{"http://10.1.2.3:9090/graph"}, ExitUsage, "10.1.2.3 is not this machine; headroom records and sends traffic on loopback only (127.0.0.1, ::1, localhost) unless --allow-remote"},
		{"a later visit off loopback", []string{"http://127.0.0.1:9090/", "--click", "#a", "--visit", "https://example.com/"}, ExitUsage, "example.com is not this machine"},
		{"no page", []string{"--click", "#go"}, ExitUsage, "the first step opens a page: give its URL"},
		{"two URLs", []string{"http://127.0.0.1:1/", "http://127.0.0.1:2/"}, ExitUsage, "record takes one URL, the first page (then --visit for more)"},
		{"a step file's mistake", []string{"http://127.0.0.1:9090/", "--steps", steps}, ExitUsage, `bad.steps:3: "hover" is no step`},
		{"an unknown key", []string{"http://127.0.0.1:9090/", "--press", "F5"}, ExitUsage, `press "F5": the keys are Enter`},
		{"--out exists", []string{"http://127.0.0.1:9090/", "--out", exists}, ExitUsage, "exists.har exists: give another --out, or --force to overwrite it"},
		{"no Chromium", []string{"http://127.0.0.1:9090/", "--chromium", filepath.Join(dir, "chromium")}, ExitError, "Chromium is not installed at " + filepath.Join(dir, "chromium") + ": install it (apt-get install chromium) or give its path with --chromium"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".har")
			code, _, stderr := headroom(t, append([]string{"record", "--out", out}, c.args...)...)
			if code != c.code || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, want %d; stderr lacks %q:\n%s", code, c.code, c.want, stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s was written", out)
			}
		})
	}
	if b, _ := os.ReadFile(exists); string(b) != "{}" {
		t.Errorf("--out without --force overwrote it: %q", b)
	}
	code, _, stderr := headroom(t, "record", "--help")
	if code != ExitOK || !strings.Contains(stderr, "Examples:") || !strings.Contains(stderr, "--click  SELECTOR") {
		t.Errorf("record --help (exit %d):\n%s", code, stderr)
	}
}
