package cli

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/headroom-dev/headroom/internal/testing/memhttp"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/testbed"
)

func TestCeilingBadInputFailsBeforeTraffic(t *testing.T) {
	dir := t.TempDir()
	tb := httptest.NewServer(testbed.New(testbed.Config{}).Handler())
	defer tb.Close()
	good := write(t, dir, "good.star", "def a(user):\n    user.http.get('/healthz')\nactions = [action('A', a)]\n")
	badQuery := write(t, dir, "badq.star", "checks = [\n    check('p99', 'histogram_quantile(0.99, sum(rate(x[1m])) by (le)', threshold=2),\n]\n")
	badThreshold := write(t, dir, "badt.star", "checks = [check('p99', 'up', threshold='two')]\n")
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr []string
	}{
		{"invalid PromQL", []string{"--checks", badQuery}, ExitUsage, []string{"badq.star:2:", `check "p99"`, "1:", "parse error"}},
		{"threshold not a number", []string{"--checks", badThreshold}, ExitUsage, []string{"badt.star:1:", "threshold is a string, want a number"}},
		{"prometheus not answering", []string{"--prometheus", "http://127.0.0.1:1", "--metrics-listen", "127.0.0.1:0"}, ExitError, []string{"http://127.0.0.1:1"}},
		{"prometheus without metrics-listen", []string{"--prometheus", "http://127.0.0.1:1"}, ExitUsage, []string{"--metrics-listen", "scrape_configs"}},
		{"bad precision", []string{"--precision", "150%"}, ExitUsage, []string{"percentage in (0, 100)"}},
		{"bad controller", []string{"--controller", "magic"}, ExitUsage, []string{"want search or linear"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, "out-"+strings.ReplaceAll(c.name, " ", "-"))
			args := append([]string{"ceiling", good, "--target", tb.URL, "--out", out}, c.args...)
			code, _, stderr := headroom(t, args...)
			if code != c.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, c.code, stderr)
			}
			for _, w := range c.stderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("%s was written for a run that never started", out)
			}
		})
	}
}

// An unreachable scrape endpoint is a warning with its URL; checks on its
// metrics fail closed, and the result says which and why.
func TestCeilingUnreachableScrapeFailsClosed(t *testing.T) {
	synctest.Test(t, unreachableScrape)
}

// unreachableScrape runs in virtual time: the testbed in memory, and the
// scrape's address refusing every connection, as a port nothing listens on.
func unreachableScrape(t *testing.T) {
	dir := t.TempDir()
	target := memhttp.Dial(t, testbed.New(testbed.Config{}).Handler())
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == "127.0.0.1:1" {
			return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
		}
		return target(ctx, network, addr)
	}
	sc := write(t, dir, "s.star", "def a(user):\n    user.http.get('/healthz')\nactions = [action('A', a)]\nthink_time = think.constant('100ms')\n")
	checks := write(t, dir, "checks.star", `checks = [check("app cpu (%)", 'sum(rate(process_cpu_seconds_total{job="scrape"}[5s])) * 100', threshold=85)]`+"\n")
	out := filepath.Join(dir, "out")
	code, stdout, stderr := headroomDialing(dial, "ceiling", sc, "--target", memTarget, "--scrape", "http://127.0.0.1:1/metrics", "--only-checks", checks,
		"--start-users", "1", "--max-users", "4", "--settle", "1s", "--judge", "3s", "--max-duration", "30s", "--out", out, "--quiet")
	if code != ExitError {
		t.Errorf("exit %d, want %d (no ceiling: unhealthy from the start)", code, ExitError)
	}
	if !strings.Contains(stderr, "warning:") || !strings.Contains(stderr, "http://127.0.0.1:1/metrics") {
		t.Errorf("no warning naming the scrape URL:\n%s", stderr)
	}
	for _, w := range []string{"No ceiling found:", "unhealthy from the start", "Could not be evaluated, counted as firing: app cpu (%)", "no data"} {
		if !says(stdout, w) {
			t.Errorf("summary lacks %q:\n%s", w, stdout)
		}
	}
	res, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Ceiling
	if c.SupportedUsers.Found || c.Bottleneck[0].Failed == 0 || c.ScrapeErrors["http://127.0.0.1:1/metrics"] == "" {
		t.Errorf("result: found=%v bottleneck=%+v scrape errors=%v", c.SupportedUsers.Found, c.Bottleneck, c.ScrapeErrors)
	}
}

// ceiling --repeat 2 --warm-up: each search warms up first (its decisions
// say so, nothing judged there), each writes its own result, and the
// repeats' account names both answers and their span. In virtual time,
// the testbed in memory (Env.Dial).
func TestCeilingRepeatsWarmedSearches(t *testing.T) {
	synctest.Test(t, repeatsWarmed)
}

func repeatsWarmed(t *testing.T) {
	dir := t.TempDir()
	dial := memhttp.Dial(t, testbed.New(testbed.Config{}).Handler())
	sc := write(t, dir, "s.star", "def a(user):\n    user.http.get('/healthz')\nactions = [action('A', a)]\nthink_time = think.constant('100ms')\n")
	checks := write(t, dir, "checks.star", `checks = [check("users", "loadtest_users_ready", threshold=3)]`+"\n")
	out := filepath.Join(dir, "out")
	code, stdout, stderr := headroomDialing(dial, "ceiling", sc, "--target", memTarget, "--only-checks", checks, "--window", "1s", "--settle", "1s", "--judge", "1s",
		"--start-users", "2", "--warm-up", "6", "--max-users", "8", "--measure", "0", "--max-duration", "1m", "--repeat", "2", "--out", out, "--quiet", "--no-report")
	if code != ExitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	for k := 1; k <= 2; k++ {
		res, err := result.Read(filepath.Join(out, fmt.Sprintf("repeat-%d", k)))
		if err != nil {
			t.Fatal(err)
		}
		c := res.Ceiling
		if s := c.SupportedUsers; !s.Found || s.Value != 3 || s.High != 4 {
			t.Errorf("search %d: %+v, want 3 [3, 4)", k, s)
		}
		if !strings.Contains(c.Decisions[0].Reason, "warm up: set 6 users up before the search") || !strings.Contains(c.Decisions[1].Reason, "warmed up: 6 users set up") {
			t.Errorf("search %d: first decisions %+v", k, c.Decisions[:2])
		}
		for _, l := range c.Levels {
			if l.Users == 6 {
				t.Errorf("search %d judged the warm-up's level: %+v", k, l)
			}
		}
	}
	if !strings.Contains(stdout, "Repeats: 3 [3, 4), 3 [3, 4): 3 users, in [3, 4) together; the answer moved +0.0% from the first search to the last") {
		t.Errorf("stdout lacks the repeats' line:\n%s", stdout)
	}
	b, err := os.ReadFile(filepath.Join(out, RepeatsFile))
	if err != nil || !strings.Contains(string(b), `"searches"`) {
		t.Errorf("%s: %v\n%s", RepeatsFile, err, b)
	}
}

// Two searches that do not land inside each other's intervals say so, and
// the span covers both.
func TestRepeatsThatMoveSaySo(t *testing.T) {
	rp := repeats{Unit: result.UnitUsers, Searches: []result.Supported{
		{Value: 220, Low: 209, High: 262, Found: true}, {Value: 286, Low: 271, High: 295, Found: true}}}
	rp.combine()
	if rp.Value != 253 || rp.Low != 209 || rp.High != 295 || math.Abs(rp.Drift-0.3) > 1e-9 {
		t.Errorf("%+v", rp)
	}
	if !strings.Contains(rp.text(), "search 2's answer 286 lies outside search 1's [209, 262)") || !strings.Contains(rp.text(), "--warm-up") {
		t.Errorf("%s", rp.text())
	}
	rp = repeats{Unit: result.UnitUsers, Searches: []result.Supported{{Value: 40, Low: 40, High: 0, Found: false}, {Value: 38, Low: 38, High: 40, Found: true}}}
	rp.combine()
	if rp.Value != 38 || rp.High != 0 || rp.Low != 38 {
		t.Errorf("one search without an upper bound: %+v", rp)
	}
}
