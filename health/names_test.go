package health

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/prom"
)

func TestCheckMetrics(t *testing.T) {
	c := Check{Query: `histogram_quantile(0.99, sum(rate(a_bucket[1m])) by (le)) + sum(rate({__name__="b_total", job="x"}[1m]))` +
		` + sum(rate(a_bucket[5m])) by (le) * 0 + count({__name__=~"c.*"}) * 0 + scalar(up)`}
	if got := c.Metrics(); !slices.Equal(got, []string{"a_bucket", "b_total", "up"}) {
		t.Errorf("Metrics() = %v, want a_bucket, b_total, up", got)
	}
	if got := (Check{Query: "rate(x[1m]"}).Metrics(); got != nil {
		t.Errorf("Metrics() of a query that does not parse = %v, want nil", got)
	}
}

func TestNearest(t *testing.T) {
	names := []string{"synapse_http_server_response_time_seconds_bucket", "synapse_http_server_response_time_seconds_count",
		"synapse_http_server_response_time_seconds_sum", "synapse_http_server_responses_total", "process_cpu_seconds_total", "up"}
	for _, c := range []struct {
		name string
		want []string
	}{
		{"synapse_http_server_respones_time_seconds_bucket", []string{"synapse_http_server_response_time_seconds_bucket"}},
		{"synapse_http_server_response_time_seconds", []string{"synapse_http_server_response_time_seconds_sum",
			"synapse_http_server_response_time_seconds_count", "synapse_http_server_response_time_seconds_bucket"}},
		{"process_cpu_second_total", []string{"process_cpu_seconds_total"}},
		{"mattermost_api_time_count", nil},
	} {
		if got := Nearest(c.name, names, 3); !slices.Equal(got, c.want) {
			t.Errorf("Nearest(%q) = %v, want %v", c.name, got, c.want)
		}
	}
}

// Exposed lists what a target exposes as a query names it, and the
// families a # TYPE line declares before their first sample (as Synapse's
// Python client writes a labelled histogram no request has reached).
func TestExposed(t *testing.T) {
	page := `# HELP synapse_http_server_response_time_seconds sec
# TYPE synapse_http_server_response_time_seconds histogram
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 0.55
# TYPE http_server_requests_seconds summary
http_server_requests_seconds_count{uri="/"} 1
http_server_requests_seconds_sum{uri="/"} 0.1
`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write([]byte(page))
	}))
	defer srv.Close()
	sc, err := prom.NewScraper(nil, []string{srv.URL + "/metrics"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sc.Exposed(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"synapse_http_server_response_time_seconds_bucket", "synapse_http_server_response_time_seconds_count",
		"synapse_http_server_response_time_seconds_sum", "process_cpu_seconds_total", "http_server_requests_seconds",
		"http_server_requests_seconds_count", "http_server_requests_seconds_sum"} {
		if !got[n] {
			t.Errorf("%s not exposed", n)
		}
	}
	if got["synapse_http_server_response_time_seconds"] || got["http_server_requests_seconds_bucket"] || len(got) != 7 {
		t.Errorf("exposed %v: want only the names a query can select", got)
	}

	down, _ := prom.NewScraper(nil, []string{srv.URL + "/metrics", "http://127.0.0.1:1/metrics"}, nil)
	got, err = down.Exposed(context.Background())
	if err == nil || !strings.Contains(err.Error(), "http://127.0.0.1:1/metrics") || !got["process_cpu_seconds_total"] {
		t.Errorf("one target down: %v, %d names; want an error naming it, and the other's names", err, len(got))
	}
}
