package serverstats

import (
	"math"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/headroom-dev/headroom/result"
)

// parse reads an exposition in the Prometheus text format, as
// prom.Scraper does.
func parse(t *testing.T, text string) []*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	byName, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("exposition does not parse: %v\n%s", err, text)
	}
	var out []*dto.MetricFamily
	for _, mf := range byName {
		out = append(out, mf)
	}
	return out
}

// window scrapes before and after, two seconds apart, and returns the
// endpoint's figures between the two scrapes.
func window(t *testing.T, before, after string, extra ...Family) result.ServerTarget {
	t.Helper()
	const url = "http://127.0.0.1:1/metrics"
	start := time.Now()
	w := New([]string{url}, start, extra...)
	w.Gathered(url, parse(t, before), start)
	from := w.Mark(start)
	w.Gathered(url, parse(t, after), start.Add(2*time.Second))
	return w.Result(from, w.Mark(start.Add(2*time.Second))).Targets[0]
}

func group(t *testing.T, tg result.ServerTarget, metric string) result.TimingGroup {
	t.Helper()
	for _, g := range tg.Window.Timings {
		if g.Metric == metric {
			return g
		}
	}
	t.Fatalf("no %s in %+v", metric, tg.Window.Timings)
	return result.TimingGroup{}
}

// Each known family, as its server or library writes it (the label sets
// and bucket bounds of the real thing; Synapse's from 1.163.2's registry),
// gives per-item figures over the window: the requests between the two
// scrapes, other labels (status, method, tag) added up.
func TestKnownFamilies(t *testing.T) {
	cases := []struct {
		name, metric, label, typ string
		before, after            string
		item                     string
		count, meanMs            float64
		p99Max                   float64 // the p99 lies in (0, p99Max] ms; 0: a summary has none
	}{
		{
			name: "Synapse", metric: "synapse_http_server_response_time_seconds", label: "servlet", typ: "histogram",
			item: "RoomSendEventRestServlet", count: 4, meanMs: 100, p99Max: 250,
			before: `# HELP synapse_http_server_response_time_seconds sec
# TYPE synapse_http_server_response_time_seconds histogram
synapse_http_server_response_time_seconds_bucket{code="200",le="0.05",method="PUT",server_name="localhost",servlet="RoomSendEventRestServlet",tag=""} 1.0
synapse_http_server_response_time_seconds_bucket{code="200",le="0.25",method="PUT",server_name="localhost",servlet="RoomSendEventRestServlet",tag=""} 1.0
synapse_http_server_response_time_seconds_bucket{code="200",le="+Inf",method="PUT",server_name="localhost",servlet="RoomSendEventRestServlet",tag=""} 1.0
synapse_http_server_response_time_seconds_count{code="200",method="PUT",server_name="localhost",servlet="RoomSendEventRestServlet",tag=""} 1.0
synapse_http_server_response_time_seconds_sum{code="200",method="PUT",server_name="localhost",servlet="RoomSendEventRestServlet",tag=""} 0.03
`,
			after: `# HELP synapse_http_server_response_time_seconds sec
# TYPE synapse_http_server_response_time_seconds histogram
synapse_http_server_response_time_seconds_bucket{code="200",le="0.05",method="PUT",server_name="localhost",servlet="RoomSendEventRestServlet",tag=""} 2.0
synapse_http_server_response_time_seconds_bucket{code="200",le="0.25",method="PUT",server_name="localhost",servlet="RoomSendEventRestServlet",tag=""} 4.0
synapse_http_server_response_time_seconds_bucket{code="200",le="+Inf",method="PUT",server_name="localhost",servlet="RoomSendEventRestServlet",tag=""} 4.0
synapse_http_server_response_time_seconds_count{code="200",method="PUT",server_name="localhost",servlet="RoomSendEventRestServlet",tag=""} 4.0
synapse_http_server_response_time_seconds_sum{code="200",method="PUT",server_name="localhost",servlet="RoomSendEventRestServlet",tag=""} 0.33
synapse_http_server_response_time_seconds_bucket{code="500",le="0.05",method="PUT",server_name="localhost",servlet="RoomSendEventRestServlet",tag=""} 0.0
synapse_http_server_response_time_seconds_bucket{code="500",le="0.25",method="PUT",server_name="localhost",servlet="RoomSendEventRestServlet",tag=""} 1.0
synapse_http_server_response_time_seconds_bucket{code="500",le="+Inf",method="PUT",server_name="localhost",servlet="RoomSendEventRestServlet",tag=""} 1.0
synapse_http_server_response_time_seconds_count{code="500",method="PUT",server_name="localhost",servlet="RoomSendEventRestServlet",tag=""} 1.0
synapse_http_server_response_time_seconds_sum{code="500",method="PUT",server_name="localhost",servlet="RoomSendEventRestServlet",tag=""} 0.1
`,
		},
		{
			name: "Spring Boot, summary", metric: "http_server_requests_seconds", label: "uri", typ: "summary",
			item: "/owners/{ownerId}", count: 10, meanMs: 20,
			before: `# HELP http_server_requests_seconds
# TYPE http_server_requests_seconds summary
http_server_requests_seconds_count{error="none",exception="none",method="GET",outcome="SUCCESS",status="200",uri="/owners/{ownerId}"} 5
http_server_requests_seconds_sum{error="none",exception="none",method="GET",outcome="SUCCESS",status="200",uri="/owners/{ownerId}"} 0.5
# HELP http_server_requests_seconds_max
# TYPE http_server_requests_seconds_max gauge
http_server_requests_seconds_max{error="none",exception="none",method="GET",outcome="SUCCESS",status="200",uri="/owners/{ownerId}"} 0.2
`,
			after: `# HELP http_server_requests_seconds
# TYPE http_server_requests_seconds summary
http_server_requests_seconds_count{error="none",exception="none",method="GET",outcome="SUCCESS",status="200",uri="/owners/{ownerId}"} 14
http_server_requests_seconds_sum{error="none",exception="none",method="GET",outcome="SUCCESS",status="200",uri="/owners/{ownerId}"} 0.66
http_server_requests_seconds_count{error="none",exception="none",method="GET",outcome="SERVER_ERROR",status="500",uri="/owners/{ownerId}"} 1
http_server_requests_seconds_sum{error="none",exception="none",method="GET",outcome="SERVER_ERROR",status="500",uri="/owners/{ownerId}"} 0.04
# HELP http_server_requests_seconds_max
# TYPE http_server_requests_seconds_max gauge
http_server_requests_seconds_max{error="none",exception="none",method="GET",outcome="SUCCESS",status="200",uri="/owners/{ownerId}"} 0.2
`,
		},
		{
			name: "Spring Boot, percentile histogram", metric: "http_server_requests_seconds", label: "uri", typ: "histogram",
			item: "/vets", count: 2, meanMs: 5, p99Max: 10,
			before: `# TYPE http_server_requests_seconds histogram
http_server_requests_seconds_bucket{exception="None",method="GET",outcome="SUCCESS",status="200",uri="/vets",le="0.001"} 0
http_server_requests_seconds_bucket{exception="None",method="GET",outcome="SUCCESS",status="200",uri="/vets",le="0.01"} 0
http_server_requests_seconds_bucket{exception="None",method="GET",outcome="SUCCESS",status="200",uri="/vets",le="+Inf"} 0
http_server_requests_seconds_count{exception="None",method="GET",outcome="SUCCESS",status="200",uri="/vets"} 0
http_server_requests_seconds_sum{exception="None",method="GET",outcome="SUCCESS",status="200",uri="/vets"} 0
`,
			after: `# TYPE http_server_requests_seconds histogram
http_server_requests_seconds_bucket{exception="None",method="GET",outcome="SUCCESS",status="200",uri="/vets",le="0.001"} 0
http_server_requests_seconds_bucket{exception="None",method="GET",outcome="SUCCESS",status="200",uri="/vets",le="0.01"} 2
http_server_requests_seconds_bucket{exception="None",method="GET",outcome="SUCCESS",status="200",uri="/vets",le="+Inf"} 2
http_server_requests_seconds_count{exception="None",method="GET",outcome="SUCCESS",status="200",uri="/vets"} 2
http_server_requests_seconds_sum{exception="None",method="GET",outcome="SUCCESS",status="200",uri="/vets"} 0.01
`,
		},
		{
			name: "django-prometheus", metric: "django_http_requests_latency_seconds_by_view_method", label: "view", typ: "histogram",
			item: "polls:detail", count: 3, meanMs: 40, p99Max: 50,
			before: `# HELP django_http_requests_latency_seconds_by_view_method Histogram of request processing time labelled by view.
# TYPE django_http_requests_latency_seconds_by_view_method histogram
`,
			after: `# HELP django_http_requests_latency_seconds_by_view_method Histogram of request processing time labelled by view.
# TYPE django_http_requests_latency_seconds_by_view_method histogram
django_http_requests_latency_seconds_by_view_method_bucket{le="0.025",method="GET",view="polls:detail"} 0.0
django_http_requests_latency_seconds_by_view_method_bucket{le="0.05",method="GET",view="polls:detail"} 3.0
django_http_requests_latency_seconds_by_view_method_bucket{le="+Inf",method="GET",view="polls:detail"} 3.0
django_http_requests_latency_seconds_by_view_method_count{method="GET",view="polls:detail"} 3.0
django_http_requests_latency_seconds_by_view_method_sum{method="GET",view="polls:detail"} 0.12
`,
		},
		{
			name: "prometheus-fastapi-instrumentator", metric: "http_request_duration_seconds", label: "handler", typ: "histogram",
			item: "/items/{item_id}", count: 4, meanMs: 50, p99Max: 100,
			before: `# TYPE http_request_duration_seconds histogram
http_request_duration_seconds_bucket{handler="/items/{item_id}",le="0.1",method="GET"} 1.0
http_request_duration_seconds_bucket{handler="/items/{item_id}",le="0.5",method="GET"} 1.0
http_request_duration_seconds_bucket{handler="/items/{item_id}",le="+Inf",method="GET"} 1.0
http_request_duration_seconds_count{handler="/items/{item_id}",method="GET"} 1.0
http_request_duration_seconds_sum{handler="/items/{item_id}",method="GET"} 0.05
`,
			after: `# TYPE http_request_duration_seconds histogram
http_request_duration_seconds_bucket{handler="/items/{item_id}",le="0.1",method="GET"} 5.0
http_request_duration_seconds_bucket{handler="/items/{item_id}",le="0.5",method="GET"} 5.0
http_request_duration_seconds_bucket{handler="/items/{item_id}",le="+Inf",method="GET"} 5.0
http_request_duration_seconds_count{handler="/items/{item_id}",method="GET"} 5.0
http_request_duration_seconds_sum{handler="/items/{item_id}",method="GET"} 0.25
`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := group(t, window(t, c.before, c.after), c.metric)
			if g.Label != c.label || g.Type != c.typ || len(g.Items) != 1 {
				t.Fatalf("group %+v: want one %s by %s, a %s", g, c.metric, c.label, c.typ)
			}
			it := g.Items[0]
			if it.Name != c.item || it.Count != c.count || math.Abs(it.MeanMs-c.meanMs) > 1e-6 || it.RPS != c.count/2 {
				t.Errorf("item %+v: want %s, %v requests at %v ms mean, %v/s", it, c.item, c.count, c.meanMs, c.count/2)
			}
			if c.p99Max == 0 && it.P99Ms != 0 || c.p99Max > 0 && (it.P99Ms <= 0 || it.P99Ms > c.p99Max) {
				t.Errorf("p99 %v ms, want it in (0, %v] (0 for a summary)", it.P99Ms, c.p99Max)
			}
		})
	}
}

// --server-latency names a family headroom does not know, or another
// label of a known one.
func TestExtraFamilies(t *testing.T) {
	before := `# TYPE rpc_duration_seconds histogram
rpc_duration_seconds_bucket{rpc="Search",le="0.1"} 0
rpc_duration_seconds_bucket{rpc="Search",le="+Inf"} 0
rpc_duration_seconds_count{rpc="Search"} 0
rpc_duration_seconds_sum{rpc="Search"} 0
# TYPE http_request_duration_seconds histogram
http_request_duration_seconds_bucket{handler="/a",method="GET",le="+Inf"} 0
http_request_duration_seconds_count{handler="/a",method="GET"} 0
http_request_duration_seconds_sum{handler="/a",method="GET"} 0
`
	// Two requests of 50 ms each since: counts 2, sums 0.1 s.
	after := strings.NewReplacer(`_sum{rpc="Search"} 0`, `_sum{rpc="Search"} 0.1`,
		`_sum{handler="/a",method="GET"} 0`, `_sum{handler="/a",method="GET"} 0.1`, `"} 0`, `"} 2`).Replace(before)
	rpc, err := ParseFamily("rpc_duration_seconds_bucket:rpc")
	if err != nil {
		t.Fatal(err)
	}
	byMethod, err := ParseFamily("http_request_duration_seconds:method")
	if err != nil {
		t.Fatal(err)
	}
	tg := window(t, before, after, rpc, byMethod)
	if g := group(t, tg, "rpc_duration_seconds"); len(g.Items) != 1 || g.Items[0].Name != "Search" || g.Items[0].MeanMs != 50 {
		t.Errorf("rpc_duration_seconds: %+v, want Search at 50 ms", g)
	}
	if g := group(t, tg, "http_request_duration_seconds"); g.Label != "method" || len(g.Items) != 1 || g.Items[0].Name != "GET" {
		t.Errorf("http_request_duration_seconds: %+v, want its items by method", g)
	}
	if got := WithFamilies([]Family{byMethod}); len(got) != len(Known()) || got[indexOf(got, byMethod.Metric)].Errors == nil {
		t.Errorf("another label of a known family: %+v, want it in place, its error count kept", got)
	}
}

func TestParseFamily(t *testing.T) {
	for _, c := range []struct{ in, metric, label, err string }{
		{"synapse_http_server_response_time_seconds:servlet", "synapse_http_server_response_time_seconds", "servlet", ""},
		{"x_count:handler", "x", "handler", ""},
		{"job:latency_seconds:rate5m:route", "job:latency_seconds:rate5m", "route", ""},
		{"no_label", "", "", "want FAMILY:LABEL"},
		{"x:", "", "", "is not a label name"},
		{"x:__name__", "", "", "is not a label name"},
		{"1x:handler", "", "", "is not a metric name"},
		{"x y:handler", "", "", "is not a metric name"},
	} {
		f, err := ParseFamily(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseFamily(%q) = %+v, %v; want an error saying %q", c.in, f, err, c.err)
			}
			continue
		}
		if err != nil || f.Metric != c.metric || f.Label != c.label || f.Title == "" {
			t.Errorf("ParseFamily(%q) = %+v, %v; want %s by %s", c.in, f, err, c.metric, c.label)
		}
	}
}

// A Python process (Synapse, Django) has no Go runtime metrics: its CPU
// and resident memory come from the standard process_* names.
func TestPythonProcessResources(t *testing.T) {
	scrape := func(cpu, rss string) string {
		return `# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes ` + rss + `
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total ` + cpu + `
# HELP process_cpu_user_seconds_total
# TYPE process_cpu_user_seconds_total gauge
process_cpu_user_seconds_total 0.48
`
	}
	tg := window(t, scrape("0.55", "7.0627328e+07"), scrape("1.55", "1.048576e+08"))
	if tg.Kind != "process" || tg.Memory != "process_resident_memory_bytes" || strings.Join(tg.Has, ",") != "cpu,memory" {
		t.Errorf("kind %q, memory from %q, has %v: want a process, its RSS, cpu and memory", tg.Kind, tg.Memory, tg.Has)
	}
	last := tg.Timeline[len(tg.Timeline)-1]
	if math.Abs(last.CPUCores-0.5) > 1e-9 || last.MemoryMB != 100 {
		t.Errorf("point %+v: want 0.5 cores (1 s of CPU in 2 s) and 100 MiB", last)
	}
}

// A server that prefixes the standard process metrics with its own
// namespace (Mattermost: mattermost_process_cpu_seconds_total) has its
// CPU and memory read from them, not reported as none.
func TestPrefixedProcessResources(t *testing.T) {
	scrape := func(cpu, rss string) string {
		return `# TYPE mattermost_process_resident_memory_bytes gauge
mattermost_process_resident_memory_bytes ` + rss + `
# TYPE mattermost_process_cpu_seconds_total counter
mattermost_process_cpu_seconds_total ` + cpu + `
# TYPE mattermost_http_requests_total counter
mattermost_http_requests_total 12
`
	}
	tg := window(t, scrape("3.25", "2.097152e+08"), scrape("5.25", "3.145728e+08"))
	if tg.Kind != "process" || tg.Memory != "mattermost_process_resident_memory_bytes" || strings.Join(tg.Has, ",") != "cpu,memory" {
		t.Errorf("kind %q, memory from %q, has %v: want a process, its RSS, cpu and memory", tg.Kind, tg.Memory, tg.Has)
	}
	last := tg.Timeline[len(tg.Timeline)-1]
	if math.Abs(last.CPUCores-1) > 1e-9 || last.MemoryMB != 300 {
		t.Errorf("point %+v: want 1 core (2 s of CPU in 2 s) and 300 MiB", last)
	}
}
