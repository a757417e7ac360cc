package health

import (
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/headroom-dev/headroom/serverstats"
)

// Defaults returns the reference coordinator's health checks that apply to
// what is available, with range windows of window instead of the reference's
// 1m, so a ceiling search can hold each load level for less time.
//
// The four client checks read headroom's own metrics and always apply. The
// server 5xx, CPU and memory checks apply when has reports their metric
// among the scraped series: for 5xx, the status count of any latency family
// of serverstats.Known that carries one (mattermost_api_time_count,
// synapse_http_server_response_time_seconds_count, ...); for CPU and memory,
// node_cpu_seconds_total and node_memory_MemAvailable_bytes. Pass Store.Has,
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
	q := func(s string) string { return ExpandWindow(s, window) }
	// Long polls' errors and timeouts count in the rates, so their count
	// is in the denominator; their latency (time waited) is not in the
	// latency checks.
	const requests = `(sum(rate(loadtest_http_request_time_count[$window])) + (sum(rate(loadtest_http_poll_time_count[$window])) or vector(0)))`
	checks := []Check{
		{
			Name:      "client mean latency (s)",
			Query:     q(`sum(rate(loadtest_http_request_time_sum[$window])) / sum(rate(loadtest_http_request_time_count[$window]))`),
			Threshold: 0.1,
		},
		{
			Name:      "client p99 latency (s)",
			Query:     q(`histogram_quantile(0.99, sum(rate(loadtest_http_request_time_bucket[$window])) by (le))`),
			Threshold: 2,
		},
		{
			Name:      "client 5xx errors (%)",
			Query:     q(`(sum(rate(loadtest_http_errors_total{status_code=~"5.."}[$window])) or vector(0)) / ` + requests + ` * 100`),
			Threshold: 0.025,
		},
		{
			Name:      "client timeouts (%)",
			Query:     q(`(sum(rate(loadtest_http_timeouts_total[$window])) or vector(0)) / ` + requests + ` * 100`),
			Threshold: 0.025,
		},
	}
	if has == nil {
		has = func(string) bool { return true }
	}
	if c, ok := server5xx(serverstats.Known(), has, q); ok {
		checks = append(checks, c)
	}
	if has("node_cpu_seconds_total") {
		checks = append(checks, Check{
			Name:      "CPU utilisation (%)",
			Query:     q(`100 - 100 * avg(irate(node_cpu_seconds_total{mode="idle"}[$window]))`),
			Threshold: 85,
			Requires:  []string{"node_cpu_seconds_total"},
		})
	}
	if has("node_memory_MemAvailable_bytes") && has("node_memory_MemTotal_bytes") {
		checks = append(checks, Check{
			Name:      "memory utilisation (%)",
			Query:     `100 - 100 * avg(node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes)`,
			Threshold: 85,
			Requires:  []string{"node_memory_MemAvailable_bytes"},
		})
	}
	return checks
}

// DroppedArrivalsName names the open model's check on dropped arrivals.
const DroppedArrivalsName = "dropped arrivals (%)"

// OpenDefaults are the defaults of a run of the open model (arrivals at
// a rate): Defaults, whose client checks then read latencies from each
// arrival's intended start, and DroppedArrivals. A run of the closed
// model has no arrivals to drop and does not evaluate that check: it
// takes Defaults.
func OpenDefaults(window time.Duration, has func(metric string) bool) []Check {
	return append(Defaults(window, has), DroppedArrivals(window))
}

// DroppedArrivals fires when more than 1% of the arrivals in the window
// were dropped (loadtest_arrivals_total{outcome="dropped"}): no user of
// the pool was free in time, so that share of the load the rate asks for
// never reached the target, and the latencies do not cover it. With no
// arrival in the window its value is NaN (0/0) and it fires, as every
// check fails closed.
func DroppedArrivals(window time.Duration) Check {
	return Check{
		Name: DroppedArrivalsName,
		Query: ExpandWindow(`(sum(rate(loadtest_arrivals_total{outcome="dropped"}[$window])) or vector(0)) / `+
			`sum(rate(loadtest_arrivals_total[$window])) * 100`, window),
		Threshold: 1,
	}
}

// server5xx is the server 5xx check over the status counts of families
// that has reports (all of them for a nil has): the share of responses
// with a 5xx status, all families together. Its numerator and denominator
// add each family's rate, "or vector(0)" where it has none, so any one
// family present gives a value and none gives 0/0 (fail closed).
func server5xx(families []serverstats.Family, has func(string) bool, q func(string) string) (Check, bool) {
	var errs, all, requires []string
	for _, f := range families {
		e := f.Errors
		if e == nil || has != nil && !has(e.Series) {
			continue
		}
		requires = append(requires, e.Series)
		for _, l := range e.Labels {
			errs = append(errs, fmt.Sprintf(`(sum(rate(%s{%s=~"5.."}[$window])) or vector(0))`, e.Series, l))
		}
		all = append(all, fmt.Sprintf(`sum(rate(%s[$window]))`, e.Series))
	}
	if len(requires) == 0 {
		return Check{}, false
	}
	query := errs[0] + " / " + all[0] + " * 100" // one family: the reference's query
	if len(errs) > 1 {
		for i := range all {
			all[i] = "(" + all[i] + " or vector(0))"
		}
		query = "(" + strings.Join(errs, " + ") + ") / (" + strings.Join(all, " + ") + ") * 100"
	}
	return Check{Name: "server 5xx errors (%)", Query: q(query), Threshold: 0.025, Requires: requires}, true
}

// ExpandWindow writes window (as Prometheus writes a duration: 10s, 1m30s)
// for each $window or ${window} in query, so a check follows --window:
// rate(x[$window]). A range written out, such as [1m], stays as written.
func ExpandWindow(query string, window time.Duration) string {
	w := model.Duration(window).String()
	return strings.NewReplacer("${window}", w, "$window", w).Replace(query)
}
