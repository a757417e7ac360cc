package testbed

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// latencyBuckets returns the upper bounds, in seconds, of the time histograms: 0.5 ms to 10 s.
func latencyBuckets() []float64 {
	return []float64{
		0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075,
		0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 7.5, 10,
	}
}

// metrics are the testbed's Prometheus metrics, in a registry of their own.
type metrics struct {
	reg *prometheus.Registry
	// apiTime is the time from a request's arrival to its reply being ready, in seconds, by route
	// name (handler), HTTP method and status code. It includes the time waiting for a worker.
	apiTime *prometheus.HistogramVec
	// storeTime is the modelled time of each store call of a successful request, in seconds, by store
	// method (PostStore.GetPosts, ...).
	storeTime *prometheus.HistogramVec
	// wsEvents counts the events queued to WebSocket connections, by event; wsDropped those dropped
	// because a connection's queue was full.
	wsEvents  *prometheus.CounterVec
	wsDropped prometheus.Counter
	// wsCloses counts connections that ended, by the code of the client's
	// close frame ("none": the connection ended without one).
	wsCloses *prometheus.CounterVec
}

func newMetrics(p *pool, h *hub) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		apiTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mattermost_api_time",
			Help:    "Time from a request's arrival to its reply being ready, in seconds, waiting for a worker included.",
			Buckets: latencyBuckets(),
		}, []string{"handler", "method", "status_code"}),
		storeTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mattermost_db_store_time",
			Help:    "Modelled time of each store call of a successful request, in seconds.",
			Buckets: latencyBuckets(),
		}, []string{"method"}),
		wsEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "testbed_websocket_events_total",
			Help: "Events queued to WebSocket connections, by event.",
		}, []string{"event"}),
		wsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "testbed_websocket_events_dropped_total",
			Help: "Events dropped because a WebSocket connection's queue was full.",
		}),
		wsCloses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "testbed_websocket_closes_total",
			Help: "WebSocket connections ended, by the code of the client's close frame (\"none\": without one).",
		}, []string{"code"}),
	}
	workers := float64(p.size())
	m.reg.MustRegister(
		m.apiTime,
		m.storeTime,
		m.wsEvents,
		m.wsDropped,
		m.wsCloses,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "testbed_websocket_connections",
			Help: "Open WebSocket connections.",
		}, func() float64 { return float64(h.open.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "testbed_workers",
			Help: "Configured size of the worker pool: requests served at once.",
		}, func() float64 { return workers }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "testbed_workers_busy",
			Help: "Workers currently holding a request.",
		}, func() float64 { return float64(p.busy()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "testbed_queue_length",
			Help: "Requests currently waiting for a worker.",
		}, func() float64 { return float64(p.queued()) }),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
	)
	return m
}

// handler serves the registry in the Prometheus text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}
