package health

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/prom"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/headroom-dev/headroom/metrics"
)

// agentsRun is the same traffic seen two ways: one process's Prom that
// observed every sample, in one store, and two agents' Proms that each
// observed half of them, gathered through metrics.Labelled (agent="...")
// as a Prometheus scraping `headroom agent --metrics-listen` sees them,
// in another. A target's and a node's series, the same in both, stand
// for what --scrape or Prometheus adds beside them.
type agentsRun struct {
	t0         time.Time
	one, split *prom.Store
}

// agentsSeconds is how long agentsRun plays: long enough that a [1m]
// range at the end starts after every series was born, and a short window
// sees well past the seconds when the error and timeout series appear.
const agentsSeconds = 75

func playAgents(t *testing.T) *agentsRun {
	t.Helper()
	r := &agentsRun{t0: time.Unix(1_700_000_000, 0), one: prom.NewStore(time.Hour), split: prom.NewStore(time.Hour)}
	one := metrics.NewProm()
	agents := []*metrics.Prom{metrics.NewProm(), metrics.NewProm()}
	gathers := []func() ([]*dto.MetricFamily, error){
		metrics.Labelled(agents[0].Gather, "agent", "agent-0"),
		metrics.Labelled(agents[1].Gather, "agent", "agent-1"),
	}
	target := newTargetMetrics()
	observe := func(agent int, x metrics.Sample) {
		one.Observe(x)
		agents[agent].Observe(x)
	}
	for sec := range agentsSeconds {
		// Each kind of sample comes in pairs, one to each agent, so both
		// agents' series are born in the same second as the process's
		// (rate extrapolates a series born inside its range), except the
		// timeouts: only agent-0's users time out (a slow agent).
		for j := range 120 {
			lat := time.Duration(1+(j*37+sec*11)%400) * time.Millisecond
			name := []string{"GET /api/v4/channels/{id}/posts", "POST /api/v4/posts", "GET /api/v4/users/me"}[j%3]
			x := metrics.Sample{Kind: metrics.Request, Name: name, Status: 200, Latency: lat}
			switch {
			case sec >= 10 && j%40 < 2:
				x.Status, x.Outcome = 503, metrics.Failed
			case j%60 < 2:
				x.Status, x.Outcome = 404, metrics.Failed
			}
			observe(j%2, x)
		}
		if sec >= 20 {
			observe(0, metrics.Sample{Kind: metrics.Request, Name: "POST /api/v4/posts", Outcome: metrics.Timeout, Latency: 5 * time.Second})
		}
		for j := range 4 {
			p := metrics.Sample{Kind: metrics.Poll, Name: "GET /sync", Status: 200, Latency: time.Duration(10+j) * time.Second}
			if sec >= 30 && j < 2 {
				p.Status, p.Outcome = 502, metrics.Failed
			}
			observe(j%2, p)
			observe(j%2, metrics.Sample{Kind: metrics.Action, Name: "CreatePost", Requests: 2})
			observe(j%2, metrics.Sample{Kind: metrics.Delivery, Name: "posted", Latency: time.Duration(5+sec%7+j) * time.Millisecond})
			observe(j%2, metrics.Sample{Kind: metrics.MessageIn, Name: "ws", Type: "posted", BytesIn: 300})
		}
		if sec%5 == 0 {
			observe(0, metrics.Sample{Kind: metrics.Reconnect, Name: "ws"})
			observe(1, metrics.Sample{Kind: metrics.Reconnect, Name: "ws"})
		}
		one.SetUsers(100 + sec)
		agents[0].SetUsers(50 + sec/2)
		agents[1].SetUsers(50 + sec - sec/2)

		target.serve(sec)
		at := r.at(sec)
		tmfs, err := target.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		scrape := labels.FromStrings("job", "scrape", "instance", "app:8067")
		r.one.AppendGathered(tmfs, at, scrape)
		r.split.AppendGathered(tmfs, at, scrape)
		mfs, err := one.Gather()
		if err != nil {
			t.Fatal(err)
		}
		r.one.AppendGathered(mfs, at, labels.FromStrings("job", "headroom", "instance", "127.0.0.1:9465"))
		for i, g := range gathers {
			mfs, err := g()
			if err != nil {
				t.Fatal(err)
			}
			instance := []string{"10.0.0.1:9465", "10.0.0.2:9465"}[i]
			r.split.AppendGathered(mfs, at, labels.FromStrings("job", "headroom-agents", "instance", instance))
		}
	}
	return r
}

func (r *agentsRun) at(sec int) time.Time { return r.t0.Add(time.Duration(sec) * time.Second) }

// targetMetrics is a target's and its node's series: a Mattermost API
// histogram with a status code, and a node_exporter's CPU and memory.
type targetMetrics struct {
	reg            *prometheus.Registry
	api            *prometheus.HistogramVec
	cpu            *prometheus.CounterVec
	avail, totalMB prometheus.Gauge
}

func newTargetMetrics() *targetMetrics {
	m := &targetMetrics{
		reg: prometheus.NewRegistry(),
		api: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mattermost_api_time", Help: "API time."},
			[]string{"handler", "status_code"}),
		cpu:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "node_cpu_seconds_total", Help: "CPU."}, []string{"cpu", "mode"}),
		avail:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "node_memory_MemAvailable_bytes", Help: "Available."}),
		totalMB: prometheus.NewGauge(prometheus.GaugeOpts{Name: "node_memory_MemTotal_bytes", Help: "Total."}),
	}
	m.reg.MustRegister(m.api, m.cpu, m.avail, m.totalMB)
	return m
}

// serve moves the target's series on by one second.
func (m *targetMetrics) serve(sec int) {
	for j := range 100 {
		code := "200"
		if sec >= 10 && j == 0 {
			code = "500"
		}
		m.api.WithLabelValues("getPosts", code).Observe(float64(j%50) / 1000)
	}
	for _, cpu := range []string{"0", "1"} {
		m.cpu.WithLabelValues(cpu, "idle").Add(0.3)
		m.cpu.WithLabelValues(cpu, "user").Add(0.7)
	}
	m.avail.Set(float64(int64(8)<<30 - int64(sec)<<20))
	m.totalMB.Set(16 << 30)
}

// TestDefaultsAcrossAgents: every default check, and the queries the docs
// give as examples, have the same value on two agents' series, told apart
// by agent and instance, as on one process's that observed every sample:
// they aggregate (sum by (le), sum(rate(...))) instead of assuming one
// series. A query that does not aggregate is shown to tell the two apart.
func TestDefaultsAcrossAgents(t *testing.T) {
	r := playAgents(t)
	one, split := prom.NewEmbedded(r.one), prom.NewEmbedded(r.split)
	const w = 10 * time.Second
	checks := Defaults(w, nil) // every one, the target's and node's included
	if len(checks) != 7 {
		t.Fatalf("%d default checks, want the 7 of docs/HEALTH.md", len(checks))
	}
	examples := []string{
		// docs/SCENARIOS.md
		`sum(rate(loadtest_websocket_reconnects_total[1m])) * 60`,
		`histogram_quantile(0.99, sum(rate(loadtest_delivery_time_bucket[1m])) by (le))`,
		// docs/HEALTH.md
		`histogram_quantile(0.99, sum(rate(loadtest_http_request_time_bucket[$window])) by (le))`,
		// bench/ceiling.star, one request name
		`sum(rate(loadtest_http_request_time_sum{name="POST /api/v4/posts"}[$window])) / sum(rate(loadtest_http_request_time_count{name="POST /api/v4/posts"}[$window]))`,
		// the dashboard's: users, requests/s, a p50, actions, messages
		`sum(loadtest_users_active)`,
		`sum(rate(loadtest_http_request_time_count[$window]))`,
		`histogram_quantile(0.5, sum by (le) (rate(loadtest_http_request_time_bucket[$window])))`,
		`sum(rate(loadtest_actions_total{outcome="ok"}[$window]))`,
		`sum(rate(loadtest_websocket_messages_total{direction="in"}[$window]))`,
	}
	for i, q := range examples {
		checks = append(checks, Check{Name: "example " + q, Query: ExpandWindow(q, w)})
		if err := checks[len(checks)-1].Validate(); err != nil {
			t.Fatalf("example %d: %v", i, err)
		}
	}
	ctx := context.Background()
	// From second 40 on, every range of the checks has held every series
	// for a while: 5xx from 10, timeouts from 20, poll errors from 30.
	for _, sec := range []int{40, 57, agentsSeconds - 1} {
		at := r.at(sec)
		want, got := Evaluate(ctx, one, checks, at), Evaluate(ctx, split, checks, at)
		for i, c := range checks {
			if want[i].Err != "" || got[i].Err != "" {
				t.Errorf("second %d, %s: errors %q (one process) and %q (agents)", sec, c.Name, want[i].Err, got[i].Err)
				continue
			}
			if d := math.Abs(want[i].Value - got[i].Value); d > 1e-9*math.Max(1, math.Abs(want[i].Value)) {
				t.Errorf("second %d, %s: %v on one process, %v on two agents", sec, c.Name, want[i].Value, got[i].Value)
			}
			if want[i].Fired != got[i].Fired {
				t.Errorf("second %d, %s: fired %v on one process, %v on two agents", sec, c.Name, want[i].Fired, got[i].Fired)
			}
		}
		if sec == agentsSeconds-1 {
			for i, c := range checks[:7] {
				t.Logf("%-26s %.6g (threshold %g)", c.Name, got[i].Value, c.Threshold)
			}
		}
	}
	// The checks are not trivially equal: the timeouts are agent-0's alone
	// and fire, and the 5xx share is there.
	at := r.at(agentsSeconds - 1)
	if v := query(t, split, checks[3].Query, at); v <= checks[3].Threshold {
		t.Errorf("client timeouts on agents = %v%%, want above the threshold %v", v, checks[3].Threshold)
	}
	if v := query(t, split, `count(count by (agent, instance) (loadtest_http_request_time_count))`, at); v != 2 {
		t.Errorf("the agents' series come from %v agents, want 2", v)
	}
	// A query that assumes one series tells one process from two agents.
	if v := query(t, one, `loadtest_users_active{job="headroom"}`, at); v != 100+agentsSeconds-1 {
		t.Errorf("one process's users = %v", v)
	}
	if _, err := split.Query(ctx, `loadtest_users_active`, at); err == nil || err.Error() != "2 series, want 1" {
		t.Errorf("users on two agents, not summed: err = %v, want \"2 series, want 1\"", err)
	}
}
