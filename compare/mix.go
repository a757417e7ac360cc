package compare

import (
	"math"
	"sort"

	"github.com/headroom-dev/headroom/metrics"
)

// cdf is a histogram's cumulative distribution: the share of values at
// or below each bucket's upper end.
type cdf struct {
	to  []float64
	cum []float64
}

// at is the share of values at or below x.
func (c cdf) at(x float64) float64 {
	i := sort.SearchFloat64s(c.to, x) // first bucket ending at or above x
	if i < len(c.to) && c.to[i] == x {
		return c.cum[i]
	}
	if i == 0 {
		return 0
	}
	return c.cum[i-1]
}

// mixQuantile is the q-quantile, in ms, of the latencies of a mixture of
// the request names in w, each weighted by w[n] whatever its share on
// this side: the latency a user would see with the common mix.
func mixQuantile(q float64, lat latencyOf, w map[string]float64) float64 {
	var cdfs []cdf
	var weights []float64
	tw, hi := 0.0, 0.0
	for _, n := range sortedNames(w) {
		wn := w[n]
		c := lat(metrics.Request, n).cdf
		if len(c.to) == 0 || wn <= 0 {
			continue
		}
		cdfs, weights = append(cdfs, c), append(weights, wn)
		tw += wn
		hi = math.Max(hi, c.to[len(c.to)-1])
	}
	if tw == 0 {
		return math.NaN()
	}
	mix := func(x float64) float64 {
		s := 0.0
		for i, c := range cdfs {
			s += weights[i] * c.at(x)
		}
		return s / tw
	}
	lo := 0.0
	for range 64 {
		mid := (lo + hi) / 2
		if mix(mid) >= q {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi / 1000
}
