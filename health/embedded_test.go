package health

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/prom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
)

// loadMetrics is a registry with headroom's client metric names, as the
// metrics package exposes them.
type loadMetrics struct {
	reg      *prometheus.Registry
	reqTime  *prometheus.HistogramVec
	errs     *prometheus.CounterVec
	timeouts *prometheus.CounterVec
}

func newLoadMetrics() *loadMetrics {
	m := &loadMetrics{
		reg: prometheus.NewRegistry(),
		reqTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "loadtest_http_request_time",
			Help:    "Request time in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 1.2, 65),
		}, []string{"name"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadtest_http_errors_total",
			Help: "Failed requests.",
		}, []string{"name", "status_code"}),
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadtest_http_timeouts_total",
			Help: "Timed out requests.",
		}, []string{"name"}),
	}
	m.reg.MustRegister(m.reqTime, m.errs, m.timeouts)
	return m
}

// simulation feeds a store with 76 simulated seconds of traffic: 200 requests
// a second (half GET /a, half POST /b) with exponential latencies of mean
// 20 ms, one 404 a second from the start and one 503 a second from second 40
// on, no timeouts. The registry is gathered at t0+i s after second i's traffic.
type simulation struct {
	t0    time.Time
	store *prom.Store
	lat   [][]float64 // latencies observed in each second
}

const simSeconds = 76

func simulate(t *testing.T) *simulation {
	t.Helper()
	m := newLoadMetrics()
	sim := &simulation{t0: time.Unix(1_700_000_000, 0), store: prom.NewStore(time.Hour)}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range simSeconds {
		var lat []float64
		for j := range 200 {
			name := "GET /a"
			if j%2 == 1 {
				name = "POST /b"
			}
			x := 0.02 * rng.ExpFloat64()
			m.reqTime.WithLabelValues(name).Observe(x)
			lat = append(lat, x)
		}
		sim.lat = append(sim.lat, lat)
		m.errs.WithLabelValues("GET /a", "404").Inc()
		if i >= 40 {
			m.errs.WithLabelValues("POST /b", "503").Inc()
		}
		mfs, err := m.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		sim.store.AppendGathered(mfs, sim.at(i), labels.FromStrings("job", "headroom"))
	}
	return sim
}

func (sim *simulation) at(second int) time.Time {
	return sim.t0.Add(time.Duration(second) * time.Second)
}

// observed returns the latencies of seconds [from, to].
func (sim *simulation) observed(from, to int) []float64 {
	var all []float64
	for _, l := range sim.lat[from : to+1] {
		all = append(all, l...)
	}
	return all
}

func query(t *testing.T, ev Evaluator, q string, at time.Time) float64 {
	t.Helper()
	v, err := ev.Query(context.Background(), q, at)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

func TestEmbeddedRateQuantileMean(t *testing.T) {
	sim := simulate(t)
	ev := prom.NewEmbedded(sim.store)
	end := simSeconds - 1
	at := sim.at(end)
	// A [30s] range at t0+75s holds the samples of seconds 46..75 (the range
	// is open on the left), so its increase is the traffic of seconds 47..75.
	window := sim.observed(end-28, end)

	if got := query(t, ev, `sum(rate(loadtest_http_request_time_count[30s]))`, at); math.Abs(got-200) > 1e-9 {
		t.Errorf("request rate = %v/s, want 200/s", got)
	}
	var sum float64
	for _, x := range window {
		sum += x
	}
	mean := sum / float64(len(window))
	if got := query(t, ev, Defaults(30*time.Second, noServer)[0].Query, at); math.Abs(got-mean)/mean > 1e-9 {
		t.Errorf("mean latency = %v s, want exactly %v s", got, mean)
	}
	slices.Sort(window)
	p99 := window[int(math.Ceil(0.99*float64(len(window))))-1]
	if got := query(t, ev, Defaults(30*time.Second, noServer)[1].Query, at); math.Abs(got-p99)/p99 > 0.10 {
		t.Errorf("p99 latency = %v s, want within 10%% of %v s", got, p99)
	} else {
		t.Logf("p99 latency = %.4f s, truth %.4f s (%+.1f%%)", got, p99, 100*(got-p99)/p99)
	}
	// One 503 a second among 200 requests a second: 0.5%.
	if got := query(t, ev, Defaults(30*time.Second, noServer)[2].Query, at); math.Abs(got-0.5) > 1e-9 {
		t.Errorf("client 5xx = %v%%, want 0.5%%", got)
	}
}

func TestEmbeddedOrVectorZero(t *testing.T) {
	sim := simulate(t)
	ev := prom.NewEmbedded(sim.store)
	ctx := context.Background()
	// Before second 40 there is no 5xx series at all, and there are never
	// timeouts: without "or vector(0)" those numerators are no data.
	if _, err := ev.Query(ctx, `sum(rate(loadtest_http_errors_total{status_code=~"5.."}[30s]))`, sim.at(35)); !errors.Is(err, prom.ErrNoData) {
		t.Fatalf("5xx rate before any 5xx: err = %v, want prom.ErrNoData", err)
	}
	if _, err := ev.Query(ctx, `sum(rate(loadtest_http_timeouts_total[30s]))`, sim.at(75)); !errors.Is(err, prom.ErrNoData) {
		t.Fatalf("timeout rate with no timeouts: err = %v, want prom.ErrNoData", err)
	}
	checks := Defaults(30*time.Second, noServer)
	for _, at := range []int{35, 75} {
		for _, r := range Evaluate(ctx, ev, checks[2:4], sim.at(at)) {
			want := 0.0
			if r.Name == "client 5xx errors (%)" && at == 75 {
				want = 0.5
			}
			if r.Err != "" || math.Abs(r.Value-want) > 1e-9 || r.Fired != (want > r.Threshold) {
				t.Errorf("second %d: %+v, want value %v, no error", at, r, want)
			}
		}
	}
}

func TestEmbeddedErrors(t *testing.T) {
	sim := simulate(t)
	ev := prom.NewEmbedded(sim.store)
	ctx := context.Background()
	at := sim.at(75)

	if _, err := ev.Query(ctx, `sum(rate(no_such_metric[30s]))`, at); !errors.Is(err, prom.ErrNoData) {
		t.Errorf("missing metric: err = %v, want prom.ErrNoData", err)
	}
	_, err := ev.Query(ctx, `sum by (name) (rate(loadtest_http_request_time_count[30s]))`, at)
	if err == nil || err.Error() != "2 series, want 1" {
		t.Errorf("two series: err = %v, want \"2 series, want 1\"", err)
	}
	if _, err := ev.Query(ctx, `loadtest_http_request_time_count[30s]`, at); err == nil || !strings.Contains(err.Error(), "matrix") {
		t.Errorf("range vector: err = %v, want one naming the matrix", err)
	}
	if _, err := ev.Query(ctx, `rate(x[1m]`, at); err == nil || !strings.HasPrefix(err.Error(), "query error: 1:11: parse error") {
		t.Errorf("bad syntax: err = %v, want a query error at 1:11", err)
	}
	if v := query(t, ev, `1 + 1`, at); v != 2 {
		t.Errorf("scalar 1 + 1 = %v", v)
	}

	// Lookback: the last sample is at t0+75s; 20s later it is still seen with
	// the default 5m, not with a 10s lookback.
	later := at.Add(20 * time.Second)
	if _, err := ev.Query(ctx, `sum(loadtest_http_request_time_count)`, later); err != nil {
		t.Errorf("default lookback: %v", err)
	}
	short := prom.NewEmbedded(sim.store)
	short.Lookback = 10 * time.Second
	if _, err := short.Query(ctx, `sum(loadtest_http_request_time_count)`, later); !errors.Is(err, prom.ErrNoData) {
		t.Errorf("10s lookback, 20s after the last sample: err = %v, want prom.ErrNoData", err)
	}
}

func TestEvaluateFailsClosed(t *testing.T) {
	sim := simulate(t)
	ev := prom.NewEmbedded(sim.store)
	checks := []Check{
		{Name: "missing", Query: `sum(rate(no_such_metric[30s]))`, Threshold: 1},
		{Name: "two", Query: `sum by (name) (rate(loadtest_http_request_time_count[30s]))`, Threshold: 1e9},
		{Name: "nan", Query: `0/0`, Threshold: 1},
		{Name: "syntax", Query: `rate(x[1m]`, Threshold: 1},
		{Name: "above", Query: `sum(rate(loadtest_http_request_time_count[30s]))`, Threshold: 199},
		{Name: "under", Query: `sum(rate(loadtest_http_request_time_count[30s]))`, Threshold: 201},
		{Name: "below", Query: `sum(rate(loadtest_http_request_time_count[30s]))`, Threshold: 201, Below: true},
		{Name: "not below", Query: `sum(rate(loadtest_http_request_time_count[30s]))`, Threshold: 199, Below: true},
	}
	want := []struct {
		fired bool
		err   string
	}{
		{true, "no data"}, {true, "2 series, want 1"}, {true, "value is NaN"}, {true, "query error: 1:11: parse error"},
		{true, ""}, {false, ""}, {true, ""}, {false, ""},
	}
	results := Evaluate(context.Background(), ev, checks, sim.at(75))
	for i, r := range results {
		if r.Name != checks[i].Name || r.Threshold != checks[i].Threshold {
			t.Errorf("result %d is %q, want check %q in order", i, r.Name, checks[i].Name)
		}
		if r.Fired != want[i].fired || !strings.HasPrefix(r.Err, want[i].err) || (want[i].err == "") != (r.Err == "") {
			t.Errorf("%s: fired=%v err=%q, want fired=%v err starting %q", r.Name, r.Fired, r.Err, want[i].fired, want[i].err)
		}
		if (r.Err != "") != math.IsNaN(r.Value) {
			t.Errorf("%s: value %v with error %q: want NaN exactly when there is an error", r.Name, r.Value, r.Err)
		}
	}
}

func TestEmbeddedConcurrentAppendAndQuery(t *testing.T) {
	m := newLoadMetrics()
	s := prom.NewStore(5 * time.Second)
	ev := prom.NewEmbedded(s)
	t0 := time.Unix(1_700_000_000, 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			m.reqTime.WithLabelValues("GET /a").Observe(0.01)
			mfs, _ := m.reg.Gather()
			s.AppendGathered(mfs, t0.Add(time.Duration(i)*100*time.Millisecond), labels.EmptyLabels())
		}
	}()
	checks := Defaults(time.Second, s.Has)
	for i := 0; ; i++ {
		select {
		case <-done:
			v := query(t, ev, `sum(rate(loadtest_http_request_time_count[1s]))`, t0.Add(19900*time.Millisecond))
			if math.Abs(v-10) > 1e-9 {
				t.Errorf("rate = %v/s, want 10/s", v)
			}
			return
		default:
			Evaluate(context.Background(), ev, checks, t0.Add(time.Duration(i%200)*100*time.Millisecond))
		}
	}
}
