package compare

import (
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/headroom-dev/headroom/metrics"
)

// window is one run's figures over one span (the measured window, or a
// step level's held window).
type window struct {
	requests map[string]metrics.Summary
	actions  map[string]metrics.Summary
	hists    *metrics.Snapshot // exact histograms of the same span; may lack names
}

func newWindow(reqs, acts []metrics.Summary, hists *metrics.Snapshot) window {
	w := window{requests: map[string]metrics.Summary{}, actions: map[string]metrics.Summary{}, hists: hists}
	for _, s := range reqs {
		if s.Count > 0 {
			w.requests[s.Name] = s
		}
	}
	for _, s := range acts {
		if s.Count > 0 {
			w.actions[s.Name] = s
		}
	}
	if w.hists == nil {
		w.hists = metrics.NewSnapshot()
	}
	return w
}

// Row is one request name or action, base against new.
type Row struct {
	Name      string `json:"name"`
	BaseCount int64  `json:"base_count"`
	NewCount  int64  `json:"new_count"`
	Mean      Metric `json:"mean_ms"`
	P50       Metric `json:"p50_ms"`
	P95       Metric `json:"p95_ms"`
	P99       Metric `json:"p99_ms"`
	Errors    Metric `json:"error_pct"`
}

// Span is the comparison of one span of the runs.
type Span struct {
	// Throughput is requests per second over the requests both sides made.
	Throughput Metric `json:"throughput_rps"`
	// Mix is every request both sides made, weighted by one mix on both
	// sides (the mean of the two sides' shares), so a request that became
	// more frequent does not pass for a slower system.
	MixMean   Metric  `json:"mix_mean_ms"`
	MixP99    Metric  `json:"mix_p99_ms"`
	MixErrors Metric  `json:"mix_error_pct"`
	Weights   []Share `json:"weights"`
	Requests  []Row   `json:"requests"`
	Actions   []Row   `json:"actions"`
	// Names on one side only: listed, and left out of every figure above.
	OnlyBase        []string `json:"only_base,omitempty"`
	OnlyNew         []string `json:"only_new,omitempty"`
	OnlyBaseActions []string `json:"only_base_actions,omitempty"`
	OnlyNewActions  []string `json:"only_new_actions,omitempty"`
}

// Share is a request's weight in the common mix, and each side's own share.
type Share struct {
	Name   string  `json:"name"`
	Weight float64 `json:"weight"`
	Base   float64 `json:"base"`
	New    float64 `json:"new"`
}

func compareSpan(base, new []window, o Options) Span {
	var sp Span
	bl, nl := newLatencies(base), newLatencies(new)
	sp.Requests, sp.OnlyBase, sp.OnlyNew = rows(bl, nl, metrics.Request, o)
	sp.Actions, sp.OnlyBaseActions, sp.OnlyNewActions = rows(bl, nl, metrics.Action, o)
	common := make([]string, len(sp.Requests))
	for i, r := range sp.Requests {
		common[i] = r.Name
	}
	// One mix for both sides.
	bs, ns := shares(base, common), shares(new, common)
	w := map[string]float64{}
	for _, n := range common {
		w[n] = (bs[n] + ns[n]) / 2
		sp.Weights = append(sp.Weights, Share{Name: n, Weight: w[n], Base: bs[n], New: ns[n]})
	}
	sort.SliceStable(sp.Weights, func(i, j int) bool { return sp.Weights[i].Weight > sp.Weights[j].Weight })

	sp.Throughput = Metric{Name: "requests/s", Unit: "/s", HigherIsBetter: true}
	sp.MixMean = Metric{Name: "mean latency, common mix", Unit: "ms"}
	sp.MixP99 = Metric{Name: "p99 latency, common mix", Unit: "ms"}
	sp.MixErrors = Metric{Name: "errors, common mix", Unit: "%", Points: true}
	for _, side := range []struct {
		lats              *latencies
		rps, mean, p, err *[]float64
		prps, pm, pp, pe  *float64
	}{
		{bl, &sp.Throughput.BaseRuns, &sp.MixMean.BaseRuns, &sp.MixP99.BaseRuns, &sp.MixErrors.BaseRuns, &sp.Throughput.Base, &sp.MixMean.Base, &sp.MixP99.Base, &sp.MixErrors.Base},
		{nl, &sp.Throughput.NewRuns, &sp.MixMean.NewRuns, &sp.MixP99.NewRuns, &sp.MixErrors.NewRuns, &sp.Throughput.New, &sp.MixMean.New, &sp.MixP99.New, &sp.MixErrors.New},
	} {
		for _, f := range []struct {
			runs   *[]float64
			pooled *float64
			v      func(ws []window, lat latencyOf) float64
		}{
			{side.rps, side.prps, func(ws []window, _ latencyOf) float64 { return rps(ws, common) }},
			{side.mean, side.pm, func(_ []window, lat latencyOf) float64 {
				return weighted(w, func(n string) float64 { return lat(metrics.Request, n).mean })
			}},
			{side.p, side.pp, func(_ []window, lat latencyOf) float64 { return mixQuantile(0.99, lat, w) }},
			{side.err, side.pe, func(ws []window, _ latencyOf) float64 {
				return weighted(w, func(n string) float64 { return errPct(ws, metrics.Request, n) })
			}},
		} {
			for i, x := range side.lats.ws {
				*f.runs = append(*f.runs, f.v([]window{x}, side.lats.run(i)))
			}
			*f.pooled = f.v(side.lats.ws, side.lats.of)
		}
	}
	if len(common) == 0 {
		for _, m := range []*Metric{&sp.Throughput, &sp.MixMean, &sp.MixP99, &sp.MixErrors} {
			m.BaseRuns, m.NewRuns = nil, nil
		}
	}
	for _, m := range []*Metric{&sp.Throughput, &sp.MixMean, &sp.MixP99, &sp.MixErrors} {
		m.judge(o)
	}
	return sp
}

// rows compares every name both sides have; it returns the names found
// on one side only apart.
func rows(bl, nl *latencies, k metrics.Kind, o Options) (out []Row, onlyBase, onlyNew []string) {
	base, new := bl.ws, nl.ws
	inBase, inNew := names(base, k), names(new, k)
	for n := range inBase {
		if !inNew[n] {
			onlyBase = append(onlyBase, n)
		}
	}
	for n := range inNew {
		if !inBase[n] {
			onlyNew = append(onlyNew, n)
		}
	}
	sort.Strings(onlyBase)
	sort.Strings(onlyNew)
	for _, n := range sortedKeys(inBase) {
		if !inNew[n] {
			continue
		}
		r := Row{Name: n, BaseCount: count(base, k, n), NewCount: count(new, k, n),
			Mean: Metric{Name: "mean", Unit: "ms"}, P50: Metric{Name: "p50", Unit: "ms"}, P95: Metric{Name: "p95", Unit: "ms"},
			P99: Metric{Name: "p99", Unit: "ms"}, Errors: Metric{Name: "errors", Unit: "%", Points: true}}
		for _, side := range []struct {
			lats *latencies
			pick func(*Metric) (*float64, *[]float64)
		}{
			{bl, func(m *Metric) (*float64, *[]float64) { return &m.Base, &m.BaseRuns }},
			{nl, func(m *Metric) (*float64, *[]float64) { return &m.New, &m.NewRuns }},
		} {
			for _, f := range []struct {
				m *Metric
				v func([]window, latencyOf) float64
			}{
				{&r.Mean, func(_ []window, lat latencyOf) float64 { return lat(k, n).mean }},
				{&r.P50, func(_ []window, lat latencyOf) float64 { return lat(k, n).p50 }},
				{&r.P95, func(_ []window, lat latencyOf) float64 { return lat(k, n).p95 }},
				{&r.P99, func(_ []window, lat latencyOf) float64 { return lat(k, n).p99 }},
				{&r.Errors, func(ws []window, _ latencyOf) float64 { return errPct(ws, k, n) }},
			} {
				pooled, runs := side.pick(f.m)
				*pooled = f.v(side.lats.ws, side.lats.of)
				for i, x := range side.lats.ws {
					if _, ok := table(x, k)[n]; ok {
						*runs = append(*runs, f.v([]window{x}, side.lats.run(i)))
					}
				}
			}
		}
		for _, f := range []struct {
			m    *Metric
			tail float64 // the share of requests beyond the figure: 0 for the mean and errors
		}{{&r.Mean, 0}, {&r.P50, 0.5}, {&r.P95, 0.05}, {&r.P99, 0.01}, {&r.Errors, 0}} {
			f.m.judge(o)
			if min(r.BaseCount, r.NewCount) < minCount(o, f.tail) && f.m.Verdict != NoData && f.m.Verdict != NotComparable {
				f.m.Verdict = TooFew
			}
		}
		out = append(out, r)
	}
	return out, onlyBase, onlyNew
}

// minTail is the fewest requests beyond a percentile, on each side, for
// it to get a verdict: the p99 of 100 requests is their slowest one,
// which one stall sets.
const minTail = 5

// minCount is the fewest requests a side must have made of a name for a
// figure with tail beyond it (0.01 for the p99) to get a verdict:
// o.MinCount, and at least minTail beyond it (500 for the p99, 100 for the
// p95).
func minCount(o Options, tail float64) int64 {
	if tail <= 0 {
		return o.MinCount
	}
	return max(o.MinCount, int64(math.Ceil(minTail/tail-1e-9)))
}

func table(w window, k metrics.Kind) map[string]metrics.Summary {
	if k == metrics.Action {
		return w.actions
	}
	return w.requests
}

func hists(w window, k metrics.Kind) map[string]*metrics.Stat {
	if k == metrics.Action {
		return w.hists.Actions
	}
	return w.hists.Requests
}

func names(ws []window, k metrics.Kind) map[string]bool {
	out := map[string]bool{}
	for _, w := range ws {
		for n := range table(w, k) {
			out[n] = true
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func count(ws []window, k metrics.Kind, n string) int64 {
	c := int64(0)
	for _, w := range ws {
		c += table(w, k)[n].Count
	}
	return c
}

// errPct is the share of n's requests that failed or timed out, in %.
func errPct(ws []window, k metrics.Kind, n string) float64 {
	var bad, all int64
	for _, w := range ws {
		s := table(w, k)[n]
		bad += s.Errors + s.Timeouts
		all += s.Count
	}
	if all == 0 {
		return math.NaN()
	}
	return 100 * float64(bad) / float64(all)
}

// shares is each common name's share of the common requests of a side.
func shares(ws []window, common []string) map[string]float64 {
	out, total := map[string]float64{}, 0.0
	for _, n := range common {
		c := float64(count(ws, metrics.Request, n))
		out[n] = c
		total += c
	}
	for n := range out {
		if total > 0 {
			out[n] /= total
		}
	}
	return out
}

// rps is the requests per second of the common names: the sum of each
// window's rate, averaged over the windows.
func rps(ws []window, common []string) float64 {
	sum := 0.0
	for _, w := range ws {
		for _, n := range common {
			sum += w.requests[n].RPS
		}
	}
	return sum / float64(len(ws))
}

// weighted is sum w[n]*f(n) over the names where f is a number,
// renormalised over those names.
func weighted(w map[string]float64, f func(string) float64) float64 {
	s, tw := 0.0, 0.0
	for _, n := range sortedNames(w) { // a fixed order: the same sum, to the last bit, every time
		wn := w[n]
		if v := f(n); !math.IsNaN(v) && wn > 0 {
			s += wn * v
			tw += wn
		}
	}
	if tw == 0 {
		return math.NaN()
	}
	return s / tw
}

func sortedNames(w map[string]float64) []string {
	out := make([]string, 0, len(w))
	for n := range w {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
