package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/internal/testing/memhttp"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/testbed"
)

func headroom(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return headroomDialing(nil, args...)
}

// memTarget is the target of the tests in virtual time: never dialled,
// Env.Dial (memhttp.Dial) serves it from memory.
const memTarget = "http://127.0.0.1:18065"

// headroomDialing is headroom with Env.Dial: a test in virtual time gives
// memhttp.Dial, the target in memory.
func headroomDialing(dial func(ctx context.Context, network, addr string) (net.Conn, error), args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = Main(context.Background(), Env{Args: args, Stdout: &o, Stderr: &e, Dial: dial})
	return code, o.String(), e.String()
}

// says reports whether out says want, word for word: the summary is
// wrapped and its tables aligned, so spaces and line breaks are not
// compared.
func says(out, want string) bool {
	return strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " "))
}

func write(t *testing.T, dir, name, src string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBadInputExitsNonZeroAndWritesNothing(t *testing.T) {
	dir := t.TempDir()
	tb := httptest.NewServer(testbed.New(testbed.Config{}).Handler())
	defer tb.Close()
	good := write(t, dir, "good.star", "def a(user):\n    user.http.get('/healthz')\nactions = [action('A', a)]\n")
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr []string
	}{
		{"syntax error", []string{"run", write(t, dir, "syntax.star", "def a(user)\n    pass\nactions = [action('A', a)]\n"), "--target", tb.URL},
			ExitUsage, []string{"syntax.star:1:12: syntax error", "hint:"}},
		{"no actions", []string{"run", write(t, dir, "none.star", "def a(user):\n    pass\n"), "--target", tb.URL},
			ExitUsage, []string{"none.star: no actions"}},
		{"negative weight", []string{"run", write(t, dir, "neg.star", "def a(user):\n    pass\nactions = [action('A', a, weight=-1)]\n"), "--target", tb.URL},
			ExitUsage, []string{"neg.star:3:", "weight must be a positive number"}},
		{"unreachable target", []string{"run", good, "--target", "http://127.0.0.1:1"},
			ExitError, []string{"cannot reach target http://127.0.0.1:1", "connection refused", "hint:"}},
		{"missing target", []string{"run", good}, ExitUsage, []string{"--target is required"}},
		{"bad target", []string{"run", good, "--target", "127.0.0.1:8065"}, ExitUsage, []string{"is not an http(s) URL"}},
		{"missing scenario file", []string{"run", filepath.Join(dir, "nope.star"), "--target", tb.URL}, ExitUsage, []string{"nope.star", "no such file"}},
		{"zero users", []string{"run", good, "--target", tb.URL, "--users", "0"}, ExitUsage, []string{"--users must be at least 1"}},
		{"unknown flag", []string{"run", good, "--userz", "3"}, ExitUsage, []string{"flag provided but not defined: -userz"}},
		{"unknown command", []string{"runn"}, ExitUsage, []string{`unknown command "runn"`}},
		{"missing CA file", []string{"run", good, "--target", tb.URL, "--ca", filepath.Join(dir, "ca.pem")}, ExitUsage, []string{"--ca: open", "ca.pem: no such file"}},
		{"CA file without a certificate", []string{"run", good, "--target", tb.URL, "--ca", good}, ExitUsage, []string{"--ca: no PEM certificate in it"}},
		{"certificate without key", []string{"run", good, "--target", tb.URL, "--cert", good}, ExitUsage, []string{"--cert needs --key"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, "out-"+strings.ReplaceAll(c.name, " ", "-"))
			code, _, stderr := headroom(t, append(c.args, "--out", out, "--duration", "1s")...)
			if c.name == "unknown command" {
				code, _, stderr = headroom(t, c.args...)
			}
			if code != c.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, c.code, stderr)
			}
			for _, w := range c.stderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
				t.Errorf("a stack trace reached the user:\n%s", stderr)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("%s was created for a run that never started", out)
			}
		})
	}
}

func TestOutRefusesForeignDirectory(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "notes.txt", "mine")
	good := write(t, t.TempDir(), "good.star", "def a(user):\n    pass\nactions = [action('A', a)]\n")
	code, _, stderr := headroom(t, "run", good, "--target", "http://127.0.0.1:1", "--out", dir)
	if code != ExitUsage || !strings.Contains(stderr, "is not a headroom result directory") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

func TestHelpTeaches(t *testing.T) {
	code, out, _ := headroom(t, "--help")
	if code != ExitOK || !strings.Contains(out, "headroom run examples/chat.star") {
		t.Errorf("top-level help (exit %d):\n%s", code, out)
	}
	for _, cmd := range []string{"run", "testbed"} {
		code, _, stderr := headroom(t, cmd, "--help")
		if code != ExitOK || !strings.Contains(stderr, "Examples:") || !strings.Contains(stderr, "-") {
			t.Errorf("%s --help (exit %d):\n%s", cmd, code, stderr)
		}
	}
	if code, out, _ := headroom(t, "version"); code != 0 || !strings.HasPrefix(out, "headroom ") {
		t.Errorf("version: %d %q", code, out)
	}
}

// TestRunChatAgainstTestbed is the README's main job, small: the example
// scenario against the testbed, with the table and a complete result.json.
func TestRunChatAgainstTestbed(t *testing.T) {
	tb := httptest.NewServer(testbed.New(testbed.Config{}).Handler())
	defer tb.Close()
	out := filepath.Join(t.TempDir(), "first")
	code, stdout, stderr := headroom(t, "run", "../examples/chat.star", "--target", tb.URL,
		"--users", "30", "--ramp", "1s", "--duration", "3s", "--out", out, "--seed", "7")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, w := range []string{"GET /api/v4/channels/{id}/posts", "all requests", "SwitchChannel", "p99", "result: "} {
		if !strings.Contains(stdout, w) {
			t.Errorf("table lacks %q:\n%s", w, stdout)
		}
	}
	if !strings.Contains(stderr, "users 30/30") {
		t.Errorf("no live progress with all users:\n%s", stderr)
	}
	res, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Kind != "run" || res.Status != result.Completed || res.Config.Seed != 7 || res.Config.Users != 30 ||
		!strings.HasPrefix(res.Config.ScenarioHash, "sha256:") || res.StartedAt.IsZero() || !res.EndedAt.After(res.StartedAt) {
		t.Errorf("result header: kind %q status %q seed %d users %d hash %q", res.Kind, res.Status, res.Config.Seed, res.Config.Users, res.Config.ScenarioHash)
	}
	if res.Totals.Count == 0 || res.Totals.Errors != 0 || len(res.Requests) < 3 || len(res.Actions) < 3 {
		t.Errorf("figures: totals %+v, %d requests, %d actions", res.Totals, len(res.Requests), len(res.Actions))
	}
	if len(res.Timeline) < 3 || res.Window.Seconds < 2.5 {
		t.Errorf("timeline %d points, window %.1fs", len(res.Timeline), res.Window.Seconds)
	}
	// A healthy testbed holds no user up: judged, no warning.
	if o := res.Omission; o == nil || o.Warn || o.Stalled != 0 || strings.Contains(stdout, "coordinated omission") {
		t.Errorf("coordinated omission on a healthy testbed: %+v", o)
	}
	// the raw JSON carries the documented per-request fields
	raw, _ := os.ReadFile(filepath.Join(out, result.ResultFile))
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	req0 := generic["requests"].([]any)[0].(map[string]any)
	for _, f := range []string{"count", "errors", "timeouts", "mean_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms", "rps"} {
		if _, ok := req0[f]; !ok {
			t.Errorf("requests[0] lacks %q", f)
		}
	}
	snap, err := result.ReadHistograms(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Requests {
		if h := snap.Requests[s.Name]; h == nil || h.Count != s.Count {
			t.Errorf("histogram of %q does not match its count %d", s.Name, s.Count)
		} else if p99 := float64(h.Hist().ValueAtPercentile(99)) / 1000; p99 != s.P99Ms {
			t.Errorf("%q: p99 from histograms.json %.3f != result.json %.3f", s.Name, p99, s.P99Ms)
		}
	}
}

// An --out that holds a result is refused before anything is sent, with
// a message naming the old result and both fixes; --force lets the run
// go on (here to an unreachable target, so nothing is overwritten).
func TestOutHoldingAResultNeedsForce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "old")
	started := time.Date(2026, 11, 23, 6, 40, 1, 0, time.Local)
	if err := result.Write(dir, &result.Result{Kind: "step", Status: result.Completed, StartedAt: started, Step: &result.Step{}}, nil); err != nil {
		t.Fatal(err)
	}
	good := write(t, t.TempDir(), "good.star", "def a(user):\n    pass\nactions = [action('A', a)]\n")
	for _, cmd := range []string{"run", "step", "ceiling"} {
		code, _, stderr := headroom(t, cmd, good, "--target", "http://127.0.0.1:1", "--levels", "1", "--out", dir)
		if cmd != "step" {
			code, _, stderr = headroom(t, cmd, good, "--target", "http://127.0.0.1:1", "--out", dir)
		}
		if code != ExitUsage {
			t.Errorf("%s: exit %d, want %d", cmd, code, ExitUsage)
		}
		for _, w := range []string{dir + " already holds a step result from 2026-11-23 06:40:01 (status completed)", "--force", "another --out"} {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", cmd, w, stderr)
			}
		}
		if strings.Contains(stderr, "cannot reach target") {
			t.Errorf("%s: the target was tried before --out was checked", cmd)
		}
	}
	code, _, stderr := headroom(t, "run", good, "--target", "http://127.0.0.1:1", "--out", dir, "--force")
	if code != ExitError || !strings.Contains(stderr, "cannot reach target") {
		t.Errorf("with --force: exit %d, want %d at the target check:\n%s", code, ExitError, stderr)
	}
	if r, err := result.Read(dir); err != nil || r.Kind != "step" {
		t.Errorf("a run that never started changed the old result: %v %+v", err, r)
	}
}

// A run that measured nothing (every request failed: https to a plain
// port; or no user finished setup) has its own status and exit code, and
// the terminal says so plainly. Each case in virtual time, the testbed in
// memory: TLS spoken to it fails its handshake, as to any plain port.
func TestMeasuredNothingExits4(t *testing.T) {
	const target, tlsTarget = memTarget, "https://127.0.0.1:18065"
	dir := t.TempDir()
	get := write(t, dir, "get.star", "def a(user):\n    user.http.get('/healthz')\nactions = [action('A', a)]\nthink_time = think.constant('100ms')\n")
	noLogin := write(t, dir, "nologin.star", "def setup(user):\n    user.http.get('/nope', name='login')\ndef a(user):\n    user.http.get('/healthz')\nactions = [action('A', a)]\nthink_time = think.constant('100ms')\n")
	cases := []struct {
		name string
		args []string
		why  string
	}{
		{"run, https to a plain port", []string{"run", get, "--target", tlsTarget, "--insecure", "--users", "2", "--duration", "1s"}, "requests in the measured window failed or timed out"},
		{"step, no user past setup", []string{"step", noLogin, "--target", target, "--levels", "2", "--hold", "1s", "--setup-timeout", "1s"}, "no user finished setup: all "},
		{"ceiling, https to a plain port", []string{"ceiling", get, "--target", tlsTarget, "--insecure", "--start-users", "2", "--max-users", "4",
			"--window", "2s", "--judge", "2s", "--max-duration", "8s", "--measure", "0"}, "requests in the whole search failed or timed out"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dial := memhttp.Dial(t, testbed.New(testbed.Config{}).Handler())
				out := filepath.Join(dir, strings.Fields(c.name)[0])
				code, stdout, stderr := headroomDialing(dial, append(c.args, "--out", out, "--quiet", "--no-report")...)
				if code != ExitNothing {
					t.Errorf("exit %d, want %d\n%s\n%s", code, ExitNothing, stdout, stderr)
				}
				if !strings.Contains(stderr, "headroom: the run measured nothing: ") || !strings.Contains(stderr, c.why) {
					t.Errorf("stderr does not say the run measured nothing (%q):\n%s", c.why, stderr)
				}
				if res, err := result.Read(out); err != nil || res.Status != result.Failed {
					t.Errorf("result: %v, %+v", err, res)
				}
			})
		})
	}
}

// A password in --target is sent to the target but appears nowhere
// headroom prints or writes.
func TestTargetPasswordIsSentButNeverShown(t *testing.T) {
	tb := testbed.New(testbed.Config{}).Handler()
	var auth atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := r.Header.Get("Authorization"); h != "" {
			auth.Store(h)
		}
		tb.ServeHTTP(w, r)
	}))
	defer srv.Close()
	target := strings.Replace(srv.URL, "http://", "http://ann:s3cret@", 1)
	sc := write(t, t.TempDir(), "s.star", "def a(user):\n    user.http.get('/healthz')\nactions = [action('A', a)]\nthink_time = think.constant('100ms')\n")
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := headroom(t, "run", sc, "--target="+target, "--users", "1", "--duration", "1s", "--out", out, "--scrape", target+"/metrics")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if got, _ := auth.Load().(string); got != "Basic YW5uOnMzY3JldA==" {
		t.Errorf("the target saw Authorization %q", got)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if strings.Contains(string(b), "s3cret") {
			t.Errorf("%s holds the password", filepath.Base(f))
		}
	}
	if strings.Contains(stdout+stderr, "s3cret") {
		t.Errorf("the password was printed:\n%s\n%s", stdout, stderr)
	}
	res, _ := result.Read(out)
	if want := "ann:xxxxx@127.0.0.1"; !strings.Contains(res.Config.Target, want) || !strings.Contains(strings.Join(res.Config.Command, " "), want) {
		t.Errorf("config: target %q, command %q", res.Config.Target, res.Config.Command)
	}
	if code, _, stderr := headroom(t, "run", sc, "--target", "ftp://ann:s3cret@host"); code != ExitUsage || strings.Contains(stderr, "s3cret") {
		t.Errorf("a bad target's message shows the password (exit %d): %s", code, stderr)
	}
}

func TestMetricsListenWarnsBeyondLoopback(t *testing.T) {
	sc := write(t, t.TempDir(), "s.star", "def a(user):\n    pass\nactions = [action('A', a)]\n")
	for addr, warn := range map[string]string{":0": "on every interface", "0.0.0.0:0": "on every interface", "127.0.0.1:0": "", "localhost:0": ""} {
		_, _, stderr := headroom(t, "run", sc, "--target", "http://127.0.0.1:1", "--metrics-listen", addr, "--out", filepath.Join(t.TempDir(), "o"))
		switch {
		case warn == "" && strings.Contains(stderr, "warning:"):
			t.Errorf("%s: a warning for a loopback address:\n%s", addr, stderr)
		case warn != "" && (!strings.Contains(stderr, "warning: --metrics-listen "+addr) || !strings.Contains(stderr, warn) || !strings.Contains(stderr, "--metrics-listen 127.0.0.1:0 keeps them on this machine")):
			t.Errorf("%s: no warning naming the exposure and the loopback alternative:\n%s", addr, stderr)
		}
	}
}

// --ui with an address it cannot use is a usage error before any traffic.
func TestUIRefusesABadAddress(t *testing.T) {
	tb := httptest.NewServer(testbed.New(testbed.Config{}).Handler())
	defer tb.Close()
	for _, addr := range []string{"nope", "127.0.0.1:99999"} {
		code, _, stderr := headroom(t, "run", "../examples/chat.star", "--target", tb.URL, "--users", "1", "--duration", "1s",
			"--out", filepath.Join(t.TempDir(), "r"), "--ui", addr)
		if code != ExitUsage || !strings.Contains(stderr, "--ui") {
			t.Errorf("--ui %s: exit %d\n%s", addr, code, stderr)
		}
	}
}
