package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/headroom-dev/headroom/internal/testing/memhttp"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/testbed"
)

// exposition serves a Prometheus text page, as a target's /metrics would.
func exposition(t *testing.T, page string) string {
	t.Helper()
	srv := httptest.NewServer(pageHandler(page))
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

// pageHandler answers every request with page, as Prometheus text.
func pageHandler(page string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Write([]byte(page))
	})
}

// synapsePage is what Synapse 1.163.2 exposes before any request reached
// it: the response-time histogram declared, no sample yet; process_*.
const synapsePage = `# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 7.0627328e+07
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 0.55
# HELP synapse_http_server_responses_total
# TYPE synapse_http_server_responses_total counter
# HELP synapse_http_server_response_time_seconds sec
# TYPE synapse_http_server_response_time_seconds histogram
`

// A ceiling whose --max-duration ends it at once, to read the checks it
// ran from its result.
func checksOfRun(t *testing.T, args ...string) ([]result.CheckDef, string) {
	t.Helper()
	dir := t.TempDir()
	tb := httptest.NewServer(testbed.New(testbed.Config{}).Handler())
	defer tb.Close()
	sc := write(t, dir, "s.star", "def a(user):\n    user.http.get('/healthz')\nactions = [action('A', a)]\nthink_time = think.constant('100ms')\n")
	out := filepath.Join(dir, "out")
	code, _, stderr := headroom(t, append([]string{"ceiling", sc, "--target", tb.URL, "--start-users", "1", "--max-users", "2",
		"--max-duration", "1s", "--out", out, "--quiet", "--no-report"}, args...)...)
	if code != ExitError && code != ExitNothing { // no ceiling found in 1 s, maybe nothing measured
		t.Fatalf("exit %d, want %d or %d; stderr:\n%s", code, ExitError, ExitNothing, stderr)
	}
	res, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	return res.Ceiling.Checks, stderr
}

func names(cs []result.CheckDef) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return strings.Join(out, ", ")
}

// --checks adds to the defaults, a check named as a default replacing it
// in its place; --only-checks uses the file alone; $window is --window,
// and a range written out stays as written.
func TestChecksAddReplaceAndWindow(t *testing.T) {
	dir := t.TempDir()
	file := write(t, dir, "checks.star", `checks = [
    check("client p99 latency (s)", 'histogram_quantile(0.99, sum(rate(loadtest_http_request_time_bucket[$window])) by (le))', threshold=5),
    check("requests (/s)", 'sum(rate(loadtest_http_request_time_count[1m]))', threshold=0.001, below=True),
]
`)
	t.Run("--checks adds", func(t *testing.T) {
		got, stderr := checksOfRun(t, "--checks", file, "--window", "4s")
		want := "client mean latency (s), client p99 latency (s), client 5xx errors (%), client timeouts (%), requests (/s)"
		if names(got) != want {
			t.Fatalf("checks %s, want %s", names(got), want)
		}
		if got[1].Threshold != 5 || got[1].Query != "histogram_quantile(0.99, sum(rate(loadtest_http_request_time_bucket[4s])) by (le))" {
			t.Errorf("the file's p99 check: %+v, want threshold 5 and the window 4s", got[1])
		}
		if !strings.Contains(got[0].Query, "[4s]") || got[4].Query != "sum(rate(loadtest_http_request_time_count[1m]))" {
			t.Errorf("a default's window %q (want 4s); a written-out range %q (want [1m] kept)", got[0].Query, got[4].Query)
		}
		if !strings.Contains(stderr, "5 checks") {
			t.Errorf("stderr does not announce 5 checks:\n%s", stderr)
		}
	})
	t.Run("--only-checks replaces", func(t *testing.T) {
		got, _ := checksOfRun(t, "--only-checks", file)
		if names(got) != "client p99 latency (s), requests (/s)" || !strings.Contains(got[0].Query, "[10s]") {
			t.Errorf("checks %s (%q), want the file's two, at the default window of 10s", names(got), got[0].Query)
		}
	})
	t.Run("not both", func(t *testing.T) {
		code, _, stderr := headroom(t, "ceiling", file, "--target", "http://127.0.0.1:1", "--checks", file, "--only-checks", file)
		if code != ExitUsage || !strings.Contains(stderr, "give one of them") {
			t.Errorf("exit %d, want %d, saying to give one; stderr:\n%s", code, ExitUsage, stderr)
		}
	})
}

// With --scrape, a check naming a metric the endpoint does not expose is
// refused before any request reaches the target, with the name it most
// likely meant.
func TestMisspelledMetricFailsBeforeTraffic(t *testing.T) {
	dir := t.TempDir()
	var requests atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { requests.Add(1) }))
	defer target.Close()
	sc := write(t, dir, "s.star", "def a(user):\n    user.http.get('/')\nactions = [action('A', a)]\n")
	checks := write(t, dir, "checks.star", `checks = [
    check("synapse p99 (s)", 'histogram_quantile(0.99, sum(rate(synapse_http_server_respones_time_seconds_bucket[$window])) by (le))', threshold=2),
]
`)
	out := filepath.Join(dir, "out")
	code, _, stderr := headroom(t, "ceiling", sc, "--target", target.URL, "--scrape", exposition(t, synapsePage), "--checks", checks, "--out", out)
	if code != ExitUsage {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, ExitUsage, stderr)
	}
	for _, w := range []string{"checks.star:2: check \"synapse p99 (s)\": no scraped endpoint exposes synapse_http_server_respones_time_seconds_bucket",
		"did you mean synapse_http_server_response_time_seconds_bucket?\n"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the target got %d requests, want none", n)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s was written for a run that never started", out)
	}
}

// A check with no data source — its metric exposed by no scraped
// endpoint — is reported inactive, in the summary, result.json and the
// report, not as a check that never fired.
//
// The command in virtual time (Env.Dial): the testbed and the scraped
// page in memory, told apart by host. With real sockets, on a busy
// machine, a level's every second could be kept out of judging.
func TestCheckWithoutSourceIsInactive(t *testing.T) {
	synctest.Test(t, checkWithoutSource)
}

func checkWithoutSource(t *testing.T) {
	dir := t.TempDir()
	const target, scraped = "127.0.0.1:18065", "127.0.0.1:19090" // never dialled: Env.Dial serves both
	tb, page := testbed.New(testbed.Config{}).Handler(), pageHandler(synapsePage)
	dial := memhttp.Dial(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host == scraped {
			page.ServeHTTP(w, r)
			return
		}
		tb.ServeHTTP(w, r)
	}))
	sc := write(t, dir, "s.star", "def a(user):\n    user.http.get('/healthz')\nactions = [action('A', a)]\nthink_time = think.constant('100ms')\n")
	fires := write(t, dir, "fires.star", `checks = [check("always", 'vector(1)', threshold=0)]`+"\n")
	out := filepath.Join(dir, "out")
	var o, e bytes.Buffer
	code := Main(context.Background(), Env{Args: []string{"ceiling", sc, "--target", "http://" + target, "--scrape", "http://" + scraped + "/metrics", "--checks", fires,
		"--start-users", "1", "--max-users", "4", "--settle", "1s", "--judge", "3s", "--max-duration", "30s", "--out", out, "--quiet"},
		Stdout: &o, Stderr: &e, Dial: dial})
	stdout, stderr := o.String(), e.String()
	if code != ExitError {
		t.Fatalf("exit %d, want %d (unhealthy from the start); stderr:\n%s", code, ExitError, stderr)
	}
	res, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Ceiling
	i := 4
	if c.Checks[i].Name != "server 5xx errors (%)" || len(c.Checks[i].Requires) < 2 {
		t.Fatalf("check %d: %+v, want the server 5xx check, waiting for any known family", i, c.Checks[i])
	}
	if b := c.Bottleneck[i]; !c.NoSource(i) || b.Evaluations == 0 || b.Inactive != b.Evaluations || b.Fired != 0 {
		t.Errorf("bottleneck %+v over %d seconds evaluated: want inactive in every one of its evaluations", b, len(c.CheckTimeline))
	}
	if c.NoSource(0) || c.NoSource(len(c.Checks)-1) {
		t.Error("a client check or the firing one reported inactive")
	}
	if !says(stdout, "server 5xx errors (%) 0.025 inactive") || !says(stdout, "Inactive, never evaluated (no scraped target exposed what they need): server 5xx errors (%) (mattermost_api_time_count or") {
		t.Errorf("the summary does not say the server 5xx check was inactive:\n%s", stdout)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| inactive |") || !strings.Contains(string(md), "Inactive, never evaluated") {
		t.Errorf("report.md does not show the inactive checks:\n%s", md)
	}
}
