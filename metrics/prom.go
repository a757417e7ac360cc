package metrics

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
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
//	loadtest_http_poll_time{name}                  histogram, seconds waited by long polls (their errors
//	                                               and timeouts are in loadtest_http_errors/timeouts_total)
//	loadtest_delivery_time{name}                   histogram, seconds from a message's stamp to its arrival
//	loadtest_websocket_connections                 gauge, WebSocket connections open
//	loadtest_websocket_closes_total{name,outcome}  counter, closes: "normal" or "abnormal"
//	loadtest_websocket_reconnects_total{name}      counter, reconnect attempts
//	loadtest_websocket_messages_total{name,type,direction}  counter, messages "in" and "out"
//	loadtest_websocket_message_bytes_total{name,direction}  counter
//	loadtest_websocket_missed_total{name}          counter, messages skipped by jumps in a sequence field
//	loadtest_websocket_dropped_total{name}         counter, messages dropped at a full inbox
//	loadtest_arrivals_total{outcome}               counter, the open model's arrivals: "started" or "dropped"
//	loadtest_arrival_lateness_seconds              histogram, how late after its intended time each arrival started
//	loadtest_generator_lateness_seconds            histogram, how late each start the generator scheduled fired (a
//	                                               think time ending, an arrival starting), added a second at a time
//
// In the open model a request's loadtest_http_request_time is counted from
// its arrival's intended start (Sample.Intended): the checks see what the
// schedule's clients would have seen.
//
// Setup's requests (Sample.Setup) are counted apart and never in
// loadtest_http_*: logins do not move the client latency and error checks.
//
// It has a registry of its own (no global state). Safe for concurrent use.
type Prom struct {
	reg      *prometheus.Registry
	remoteMu sync.Mutex
	remote   func() []*dto.MetricFamily // agents' families (AddRemote)
	reqTime  *prometheus.HistogramVec
	errs     *prometheus.CounterVec
	timeouts *prometheus.CounterVec
	actions  *prometheus.CounterVec
	users    prometheus.Gauge
	ready    prometheus.Gauge
	setup    *prometheus.CounterVec
	poll     *prometheus.HistogramVec
	delivery *prometheus.HistogramVec
	conns    prometheus.Gauge
	closes   *prometheus.CounterVec
	reconn   *prometheus.CounterVec
	msgs     *prometheus.CounterVec
	msgBytes *prometheus.CounterVec
	missed   *prometheus.CounterVec
	dropped  *prometheus.CounterVec
	started  prometheus.Counter // loadtest_arrivals_total{outcome="started"}
	shed     prometheus.Counter // loadtest_arrivals_total{outcome="dropped"}
	lateness prometheus.Histogram
	gen      *latenessCollector // loadtest_generator_lateness_seconds (AddWakes)
	types    types
	cache    sync.Map // request name -> prometheus.Observer
	msgMu    sync.RWMutex
	msgCache map[msgKey][2]prometheus.Counter // messages and their bytes, by name, type and direction
	acts     sync.Map                         // action name -> *[Canceled]prometheus.Counter, by outcome
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
	p.poll = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "loadtest_http_poll_time",
		Help:    "Time long polls waited for their response, in seconds; not in loadtest_http_request_time.",
		Buckets: RequestTimeBuckets(),
	}, []string{"name"})
	p.delivery = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "loadtest_delivery_time",
		Help:    "Time from a message's stamp (user.delivery.stamp) to its arrival at a user, in seconds.",
		Buckets: RequestTimeBuckets(),
	}, []string{"name"})
	p.addSocketMetrics()
	arrivals := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "loadtest_arrivals_total",
		Help: "Arrivals of the open model: started, or dropped (no user of the pool came free in time).",
	}, []string{"outcome"})
	p.started, p.shed = arrivals.WithLabelValues("started"), arrivals.WithLabelValues("dropped")
	p.lateness = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "loadtest_arrival_lateness_seconds",
		Help:    "How late after its intended time each arrival of the open model started, in seconds.",
		Buckets: RequestTimeBuckets(),
	})
	p.gen = newLatenessCollector()
	p.reg.MustRegister(p.reqTime, p.errs, p.timeouts, p.actions, p.users, p.ready, p.setup,
		p.poll, p.delivery, p.conns, p.closes, p.reconn, p.msgs, p.msgBytes, p.missed, p.dropped, arrivals, p.lateness, p.gen)
	return p
}

// addSocketMetrics makes p's WebSocket series (NewProm registers them).
func (p *Prom) addSocketMetrics() {
	p.conns = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "loadtest_websocket_connections",
		Help: "WebSocket connections open now.",
	})
	p.closes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "loadtest_websocket_closes_total",
		Help: "WebSocket connections ended, by outcome: normal (by the user, or close 1000/1001) or abnormal.",
	}, []string{"name", "outcome"})
	p.reconn = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "loadtest_websocket_reconnects_total",
		Help: "Attempts to reconnect a WebSocket, by the scenario or its reconnect policy.",
	}, []string{"name"})
	p.msgs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "loadtest_websocket_messages_total",
		Help: "WebSocket messages, by type and direction (in, out).",
	}, []string{"name", "type", "direction"})
	p.msgBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "loadtest_websocket_message_bytes_total",
		Help: "Bytes of WebSocket messages' payloads, by direction (in, out).",
	}, []string{"name", "direction"})
	p.missed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "loadtest_websocket_missed_total",
		Help: "Messages a connection's sequence field says it never received.",
	}, []string{"name"})
	p.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "loadtest_websocket_dropped_total",
		Help: "Messages dropped because their user's inbox was full (its handlers fell behind).",
	}, []string{"name"})
}

// types admits message types per connection name up to MaxTypes, as the
// shards do, so a type_field of ids cannot make a series per message.
type types struct {
	mu sync.Mutex
	m  map[string]map[string]bool
}

func (t *types) admit(name, typ string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]map[string]bool{}
	}
	seen := t.m[name]
	if seen == nil {
		seen = map[string]bool{}
		t.m[name] = seen
	}
	if !seen[typ] && len(seen) >= MaxTypes {
		return OtherType
	}
	seen[typ] = true
	return typ
}

// msgKey is a message's series: a struct key, so that looking it up allocates nothing.
type msgKey struct {
	name, typ string
	kind      Kind
}

// observeSocket counts one sample of a WebSocket's kinds.
func (p *Prom) observeSocket(x Sample) {
	switch x.Kind {
	case MessageIn, MessageOut:
		dir, n := "in", x.BytesIn
		if x.Kind == MessageOut {
			dir, n = "out", x.BytesOut
		}
		key := msgKey{x.Name, x.Type, x.Kind}
		p.msgMu.RLock()
		cs, ok := p.msgCache[key]
		p.msgMu.RUnlock()
		if !ok {
			cs = [2]prometheus.Counter{
				p.msgs.WithLabelValues(x.Name, p.types.admit(x.Name, x.Type), dir),
				p.msgBytes.WithLabelValues(x.Name, dir),
			}
			p.msgMu.Lock()
			if p.msgCache == nil {
				p.msgCache = map[msgKey][2]prometheus.Counter{}
			}
			p.msgCache[key] = cs
			p.msgMu.Unlock()
		}
		cs[0].Inc()
		cs[1].Add(float64(n))
	case Opened:
		p.conns.Inc()
	case Closed:
		p.conns.Dec()
		outcome := "normal"
		if x.Outcome == Failed {
			outcome = "abnormal"
		}
		p.closes.WithLabelValues(x.Name, outcome).Inc()
	case Reconnect:
		p.reconn.WithLabelValues(x.Name).Inc()
	case Gap:
		p.missed.WithLabelValues(x.Name).Add(float64(x.N))
	case Dropped:
		p.dropped.WithLabelValues(x.Name).Add(float64(x.N))
	}
}

// Observe implements Observer.
func (p *Prom) Observe(x Sample) {
	if x.Outcome == Canceled {
		return
	}
	if isSocket(x.Kind) { // never setup's, as in Snapshot.Add
		p.observeSocket(x)
		return
	}
	if x.Kind == Arrival {
		if x.Outcome == DroppedArrival {
			p.shed.Inc()
			return
		}
		p.started.Inc()
		p.lateness.Observe(x.Latency.Seconds())
		return
	}
	if x.Setup {
		if x.Kind == Request {
			p.setup.WithLabelValues(x.Name, x.Outcome.String()).Inc()
		}
		return
	}
	if x.Kind == Delivery {
		p.delivery.WithLabelValues(x.Name).Observe(x.Latency.Seconds())
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
	if x.Kind == Poll {
		p.poll.WithLabelValues(x.Name).Observe(x.Latency.Seconds())
	} else {
		o, ok := p.cache.Load(x.Name)
		if !ok {
			o, _ = p.cache.LoadOrStore(x.Name, p.reqTime.WithLabelValues(x.Name))
		}
		o.(prometheus.Observer).Observe(x.Latency.Seconds())
	}
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

// AddRemote makes Gather and Handler add what fn returns to this
// process's metrics: the families of a run's agents (SumFamilies).
func (p *Prom) AddRemote(fn func() []*dto.MetricFamily) {
	p.remoteMu.Lock()
	defer p.remoteMu.Unlock()
	p.remote = fn
}

// Gather is the metrics: this process's, and its agents' added up.
func (p *Prom) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := p.reg.Gather()
	p.remoteMu.Lock()
	fn := p.remote
	p.remoteMu.Unlock()
	if fn == nil || err != nil {
		return mfs, err
	}
	return SumFamilies(mfs, fn()), nil
}

// Handler serves the metrics in the Prometheus text format.
func (p *Prom) Handler() http.Handler {
	return promhttp.HandlerFor(prometheus.GathererFunc(p.Gather), promhttp.HandlerOpts{})
}
