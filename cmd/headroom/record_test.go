//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/internal/browser"
	"github.com/headroom-dev/headroom/internal/testing/servertest"
	"github.com/headroom-dev/headroom/result"
)

// prometheus starts a real Prometheus (Debian's 2.42) that scrapes itself
// every second, and returns its URL; ready waits until it holds its first
// scrape.
func prometheus(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", servertest.FreePort(t))
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: prometheus\n    static_configs:\n      - targets: [\""+
		addr+"\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	servertest.Start(t, servertest.Prometheus, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	return "http://" + addr
}

// ready waits until the Prometheus at u has scraped itself: its web UI
// then lists its metrics, as a person's would.
func ready(t *testing.T, u string) {
	t.Helper()
	servertest.WaitOK(t, u+"/-/ready", 30*time.Second)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var up struct{ Data struct{ Result []any } }
		resp, err := http.Get(u + "/api/v1/query?query=up")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&up)
			resp.Body.Close()
		}
		if err == nil && len(up.Data.Result) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has not scraped itself within 30 s (%v)", u, err)
		}
	}
}

// TestARecordedPrometheusSessionRunsOnAFreshOne is issue 55's must-show,
// small: a session of Prometheus's own web UI recorded by headless
// Chromium (`headroom record`: the graph page, a query typed and run,
// its graph tab, the targets page), converted (`headroom convert`) and
// run (`headroom run`, 10 users for 4 s) against another, fresh
// Prometheus, with no edit between: under 1% errors (none, in practice),
// and every API call the UI made is in the scenario and was run.
// docs/CONVERT.md has the same for 50 users and 30 s.
func TestARecordedPrometheusSessionRunsOnAFreshOne(t *testing.T) {
	t.Parallel()
	servertest.Require(t, servertest.Prometheus, "prometheus")
	servertest.Require(t, browser.Bin, "chromium")
	recorded, fresh := prometheus(t), prometheus(t) // the fresh one starts while the other is recorded
	ready(t, recorded)
	dir := t.TempDir()
	session, scenario := filepath.Join(dir, "prometheus.har"), filepath.Join(dir, "prometheus.star")

	code, _, _, stderr := outcome(t, command(t, "", nil, "record", recorded+"/graph",
		"--click", "textarea[name=expr]", "--type", "rate(prometheus_http_requests_total[1m])", "--click", ".execute_btn",
		"--click", `a[href="#graph0"]`, "--visit", "/classic/targets", "--out", session))
	t.Logf("headroom record:\n%s", stderr)
	if code != 0 {
		t.Fatalf("record: exit %d", code)
	}
	code, _, _, stderr = outcome(t, command(t, "", nil, "convert", session, "--out", scenario))
	if code != 0 {
		t.Fatalf("convert: exit %d\n%s", code, stderr)
	}
	src, err := os.ReadFile(scenario)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("headroom convert: %s%s", stderr, src)
	// The metric typed is one the UI's list of metrics gave, a name: sent
	// as typed, not taken from its place in the fresh server's list (which
	// holds other names as the server runs longer).
	if !regexp.MustCompile(`(?m)^    user\.http\.get\("/api/v1/query\?query=rate\(prometheus_http_requests_total%5B1m%5D\)`).Match(src) ||
		regexp.MustCompile(`json "data\.[0-9]+"`).Match(src) {
		t.Errorf("the scenario does not send the metric's name as typed")
	}

	ready(t, fresh)
	out := filepath.Join(dir, "run")
	code, _, _, stderr = outcome(t, command(t, "", nil, "run", scenario, "--target", fresh, "--users", "10", "--duration", "4s",
		"--quiet", "--no-report", "--out", out))
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	res, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]int64{}
	for _, r := range res.Requests {
		ran[r.Name] = r.Count
	}
	var actionErrors int64
	for _, a := range res.Actions {
		actionErrors += a.Errors
	}
	t.Logf("against a fresh Prometheus: %d requests, %d errors, %d actions failed; by name %v", res.Totals.Count, res.Totals.Errors, actionErrors, ran)
	if res.Totals.Count == 0 || res.Totals.Errors*100 >= res.Totals.Count || actionErrors > 0 {
		t.Errorf("%d requests, %d errors, %d actions failed: want under 1%% errors and no action failed", res.Totals.Count, res.Totals.Errors, actionErrors)
	}
	for _, n := range []string{"GET /graph", "GET /classic/graph", "GET /api/v1/query", "GET /api/v1/label/__name__/values",
		"GET /api/v1/query_range", "GET /classic/targets"} {
		if !strings.Contains(string(src), `name="`+n+`"`) || ran[n] == 0 {
			t.Errorf("%s: not in the scenario, or not run (%d)", n, ran[n])
		}
	}
}
