package compare

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// Verdicts.
const (
	Regression    = "regression"
	Improvement   = "improvement"
	NoChange      = "no significant change"
	NoVerdict     = "no verdict: one run per side"
	NoData        = "no data"
	NotComparable = "not comparable"
	TooFew        = "too few requests"
)

// Options tune the verdicts.
type Options struct {
	// Confidence of the intervals (default 0.95).
	Confidence float64
	// MinEffect is the smallest relative change called a regression or an
	// improvement even when the interval excludes zero (default 0.03): on
	// shared machines, real but tiny differences are not worth a verdict.
	MinEffect float64
	// MinErrorPoints is the same for error rates, in percentage points
	// (default 0.1).
	MinErrorPoints float64
	// MinCount is the fewest requests a side must have made of a name for
	// its row to get a verdict (default 30): the p99 of a handful of
	// requests is their maximum, and says little. A percentile also needs
	// minTail requests beyond it (a p99 500, a p95 100).
	MinCount int64
}

func (o *Options) defaults() {
	if o.Confidence <= 0 || o.Confidence >= 1 {
		o.Confidence = 0.95
	}
	if o.MinEffect <= 0 {
		o.MinEffect = 0.03
	}
	if o.MinErrorPoints <= 0 {
		o.MinErrorPoints = 0.1
	}
	if o.MinCount <= 0 {
		o.MinCount = 30
	}
}

// Metric is one figure, base against new.
//
// Base and New are the side's value: pooled over its repeats (from the
// merged histograms for latencies). Delta is New against Base: relative
// (0.1 = +10%), in percentage points for error rates (Points), or in Unit
// for a figure the base had none of (AbsMin, a function new in the new
// build's profile: a share of nothing is no figure). Low and
// High bound Delta at the chosen confidence, from the spread between runs
// (Welch's t interval on the per-run values, centred on Delta); they are
// only set when both sides have at least two runs.
type Metric struct {
	Name           string `json:"name"`
	Unit           string `json:"unit"`
	HigherIsBetter bool   `json:"higher_is_better"`
	Points         bool   `json:"points,omitempty"` // Delta is in percentage points
	// AbsMin, when more than 0: Delta is New − Base in Unit, and a change
	// under AbsMin is no change.
	AbsMin      float64   `json:"abs_min,omitempty"`
	Base        float64   `json:"base"`
	New         float64   `json:"new"`
	BaseRuns    []float64 `json:"base_runs"`
	NewRuns     []float64 `json:"new_runs"`
	BaseSD      float64   `json:"base_sd"`
	NewSD       float64   `json:"new_sd"`
	Delta       float64   `json:"delta"`
	Low         float64   `json:"low"`
	High        float64   `json:"high"`
	HasInterval bool      `json:"has_interval"`
	Verdict     string    `json:"verdict"`
}

// judge fills the delta, its interval and the verdict of m from its
// per-run values and pooled values.
func (m *Metric) judge(o Options) {
	m.BaseSD, m.NewSD = sd(m.BaseRuns), sd(m.NewRuns)
	if len(m.BaseRuns) == 0 || len(m.NewRuns) == 0 || math.IsNaN(m.Base) || math.IsNaN(m.New) {
		m.Verdict = NoData
		return
	}
	scale := 1.0
	if m.Points || m.AbsMin > 0 {
		m.Delta = m.New - m.Base
	} else {
		if m.Base == 0 {
			m.Verdict = NotComparable
			return
		}
		m.Delta = m.New/m.Base - 1
		scale = m.Base
	}
	if math.Abs(m.Delta) < 1e-12 { // rounding, not a change: no "-0.0%"
		m.Delta = 0
	}
	if len(m.BaseRuns) < 2 || len(m.NewRuns) < 2 {
		m.Verdict = NoVerdict
		return
	}
	half := welchHalfWidth(m.BaseRuns, m.NewRuns, o.Confidence) / scale
	m.Low, m.High, m.HasInterval = m.Delta-half, m.Delta+half, true
	m.verdict(o)
}

// verdict judges m's interval: a change when it excludes zero and the
// delta is at least the smallest effect worth a verdict.
func (m *Metric) verdict(o Options) {
	min := o.MinEffect
	switch {
	case m.Points:
		min = o.MinErrorPoints
	case m.AbsMin > 0:
		min = m.AbsMin
	}
	switch {
	case m.Low > 0 && m.Delta >= min:
		m.Verdict = pick(m.HigherIsBetter, Improvement, Regression)
	case m.High < 0 && m.Delta <= -min:
		m.Verdict = pick(m.HigherIsBetter, Regression, Improvement)
	default:
		m.Verdict = NoChange
	}
}

// widen makes m's interval hold what each side's own resolution allows:
// lo and hi bound the delta when each side's value may lie anywhere in
// its own interval (a ceiling's [low, high): the search's last healthy
// and first unhealthy level), and the spread between repeats is added on
// both ends. Identical repeats are the search's resolution, not zero
// noise: their interval is the resolution's, not a point. m must have
// been judged with an interval.
func (m *Metric) widen(lo, hi float64, o Options) {
	if !m.HasInterval || math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return
	}
	m.Low -= max(m.Delta-lo, 0)
	m.High += max(hi-m.Delta, 0)
	m.verdict(o)
}

func pick(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

// welchHalfWidth is the half-width of Welch's t interval for the
// difference of the means of a and b (each at least two values).
func welchHalfWidth(a, b []float64, confidence float64) float64 {
	va, vb := variance(a)/float64(len(a)), variance(b)/float64(len(b))
	se := math.Sqrt(va + vb)
	if se == 0 {
		return 0
	}
	df := (va + vb) * (va + vb) / (va*va/float64(len(a)-1) + vb*vb/float64(len(b)-1))
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(1 - (1-confidence)/2)
	return t * se
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func variance(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	m, s := mean(xs), 0.0
	for _, x := range xs {
		s += (x - m) * (x - m)
	}
	return s / float64(len(xs)-1)
}

func sd(xs []float64) float64 { return math.Sqrt(variance(xs)) }

// DeltaText is the delta with its interval, e.g. "-9.8% [-12.1%, -7.5%]"
// or "+0.40 pp".
func (m *Metric) DeltaText() string {
	f := func(v float64) string {
		switch {
		case m.Points:
			return signed(v, 2) + " pp"
		case m.AbsMin > 0:
			return signedSig(v) + " " + m.Unit
		}
		return signed(100*v, 1) + "%"
	}
	switch m.Verdict {
	case NoData, NotComparable:
		return "-"
	}
	if !m.HasInterval {
		return f(m.Delta)
	}
	return fmt.Sprintf("%s [%s, %s]", f(m.Delta), f(m.Low), f(m.High))
}

// MarshalJSON writes NaN and infinite figures (no data) as 0: JSON has no
// NaN, and the verdict already says "no data".
func (m Metric) MarshalJSON() ([]byte, error) {
	type plain Metric
	p := plain(m)
	fix := func(v float64) float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0
		}
		return v
	}
	p.Base, p.New, p.Delta, p.Low, p.High, p.BaseSD, p.NewSD = fix(p.Base), fix(p.New), fix(p.Delta), fix(p.Low), fix(p.High), fix(p.BaseSD), fix(p.NewSD)
	p.BaseRuns, p.NewRuns = slices.Clone(p.BaseRuns), slices.Clone(p.NewRuns)
	for i := range p.BaseRuns {
		p.BaseRuns[i] = fix(p.BaseRuns[i])
	}
	for i := range p.NewRuns {
		p.NewRuns[i] = fix(p.NewRuns[i])
	}
	return json.Marshal(p)
}

// signed formats v with its sign and d decimals, and a zero as +0 (not
// -0.0 for a rounding error below zero).
// signedSig is v with its sign and three significant digits: +194, +0.0123.
func signedSig(v float64) string {
	if v == 0 {
		return "+0"
	}
	d := max(0, 2-int(math.Floor(math.Log10(math.Abs(v)))))
	return signed(v, d)
}

func signed(v float64, d int) string {
	p := math.Pow(10, float64(d))
	r := math.Round(v*p) / p
	if r == 0 {
		r = 0
	}
	return fmt.Sprintf("%+.*f", d, r)
}
