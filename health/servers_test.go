package health

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/prom"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

// statusPages are, per known family with a status, its exposition after
// errors 5xx and ok 2xx responses: each as its server or library writes it
// (labels, types and the _total of Python counters as in their source).
var statusPages = map[string]string{
	"Mattermost": `# TYPE mattermost_api_time histogram
mattermost_api_time_bucket{handler="createPost",method="POST",origin_client="",page_load_context="",status_code="500",le="+Inf"} %[1]d
mattermost_api_time_sum{handler="createPost",method="POST",origin_client="",page_load_context="",status_code="500"} 1
mattermost_api_time_count{handler="createPost",method="POST",origin_client="",page_load_context="",status_code="500"} %[1]d
mattermost_api_time_bucket{handler="getPosts",method="GET",origin_client="",page_load_context="",status_code="200",le="+Inf"} %[2]d
mattermost_api_time_sum{handler="getPosts",method="GET",origin_client="",page_load_context="",status_code="200"} 1
mattermost_api_time_count{handler="getPosts",method="GET",origin_client="",page_load_context="",status_code="200"} %[2]d
`,
	"Synapse": `# HELP synapse_http_server_response_time_seconds sec
# TYPE synapse_http_server_response_time_seconds histogram
synapse_http_server_response_time_seconds_bucket{code="502",le="+Inf",method="PUT",server_name="localhost",servlet="RoomSendEventRestServlet",tag=""} %[1]d.0
synapse_http_server_response_time_seconds_count{code="502",method="PUT",server_name="localhost",servlet="RoomSendEventRestServlet",tag=""} %[1]d.0
synapse_http_server_response_time_seconds_sum{code="502",method="PUT",server_name="localhost",servlet="RoomSendEventRestServlet",tag=""} 1.0
synapse_http_server_response_time_seconds_bucket{code="200",le="+Inf",method="GET",server_name="localhost",servlet="SyncRestServlet",tag="sync"} %[2]d.0
synapse_http_server_response_time_seconds_count{code="200",method="GET",server_name="localhost",servlet="SyncRestServlet",tag="sync"} %[2]d.0
synapse_http_server_response_time_seconds_sum{code="200",method="GET",server_name="localhost",servlet="SyncRestServlet",tag="sync"} 1.0
`,
	"Spring Boot": `# TYPE http_server_requests_seconds summary
http_server_requests_seconds_count{error="none",exception="none",method="GET",outcome="SERVER_ERROR",status="503",uri="/owners"} %[1]d
http_server_requests_seconds_sum{error="none",exception="none",method="GET",outcome="SERVER_ERROR",status="503",uri="/owners"} 1
http_server_requests_seconds_count{error="none",exception="none",method="GET",outcome="SUCCESS",status="200",uri="/owners"} %[2]d
http_server_requests_seconds_sum{error="none",exception="none",method="GET",outcome="SUCCESS",status="200",uri="/owners"} 1
`,
	"django-prometheus": `# HELP django_http_responses_total_by_status_view_method_total Count of responses by status, view, method.
# TYPE django_http_responses_total_by_status_view_method_total counter
django_http_responses_total_by_status_view_method_total{method="POST",status="500",view="polls:vote"} %[1]d.0
django_http_responses_total_by_status_view_method_total{method="GET",status="200",view="polls:index"} %[2]d.0
`,
	"Go promhttp": `# TYPE http_requests_total counter
http_requests_total{code="503",method="get"} %[1]d
http_requests_total{code="200",method="get"} %[2]d
`,
	"prometheus-fastapi-instrumentator": `# TYPE http_requests_total counter
http_requests_total{handler="/items/{item_id}",method="GET",status="5xx"} %[1]d.0
http_requests_total{handler="/items/{item_id}",method="GET",status="2xx"} %[2]d.0
`,
}

func parsePage(t *testing.T, text string) []*dto.MetricFamily {
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

// The default server 5xx check reads each known family's status, alone or
// with every family in its query (before a run knows which the target
// has): 5 of every 1000 responses are 5xx, so 0.5%.
func TestServer5xxOfEachFamily(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	for name, page := range statusPages {
		t.Run(name, func(t *testing.T) {
			s := prom.NewStore(time.Minute)
			for k := range 5 { // every 5 s: 5 errors and 995 ok a step, from large counts
				s.AppendGathered(parsePage(t, fmt.Sprintf(page, 1000+5*k, 100000+995*k)), t0.Add(time.Duration(5*k)*time.Second),
					labels.FromStrings("job", "scrape", "instance", "127.0.0.1:9"))
			}
			at := t0.Add(20 * time.Second)
			pruned := Defaults(20*time.Second, s.Has)
			all := Defaults(20*time.Second, nil)
			if len(pruned) != 5 || len(pruned[4].Requires) != 1 || len(all) != 7 {
				t.Fatalf("%d checks with what the store has (want the client ones and one server 5xx check on one family), %d without", len(pruned), len(all))
			}
			for _, c := range []Check{pruned[4], all[4]} {
				if c.Name != "server 5xx errors (%)" {
					t.Fatalf("check %q, want the server 5xx one", c.Name)
				}
				if got := query(t, prom.NewEmbedded(s), c.Query, at); math.Abs(got-0.5) > 1e-9 {
					t.Errorf("%s = %v, want 0.5", c.Query, got)
				}
			}
		})
	}
}

// A check waiting for a metric no target exposes is inactive: not
// evaluated, not fired, and its result says so.
func TestEvaluateActive(t *testing.T) {
	s := prom.NewStore(time.Minute)
	at := time.Unix(1_700_000_000, 0)
	s.AppendGathered(parsePage(t, "# TYPE present gauge\npresent 3\n"), at, labels.EmptyLabels())
	checks := []Check{
		{Name: "always", Query: "vector(1)", Threshold: 0},
		{Name: "waits", Query: "sum(missing)", Threshold: 0, Requires: []string{"missing", "also_missing"}},
		{Name: "either", Query: "sum(present)", Threshold: 5, Requires: []string{"missing", "present"}},
	}
	got := EvaluateActive(context.Background(), prom.NewEmbedded(s), checks, s.Has, at)
	if !got[0].Fired || got[0].Inactive || got[0].Value != 1 {
		t.Errorf("always: %+v, want evaluated and fired", got[0])
	}
	if got[1].Fired || !got[1].Inactive || !math.IsNaN(got[1].Value) || got[1].Err != "inactive: no target exposes missing or also_missing" {
		t.Errorf("waits: %+v, want inactive, naming what it waits for", got[1])
	}
	if got[2].Fired || got[2].Inactive || got[2].Value != 3 || got[2].Name != "either" {
		t.Errorf("either: %+v, want evaluated at 3, not fired", got[2])
	}
	if all := EvaluateActive(context.Background(), prom.NewEmbedded(s), checks, nil, at); all[1].Inactive || !all[1].Fired {
		t.Errorf("with a nil has: %+v, want every check evaluated (no data: fired)", all[1])
	}
}
