package health

import (
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// Defaults returns the reference coordinator's health checks that apply to
// what is available, with range windows of window instead of the reference's
// 1m, so a ceiling search can hold each load level for less time.
//
// The four client checks read headroom's own metrics and always apply. The
// server 5xx, CPU and memory checks apply when has reports their metric
// (mattermost_api_time_count, node_cpu_seconds_total,
// node_memory_MemAvailable_bytes) among the scraped series; pass Store.Has,
// or a function that asks the external Prometheus. A nil has includes them
// all, each with Requires set, so that a run activates it once a target
// exposes its metric (a labelled histogram appears at its first request).
//
// Error and timeout counters only exist once an error happened, hence
// "or vector(0)" on their numerators, so a healthy run is not "no data".
// The reference's instance=~"app.*" filters are dropped: every scraped
// node_exporter counts. The reference's TCP retransmission checks are not
// defaults (on loopback, OutSegs can be flat, and 0/0 fails closed).
// window is rounded to whole milliseconds; it should be at least twice the
// scrape interval (irate and rate need two samples in it).
func Defaults(window time.Duration, has func(metric string) bool) []Check {
	w := "[" + model.Duration(window).String() + "]"
	q := func(s string) string { return strings.ReplaceAll(s, "[W]", w) }
	checks := []Check{
		{
			Name:      "client mean latency (s)",
			Query:     q(`sum(rate(loadtest_http_request_time_sum[W])) / sum(rate(loadtest_http_request_time_count[W]))`),
			Threshold: 0.1,
		},
		{
			Name:      "client p99 latency (s)",
			Query:     q(`histogram_quantile(0.99, sum(rate(loadtest_http_request_time_bucket[W])) by (le))`),
			Threshold: 2,
		},
		{
			Name:      "client 5xx errors (%)",
			Query:     q(`(sum(rate(loadtest_http_errors_total{status_code=~"5.."}[W])) or vector(0)) / sum(rate(loadtest_http_request_time_count[W])) * 100`),
			Threshold: 0.025,
		},
		{
			Name:      "client timeouts (%)",
			Query:     q(`(sum(rate(loadtest_http_timeouts_total[W])) or vector(0)) / sum(rate(loadtest_http_request_time_count[W])) * 100`),
			Threshold: 0.025,
		},
	}
	if has == nil {
		has = func(string) bool { return true }
	}
	if has("mattermost_api_time_count") {
		checks = append(checks, Check{
			Name:      "server 5xx errors (%)",
			Query:     q(`(sum(rate(mattermost_api_time_count{status_code=~"5.."}[W])) or vector(0)) / sum(rate(mattermost_api_time_count[W])) * 100`),
			Threshold: 0.025,
			Requires:  "mattermost_api_time_count",
		})
	}
	if has("node_cpu_seconds_total") {
		checks = append(checks, Check{
			Name:      "CPU utilisation (%)",
			Query:     q(`100 - 100 * avg(irate(node_cpu_seconds_total{mode="idle"}[W]))`),
			Threshold: 85,
			Requires:  "node_cpu_seconds_total",
		})
	}
	if has("node_memory_MemAvailable_bytes") && has("node_memory_MemTotal_bytes") {
		checks = append(checks, Check{
			Name:      "memory utilisation (%)",
			Query:     `100 - 100 * avg(node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes)`,
			Threshold: 85,
			Requires:  "node_memory_MemAvailable_bytes",
		})
	}
	return checks
}
