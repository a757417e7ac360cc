package health

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		check Check
		want  string // "" for valid
	}{
		{Check{Name: "p99", Query: `rate(x[1m]`, Threshold: 1}, `check "p99": 1:11: parse error: unclosed left parenthesis`},
		{Check{Name: "by", Query: `sum(rate(x[1m])) by (`, Threshold: 1}, `check "by": 1:22: parse error: unclosed left parenthesis`},
		{Check{Name: "brace", Query: `foo{`, Threshold: 1}, `check "brace": 1:5: parse error: unexpected end of input inside braces`},
		{Check{Name: "range", Query: `x[1m]`, Threshold: 1}, `check "range": query yields a matrix, want a scalar or an instant vector`},
		{Check{Name: "nan", Query: `1`, Threshold: math.NaN()}, `check "nan": threshold is NaN, want a finite number`},
		{Check{Name: "inf", Query: `1`, Threshold: math.Inf(1)}, `check "inf": threshold is +Inf, want a finite number`},
		{Check{Name: "ok", Query: `sum(rate(x[1m])) by (le)`, Threshold: 1}, ""},
		{Check{Name: "scalar", Query: `scalar(up) * 2`, Threshold: 1, Below: true}, ""},
	}
	for _, tt := range tests {
		err := tt.check.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", tt.check.Name, err)
		case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
			t.Errorf("%s: %v, want %q", tt.check.Name, err, tt.want)
		}
	}
}

func TestWindow(t *testing.T) {
	tests := []struct {
		query string
		want  time.Duration
	}{
		{`rate(x[30s])`, 30 * time.Second},
		{`histogram_quantile(0.99, sum(rate(a[15s])) by (le)) / max_over_time(b[2m])`, 2 * time.Minute},
		{`max_over_time(rate(x[30s])[5m:10s])`, 5 * time.Minute},
		{`rate(x[1m] offset 10m)`, time.Minute},
		{`100 - 100 * avg(node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes)`, 0},
		{`vector(1)`, 0},
		{`rate(x[1m]`, 0},
	}
	for _, tt := range tests {
		if got := (Check{Query: tt.query}).Window(); got != tt.want {
			t.Errorf("Window(%s) = %v, want %v", tt.query, got, tt.want)
		}
	}
}

func TestResultJSON(t *testing.T) {
	in := []Result{
		{Name: "none", Value: math.NaN(), Threshold: 0.1, Fired: true, Err: "no data"},
		{Name: "some", Value: 0.05, Threshold: 0.1},
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	const want = `[{"name":"none","value":null,"threshold":0.1,"fired":true,"error":"no data"},` +
		`{"name":"some","value":0.05,"threshold":0.1,"fired":false}]`
	if string(b) != want || !json.Valid(b) {
		t.Fatalf("JSON\n%s\nwant\n%s", b, want)
	}
	var out []Result
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(out[0].Value) || out[0].Err != "no data" || !out[0].Fired || out[1].Value != 0.05 {
		t.Errorf("round trip: %+v", out)
	}
}

func TestDefaults(t *testing.T) {
	client := Defaults(15*time.Second, noServer)
	all := Defaults(90*time.Second, func(string) bool { return true })
	if len(client) != 4 || len(all) != 7 {
		t.Fatalf("%d client checks and %d with every metric, want 4 and 7", len(client), len(all))
	}
	want := map[string]float64{
		"client mean latency (s)": 0.1, "client p99 latency (s)": 2, "client 5xx errors (%)": 0.025,
		"client timeouts (%)": 0.025, "server 5xx errors (%)": 0.025, "CPU utilisation (%)": 85,
		"memory utilisation (%)": 85,
	}
	for _, c := range all {
		if err := c.Validate(); err != nil {
			t.Error(err)
		}
		if th, ok := want[c.Name]; !ok || th != c.Threshold || c.Below {
			t.Errorf("%s: threshold %v below=%v, want > %v", c.Name, c.Threshold, c.Below, th)
		}
		if w := c.Window(); w != 90*time.Second && !strings.HasPrefix(c.Name, "memory") {
			t.Errorf("%s: window %v, want 1m30s: %s", c.Name, w, c.Query)
		}
	}
	for _, c := range client {
		if c.Window() != 15*time.Second {
			t.Errorf("%s: window %v, want 15s", c.Name, c.Window())
		}
	}
	only := Defaults(time.Minute, func(m string) bool { return m == "node_cpu_seconds_total" })
	if len(only) != 5 || only[4].Query != `100 - 100 * avg(irate(node_cpu_seconds_total{mode="idle"}[1m]))` {
		t.Errorf("with node_cpu_seconds_total only: %+v", only)
	}
}

// noServer is a has function for runs that scrape nothing.
func noServer(string) bool { return false }

func TestDefaultsWithoutHasCarryRequires(t *testing.T) {
	all := Defaults(15*time.Second, nil)
	if len(all) != 7 {
		t.Fatalf("%d checks, want the 4 client and 3 server ones", len(all))
	}
	for _, c := range all[:4] {
		if len(c.Requires) != 0 {
			t.Errorf("client check %q requires %q", c.Name, c.Requires)
		}
	}
	for _, c := range all[4:] {
		if len(c.Requires) == 0 {
			t.Errorf("server check %q requires nothing", c.Name)
		}
		for _, m := range c.Requires {
			if !strings.Contains(c.Query, m) {
				t.Errorf("server check %q requires %q, not in its query %s", c.Name, m, c.Query)
			}
		}
	}
	// The server 5xx check waits for any known family with a status.
	for _, m := range []string{"mattermost_api_time_count", "synapse_http_server_response_time_seconds_count",
		"http_server_requests_seconds_count", "django_http_responses_total_by_status_view_method_total", "http_requests_total"} {
		if !all[4].Active(func(x string) bool { return x == m }) {
			t.Errorf("the server 5xx check stays inactive on a target exposing %s", m)
		}
	}
	if all[4].Active(noServer) {
		t.Error("the server 5xx check is active with nothing scraped")
	}
}

func TestExpandWindow(t *testing.T) {
	for _, c := range []struct {
		query  string
		window time.Duration
		want   string
	}{
		{"rate(x[$window])", 10 * time.Second, "rate(x[10s])"},
		{"rate(x[${window}]) / rate(y[$window])", 90 * time.Second, "rate(x[1m30s]) / rate(y[1m30s])"},
		{"rate(x[1m])", 10 * time.Second, "rate(x[1m])"},
		{"max_over_time(rate(x[$window])[5m:])", 2500 * time.Millisecond, "max_over_time(rate(x[2s500ms])[5m:])"},
	} {
		got := ExpandWindow(c.query, c.window)
		if got != c.want {
			t.Errorf("ExpandWindow(%q, %v) = %q, want %q", c.query, c.window, got, c.want)
		}
		if err := (Check{Name: "x", Query: got, Threshold: 1}).Validate(); err != nil {
			t.Error(err)
		}
	}
}
