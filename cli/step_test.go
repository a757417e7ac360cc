package cli

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/headroom-dev/headroom/internal/testing/memhttp"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/testbed"
)

// TestStepChatAgainstTestbed is the README's step command, small: the
// example scenario at two levels, with the tables, the knee sentence and a
// step result on disk.
func TestStepChatAgainstTestbed(t *testing.T) {
	t.Parallel()
	synctest.Test(t, stepChat)
}

// stepChat runs in virtual time, the testbed in memory (Env.Dial), its
// WebSockets and its scraped page too: every level's scrapes come back.
func stepChat(t *testing.T) {
	dial := memhttp.Dial(t, testbed.New(testbed.Config{}).Handler())
	const target = memTarget
	out := filepath.Join(t.TempDir(), "step")
	code, stdout, stderr := headroomDialing(dial, "step", "../examples/chat.star", "--target", target,
		"--levels", "20, 40", "--hold", "2s", "--out", out, "--scrape", target+"/metrics")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, w := range []string{"level 1/2 done: 20 users,", "level 2/2 done: 40 users,"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("progress lacks %q:\n%s", w, stderr)
		}
	}
	for _, w := range []string{"users req/s mean (ms) p50 (ms) p95 (ms) p99 (ms) errors held setups/s server CPU (cores) 127.0.0.1:",
		"GET /api/v4/channels/{id}/posts", "SwitchChannel", "errors", "timeouts", "Per level and request", "Per level and action", "knee", "result: "} {
		if !says(stdout, w) {
			t.Errorf("output lacks %q:\n%s", w, stdout)
		}
	}
	res, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	// --settle defaults to a quarter of a short --hold
	if res.Kind != "step" || res.Step == nil || len(res.Step.Levels) != 2 || res.Step.SettleS != 0.5 || res.Step.HoldS != 2 {
		t.Fatalf("result: kind %q, step %+v", res.Kind, res.Step)
	}
	if !says(stdout, res.Step.Knee.Summary) {
		t.Errorf("the knee sentence %q is not in the output", res.Step.Knee.Summary)
	}
	for _, l := range res.Step.Levels {
		if l.Totals.Count == 0 || len(l.Server) != 1 {
			t.Errorf("%d users: %d requests, %d server windows", l.Users, l.Totals.Count, len(l.Server))
		}
	}
}

func TestStepBadFlagsFailBeforeTraffic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tb := httptest.NewServer(testbed.New(testbed.Config{}).Handler())
	defer tb.Close()
	good := write(t, dir, "good.star", "def a(user):\n    user.http.get('/healthz')\nactions = [action('A', a)]\n")
	cases := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"no levels", nil, "--levels: required"},
		{"not a number", []string{"--levels", "48,many"}, `--levels: "many" is not a whole number of users`},
		{"decreasing", []string{"--levels", "96,48"}, "--levels: levels must increase: 48 comes after 96"},
		{"zero", []string{"--levels", "0,10"}, "--levels: level 1 is 0 users"},
		{"no hold", []string{"--levels", "10", "--hold", "0s"}, "--hold must be positive"},
		{"negative settle", []string{"--levels", "10", "--settle", "-1s"}, "--settle must be 0 or more"},
		{"negative ramp rate", []string{"--levels", "10", "--ramp-rate", "-1"}, `invalid value "-1" for flag -ramp-rate: want 0 (all at once)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, "out-"+strings.ReplaceAll(c.name, " ", "-"))
			code, _, stderr := headroom(t, append([]string{"step", good, "--target", tb.URL, "--out", out}, c.args...)...)
			if code != ExitUsage || !strings.Contains(stderr, c.stderr) {
				t.Errorf("exit %d, want %d; stderr lacks %q:\n%s", code, ExitUsage, c.stderr, stderr)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("%s was written for a run that never started", out)
			}
		})
	}
}

func TestStepHelpTeaches(t *testing.T) {
	code, _, stderr := headroom(t, "step", "--help")
	for _, w := range []string{"Examples:", "headroom step examples/chat.star", "--levels 48,96,162,240,336", "knee", "-settle"} {
		if code != ExitOK || !strings.Contains(stderr, w) {
			t.Errorf("step --help (exit %d) lacks %q:\n%s", code, w, stderr)
		}
	}
	if _, out, _ := headroom(t, "--help"); !strings.Contains(out, "  step ") {
		t.Errorf("top-level help does not list step:\n%s", out)
	}
}
