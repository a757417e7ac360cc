package serverstats

import (
	"fmt"
	"strings"

	"github.com/prometheus/common/model"
)

// Family is a server-side latency histogram or summary, kept per value of
// one label: the server's own time by handler, servlet, URI or view.
type Family struct {
	// Metric is the family's name without the _bucket, _sum or _count of
	// its samples, e.g. "mattermost_api_time". Its unit is seconds.
	Metric string
	// Label is the label whose values are the items, e.g. "handler";
	// samples that differ in other labels (status, method) are added up.
	Label string
	// Title names the family in reports, e.g. "API time by handler".
	Title string
	// Errors, if set, counts the family's responses by HTTP status; the
	// default server 5xx check reads it (health.Defaults).
	Errors *StatusCount
}

// StatusCount is a counter of responses (or a histogram's _count) whose
// HTTP status is the value of a label.
type StatusCount struct {
	Series string   // the sample name, e.g. "mattermost_api_time_count"
	Labels []string // the labels that may hold the status, e.g. "status_code"; a series has one of them
}

// Known returns the families headroom reads without being told, each
// checked against the source of the server or library that exposes it.
// A new slice every call: callers may change it.
func Known() []Family {
	return []Family{
		// Mattermost, server/enterprise/metrics/metrics.go: APITimesHistograms
		// (mattermost_api_time, labels handler, method, status_code,
		// origin_client, page_load_context) and StoreTimesHistograms
		// (mattermost_db_store_time, labels method, success). The testbed
		// exposes the same two.
		{Metric: "mattermost_api_time", Label: "handler", Title: "API time by handler",
			Errors: &StatusCount{Series: "mattermost_api_time_count", Labels: []string{"status_code"}}},
		{Metric: "mattermost_db_store_time", Label: "method", Title: "Store time by method"},
		// prometheus-fastapi-instrumentator, metrics.py default():
		// http_request_duration_seconds (labels method, handler) and, for the
		// status, http_requests_total (labels method, status, handler; status
		// "5xx" when grouped, else "503"). Go's promhttp
		// (InstrumentHandlerCounter) documents the same counter name with
		// the status in code: both are read.
		{Metric: "http_request_duration_seconds", Label: "handler", Title: "HTTP request time by handler",
			Errors: &StatusCount{Series: "http_requests_total", Labels: []string{"status", "code"}}},
		// Synapse, synapse/http/request_metrics.py: response_timer is the
		// histogram synapse_http_server_response_time_seconds with labels
		// method, servlet, tag, code, server_name (checked in 1.163.2).
		{Metric: "synapse_http_server_response_time_seconds", Label: "servlet", Title: "Response time by servlet",
			Errors: &StatusCount{Series: "synapse_http_server_response_time_seconds_count", Labels: []string{"code"}}},
		// Spring Boot through Micrometer: the observation http.server.requests
		// (spring-web ServerHttpObservationDocumentation: method, status, uri,
		// exception, outcome) becomes http_server_requests_seconds, a summary
		// (count and sum) unless percentile histograms are on.
		{Metric: "http_server_requests_seconds", Label: "uri", Title: "HTTP server requests by URI",
			Errors: &StatusCount{Series: "http_server_requests_seconds_count", Labels: []string{"status"}}},
		// django-prometheus, django_prometheus/middleware.py:
		// django_http_requests_latency_seconds_by_view_method (labels view,
		// method) and the counter
		// django_http_responses_total_by_status_view_method (labels status,
		// view, method), exposed with _total.
		{Metric: "django_http_requests_latency_seconds_by_view_method", Label: "view", Title: "Request latency by view",
			Errors: &StatusCount{Series: "django_http_responses_total_by_status_view_method_total", Labels: []string{"status"}}},
	}
}

// WithFamilies returns Known with extra added; an extra family of the
// same metric as a known one replaces it (e.g. another label).
func WithFamilies(extra []Family) []Family {
	out := Known()
	for _, f := range extra {
		i := indexOf(out, f.Metric)
		if i < 0 {
			out = append(out, f)
			continue
		}
		if f.Errors == nil {
			f.Errors = out[i].Errors
		}
		out[i] = f
	}
	return out
}

func indexOf(fs []Family, metric string) int {
	for i, f := range fs {
		if f.Metric == metric {
			return i
		}
	}
	return -1
}

// ParseFamily reads FAMILY:LABEL, as --server-latency takes it: a metric
// name (x, x_bucket, x_sum or x_count all name the family x) and the label
// whose values are the items. The label comes after the last colon, as
// metric names may hold colons and label names may not.
func ParseFamily(s string) (Family, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return Family{}, fmt.Errorf("%q: want FAMILY:LABEL, e.g. synapse_http_server_response_time_seconds:servlet", s)
	}
	metric, label := s[:i], s[i+1:]
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		metric = strings.TrimSuffix(metric, suffix)
	}
	if !model.LegacyValidation.IsValidMetricName(metric) {
		return Family{}, fmt.Errorf("%q: %q is not a metric name (letters, digits, _ and :, not starting with a digit)", s, metric)
	}
	if !model.LegacyValidation.IsValidLabelName(label) || strings.HasPrefix(label, "__") {
		return Family{}, fmt.Errorf("%q: %q is not a label name (letters, digits and _, not starting with a digit or __)", s, label)
	}
	return Family{Metric: metric, Label: label, Title: metric + " by " + label}, nil
}

// Names returns the sample names a family's histogram or summary exposes:
// x_bucket, x_sum, x_count and x (a summary's quantiles).
func (f Family) Names() []string {
	return []string{f.Metric, f.Metric + "_bucket", f.Metric + "_sum", f.Metric + "_count"}
}
