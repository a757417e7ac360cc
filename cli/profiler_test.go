package cli

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The profiler refuses what it should before it serves: an address off
// loopback (pointing to a tunnel), a weak token, no process or two ways
// to name it, an unknown sampler; a process that is not there is an
// error (exit 1), not a usage mistake.
func TestProfilerRefuses(t *testing.T) {
	dir := t.TempDir()
	weak := write(t, dir, "weak", "0123456789abcdef0123\n")
	self := fmt.Sprint(os.Getpid())
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"profiler", "--pid", self, "--listen", "0.0.0.0:6061"}, ExitUsage, "loopback only"},
		{[]string{"profiler", "--pid", self, "--listen", ":6061"}, ExitUsage, "ssh -L"},
		{[]string{"profiler", "--pid", self, "--token-file", weak}, ExitUsage, "openssl rand -hex 32"},
		{[]string{"profiler"}, ExitUsage, "give --pid or --name"},
		{[]string{"profiler", "--pid", self, "--name", "x"}, ExitUsage, "give --pid or --name"},
		{[]string{"profiler", "--pid", self, "--sampler", "gdb"}, ExitUsage, "py-spy, perf or auto"},
		{[]string{"profiler", "--pid", "1073741824", "--listen", "127.0.0.1:0"}, ExitError, "no such process"},
		{[]string{"profiler", "--name", "no-such-program-here", "--listen", "127.0.0.1:0"}, ExitError, `no process named "no-such-program-here"`},
	} {
		code, _, stderr := headroom(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, want %d saying %q:\n%s", c.args, code, c.code, c.want, stderr)
		}
	}
}
