package compare

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/headroom-dev/headroom/metrics"
)

// TestLatencyAgreesWithHdrhistogram: the figures and the distribution
// read through the sparse histogram are hdrhistogram-go's own: each
// bucket's upper end is Distribution's, pooled figures are those of the
// merged histogram.
func TestLatencyAgreesWithHdrhistogram(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var ws []window
	pooled := metrics.NewHistogram()
	for range 3 {
		st := metrics.NewStat()
		for range 2000 {
			st.Hist().RecordValue(1 + r.Int64N(metrics.HighestMicros>>r.IntN(32)))
		}
		st.Hist().RecordValue(metrics.HighestMicros)
		pooled.Merge(st.Hist())
		w := newWindow(nil, nil, metrics.NewSnapshot())
		w.hists.Requests["x"] = st
		ws = append(ws, w)
	}
	l := newLatencies(ws)
	for i, h := range []struct {
		lat  latencyOf
		hist func() *metrics.Stat
	}{
		{l.run(1), func() *metrics.Stat { return ws[1].hists.Requests["x"] }},
		{l.of, func() *metrics.Stat { st := metrics.NewStat(); st.Hist().Merge(pooled); return st }},
	} {
		lat, want := h.lat(metrics.Request, "x"), h.hist().Hist()
		if lat.n != want.TotalCount() || lat.mean != want.Mean()/1000 || lat.p99 != float64(want.ValueAtPercentile(99))/1000 {
			t.Errorf("%d: figures %+v differ from the histogram's", i, lat)
		}
		var to []float64
		for _, b := range want.Distribution() {
			if b.Count > 0 {
				to = append(to, float64(b.To))
			}
		}
		if len(to) != len(lat.cdf.to) {
			t.Fatalf("%d: %d buckets, Distribution has %d", i, len(lat.cdf.to), len(to))
		}
		for j := range to {
			if to[j] != lat.cdf.to[j] {
				t.Fatalf("%d: bucket %d ends at %v, Distribution says %v", i, j, lat.cdf.to[j], to[j])
			}
		}
		if lat.cdf.cum[len(to)-1] != 1 {
			t.Errorf("%d: distribution ends at %v, want 1", i, lat.cdf.cum[len(to)-1])
		}
	}
	if none := l.of(metrics.Request, "y"); none.n != 0 || !math.IsNaN(none.p50) || !math.IsNaN(none.mean) {
		t.Errorf("a name without a histogram: %+v, want no values", none)
	}
}
