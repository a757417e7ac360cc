package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/health"
	"github.com/headroom-dev/headroom/scenario"
	"github.com/headroom-dev/headroom/serverstats"
)

// evaluation is src's checks wired as headroom ceiling wires its own.
func evaluation(t *testing.T, src CheckSource) Evaluation {
	t.Helper()
	e, err := NewEvaluation(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	return *e
}

// The checks a ceiling judges: the defaults (the open model's with
// --open), the scenario's in their place, a file's added (one named as a
// default replacing it where it stood), or a file's alone; a bad one is
// refused naming its file and line, as a usage error.
func TestNewEvaluationPicksTheChecks(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "checks.star")
	if err := os.WriteFile(file, []byte(`checks = [
    check("client p99 latency (s)", 'histogram_quantile(0.99, sum(rate(loadtest_http_request_time_bucket[$window])) by (le))', threshold=5),
    check("requests (/s)", 'sum(rate(loadtest_http_request_time_count[1m]))', threshold=0.001, below=True),
]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	names := func(e Evaluation) string {
		var out []string
		for _, c := range e.Checks {
			out = append(out, c.Name)
		}
		return strings.Join(out, ", ")
	}
	added := evaluation(t, CheckSource{Window: 4 * time.Second, Add: file})
	if got, want := names(added), "client mean latency (s), client p99 latency (s), client 5xx errors (%), client timeouts (%), requests (/s)"; got != want {
		t.Errorf("--checks: %s, want %s", got, want)
	}
	if q := added.Checks[1].Query; !strings.Contains(q, "[4s]") || added.Checks[1].Threshold != 5 {
		t.Errorf("the file's p99 check %+v: want threshold 5, window 4s", added.Checks[1])
	}
	if added.EvaluatorName != "embedded" || added.Store == nil || added.Scraper != nil || added.Has("process_cpu_seconds_total") {
		t.Errorf("nothing scraped: want the embedded engine, no scraper, no server metric; got %+v", added)
	}
	if got := names(evaluation(t, CheckSource{Window: time.Second, Only: file})); got != "client p99 latency (s), requests (/s)" {
		t.Errorf("--only-checks: %s", got)
	}
	if got := names(evaluation(t, CheckSource{Window: time.Second, Open: true})); !strings.Contains(got, "dropped arrivals") {
		t.Errorf("the open model's defaults lack the dropped arrivals: %s", got)
	}
	bad := []scenario.CheckSpec{{Name: "bad", Query: "sum(", Threshold: 1, Path: "s.star", Line: 7}}
	of := func(src CheckSource) (string, error) {
		_, err := NewEvaluation(context.Background(), src)
		if ee, ok := err.(*EvaluationError); ok {
			return ee.Of, err
		}
		return "not an EvaluationError", err
	}
	if what, err := of(CheckSource{Window: time.Second, Scenario: bad}); what != "checks" || !strings.HasPrefix(err.Error(), "s.star:7: ") {
		t.Errorf("a bad query: %s %v, want an EvaluationError of the checks naming s.star:7", what, err)
	}
	if what, err := of(CheckSource{Scrape: []string{"ftp://x"}}); what != "scrape" {
		t.Errorf("a bad scrape URL: %s %v, want an EvaluationError of the scrape", what, err)
	}
}

// Which names a user's check may use before traffic: what an endpoint
// exposes or declares, headroom's own, and the samples of a latency family
// headroom reads (it may appear only with the target's first request).
// The defaults are never refused: one whose metric is missing is inactive.
func TestCheckMetricsBeforeTraffic(t *testing.T) {
	spec := func(name, query string, line int32) scenario.CheckSpec {
		return scenario.CheckSpec{Name: name, Query: query, Path: "c.star", Line: line}
	}
	specs := []scenario.CheckSpec{
		spec("exposed", "sum(rate(process_cpu_seconds_total[10s]))", 1),
		spec("own", "sum(rate(loadtest_http_request_time_count[10s])) + min(up) + sum(scrape_duration_seconds)", 2),
		spec("late", `sum(rate(mattermost_api_time_count{status_code="500"}[10s])) + sum(rate(myapp_rpc_seconds_bucket[10s]))`, 3),
		spec("typo", "sum(rate(proces_cpu_seconds_total[10s]))", 4),
		spec("unrelated", "sum(nginx_connections_active)", 5),
	}
	set := checkSet{checks: health.Defaults(0, nil), from: map[string]scenario.CheckSpec{}}
	for _, s := range specs {
		set.checks = append(set.checks, health.Check{Name: s.Name, Query: s.Query, Threshold: 1})
		set.from[s.Name] = s
	}
	rpc, _ := serverstats.ParseFamily("myapp_rpc_seconds:rpc")
	err := set.checkMetrics(map[string]bool{"process_cpu_seconds_total": true, "process_resident_memory_bytes": true},
		serverstats.WithFamilies([]serverstats.Family{rpc}), []string{"http://user:secret@127.0.0.1:9/metrics"})
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, w := range []string{"c.star:4: check \"typo\": no scraped endpoint exposes proces_cpu_seconds_total\n  did you mean process_cpu_seconds_total?",
		"c.star:5: check \"unrelated\": no scraped endpoint exposes nginx_connections_active\n  no metric they expose has a name close to it (2 names",
		"xxxxx@127.0.0.1:9"} {
		if !strings.Contains(msg, w) {
			t.Errorf("error lacks %q:\n%s", w, msg)
		}
	}
	for _, no := range []string{`"exposed"`, `"own"`, `"late"`, "node_cpu", "secret"} {
		if strings.Contains(msg, no) {
			t.Errorf("error names %s:\n%s", no, msg)
		}
	}
}
