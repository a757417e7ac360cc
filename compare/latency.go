package compare

import (
	"math"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/headroom-dev/headroom/metrics"
)

// latency is one name's latency over some windows, reduced once to what
// the comparison reads of it.
type latency struct {
	n                   int64   // values in the histogram
	mean, p50, p95, p99 float64 // ms; NaN with no values
	cdf                 cdf
}

// latencyOf is a name's latency over a set of windows: one run's, or a
// side's pooled.
type latencyOf func(k metrics.Kind, name string) *latency

type nameKey struct {
	k    metrics.Kind
	name string
}

// latencies computes the latencies of one side's names, pooled over its
// windows and per window, each at most once. A pooled histogram is merged
// into one reused scratch histogram, and a distribution is read through a
// reused sparse one, so a name costs its populated buckets, not a ~190 KB
// histogram per figure (docs/COMPARE.md, "Many names"). Not safe for
// concurrent use.
type latencies struct {
	ws      []window
	pooled  map[nameKey]*latency
	perRun  []map[nameKey]*latency
	scratch *hdr.Histogram
	sparse  *hdr.PackedHistogram
}

func newLatencies(ws []window) *latencies {
	l := &latencies{ws: ws, pooled: map[nameKey]*latency{}, perRun: make([]map[nameKey]*latency, len(ws))}
	for i := range l.perRun {
		l.perRun[i] = map[nameKey]*latency{}
	}
	return l
}

// of is the latency of name pooled over every window: the exact merge of
// their histograms.
func (l *latencies) of(k metrics.Kind, name string) *latency {
	if len(l.ws) == 1 {
		return l.run(0)(k, name)
	}
	key := nameKey{k, name}
	if lat := l.pooled[key]; lat != nil {
		return lat
	}
	if l.scratch == nil {
		l.scratch = metrics.NewHistogram()
	}
	l.scratch.Reset()
	for _, w := range l.ws {
		if st := hists(w, k)[name]; st != nil {
			l.scratch.Merge(st.Hist())
		}
	}
	lat := l.reduce(l.scratch)
	l.pooled[key] = lat
	return lat
}

// run is the latency of window i alone.
func (l *latencies) run(i int) latencyOf {
	return func(k metrics.Kind, name string) *latency {
		key := nameKey{k, name}
		if lat := l.perRun[i][key]; lat != nil {
			return lat
		}
		var lat *latency
		if st := hists(l.ws[i], k)[name]; st != nil {
			lat = l.reduce(st.Hist())
		} else {
			lat = l.reduce(nil)
		}
		l.perRun[i][key] = lat
		return lat
	}
}

func (l *latencies) reduce(h *hdr.Histogram) *latency {
	nan := math.NaN()
	if h == nil || h.TotalCount() == 0 {
		return &latency{mean: nan, p50: nan, p95: nan, p99: nan}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	lat := &latency{n: h.TotalCount(), mean: h.Mean() / 1000,
		p50: ms(h.ValueAtPercentile(50)), p95: ms(h.ValueAtPercentile(95)), p99: ms(h.ValueAtPercentile(99))}
	if l.sparse == nil {
		l.sparse = hdr.NewPacked(metrics.LowestMicros, metrics.HighestMicros, metrics.SigFigs)
	}
	l.sparse.Reset()
	l.sparse.MergeFrom(h)
	total, run := float64(lat.n), 0.0
	for from, count := range l.sparse.ForEachBucket {
		run += float64(count)
		lat.cdf.to = append(lat.cdf.to, float64(highestEquivalent(h, from)))
		lat.cdf.cum = append(lat.cdf.cum, run/total)
	}
	return lat
}

// highestEquivalent is the largest value counted in the same bucket as
// from, the lowest value of its bucket. Buckets span a power of two.
func highestEquivalent(h *hdr.Histogram, from int64) int64 {
	size := int64(1)
	for size < math.MaxInt64/2 && h.ValuesAreEquivalent(from, from+2*size-1) {
		size *= 2
	}
	return from + size - 1
}
