package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// LatenessBuckets are the upper bounds, in seconds, of
// loadtest_generator_lateness_seconds: 100 µs to 5 s. A generator on time
// wakes within the first few; a stall shows in the upper ones.
var LatenessBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// latenessCollector is loadtest_generator_lateness_seconds: a histogram
// of how late every start the generator scheduled fired (Wakes.Late),
// added a second at a time from what a runner or an agent drains, not
// sample by sample (Shard.Wake takes no observer).
type latenessCollector struct {
	desc    *prometheus.Desc
	mu      sync.Mutex
	counts  []uint64 // cumulative, by LatenessBuckets
	count   uint64
	sumSecs float64
}

func newLatenessCollector() *latenessCollector {
	return &latenessCollector{
		desc: prometheus.NewDesc("loadtest_generator_lateness_seconds",
			"How late after its intended time each start the generator scheduled fired (a user's think time ending, an arrival starting), in seconds.", nil, nil),
		counts: make([]uint64, len(LatenessBuckets)),
	}
}

func (c *latenessCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *latenessCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	buckets := make(map[float64]uint64, len(LatenessBuckets))
	for i, b := range LatenessBuckets {
		buckets[b] = c.counts[i]
	}
	ch <- prometheus.MustNewConstHistogram(c.desc, c.count, c.sumSecs, buckets)
}

// add adds the lateness of st's samples (µs).
func (c *latenessCollector) add(st *Stat) {
	if st.Count == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, b := range LatenessBuckets {
		c.counts[i] += uint64(st.Count - st.Above(time.Duration(b*float64(time.Second))))
	}
	c.count += uint64(st.Count)
	c.sumSecs += st.figures().Mean() * float64(st.Count) / 1e6
}

// AddWakes adds the lateness of a second's starts (a drained snapshot's
// Wakes) to loadtest_generator_lateness_seconds. w may be nil.
func (p *Prom) AddWakes(w *Wakes) {
	if w != nil {
		p.gen.add(w.Late)
	}
}
