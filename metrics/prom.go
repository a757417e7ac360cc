package metrics

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Prom exposes headroom's own measurements in the Prometheus text format,
// under names compatible with the reference coordinator's health checks:
//
//	loadtest_http_request_time{name}               histogram, seconds, every request that got an outcome
//	loadtest_http_errors_total{name,status_code}   counter, failed requests ("0" = no response)
//	loadtest_http_timeouts_total{name}             counter
//	loadtest_actions_total{action,outcome}         counter
//	loadtest_users_active                          gauge, users running (setting up or past setup)
//	loadtest_users_ready                           gauge, users past setup
//	loadtest_setup_requests_total{name,outcome}    counter, requests made by users' setups
//
// Setup's requests (Sample.Setup) are counted apart and never in
// loadtest_http_*: logins do not move the client latency and error checks.
//
// It has a registry of its own (no global state). Safe for concurrent use.
type Prom struct {
	reg      *prometheus.Registry
	reqTime  *prometheus.HistogramVec
	errs     *prometheus.CounterVec
	timeouts *prometheus.CounterVec
	actions  *prometheus.CounterVec
	users    prometheus.Gauge
	ready    prometheus.Gauge
	setup    *prometheus.CounterVec
	cache    sync.Map // request name -> prometheus.Observer
	acts     sync.Map // action name -> *[Canceled]prometheus.Counter, by outcome
}

var _ Observer = (*Prom)(nil)

// RequestTimeBuckets are the upper bounds, in seconds, of
// loadtest_http_request_time: 0.5 ms to about 60 s, each 20% above the last,
// so a histogram_quantile between 1 ms and 10 s is within 10% of the truth.
func RequestTimeBuckets() []float64 {
	return prometheus.ExponentialBuckets(0.0005, 1.2, 65)
}

// NewProm returns an exposition with its own registry.
func NewProm() *Prom {
	p := &Prom{
		reg: prometheus.NewRegistry(),
		reqTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "loadtest_http_request_time",
			Help:    "Time from the start of a request to the end of its response body, in seconds.",
			Buckets: RequestTimeBuckets(),
		}, []string{"name"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadtest_http_errors_total",
			Help: "Requests that failed: an unexpected status, or no response (status_code \"0\").",
		}, []string{"name", "status_code"}),
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadtest_http_timeouts_total",
			Help: "Requests with no complete response within the timeout.",
		}, []string{"name"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadtest_actions_total",
			Help: "Actions finished, by outcome (ok, error, timeout).",
		}, []string{"action", "outcome"}),
		users: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "loadtest_users_active",
			Help: "Users running now, setting up or past setup.",
		}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "loadtest_users_ready",
			Help: "Users past their setup.",
		}),
		setup: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadtest_setup_requests_total",
			Help: "Requests made by users' setups, by outcome (ok, error, timeout); never in loadtest_http_*.",
		}, []string{"name", "outcome"}),
	}
	p.reg.MustRegister(p.reqTime, p.errs, p.timeouts, p.actions, p.users, p.ready, p.setup)
	return p
}

// Observe implements Observer.
func (p *Prom) Observe(x Sample) {
	if x.Outcome == Canceled {
		return
	}
	if x.Setup {
		if x.Kind == Request {
			p.setup.WithLabelValues(x.Name, x.Outcome.String()).Inc()
		}
		return
	}
	if x.Kind == Action {
		c, ok := p.acts.Load(x.Name)
		if !ok {
			var byOutcome [Canceled]prometheus.Counter
			for o := range Canceled {
				byOutcome[o] = p.actions.WithLabelValues(x.Name, o.String())
			}
			c, _ = p.acts.LoadOrStore(x.Name, &byOutcome)
		}
		c.(*[Canceled]prometheus.Counter)[x.Outcome].Inc()
		return
	}
	o, ok := p.cache.Load(x.Name)
	if !ok {
		o, _ = p.cache.LoadOrStore(x.Name, p.reqTime.WithLabelValues(x.Name))
	}
	o.(prometheus.Observer).Observe(x.Latency.Seconds())
	switch x.Outcome {
	case Failed:
		p.errs.WithLabelValues(x.Name, strconv.Itoa(x.Status)).Inc()
	case Timeout:
		p.timeouts.WithLabelValues(x.Name).Inc()
	}
}

// SetUsers sets loadtest_users_active.
func (p *Prom) SetUsers(n int) { p.users.Set(float64(n)) }

// SetReady sets loadtest_users_ready.
func (p *Prom) SetReady(n int) { p.ready.Set(float64(n)) }

// Registry returns the registry, for gathering in-process.
func (p *Prom) Registry() *prometheus.Registry { return p.reg }

// Handler serves the metrics in the Prometheus text format.
func (p *Prom) Handler() http.Handler {
	return promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{})
}
