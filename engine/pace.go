package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// The open model's schedules: when arrivals are due, as pure arithmetic
// on (elapsed, count), with no clock (STYLE rule 2, vegeta's Pacer).
//
// A Rate gives the expected arrivals by time t, Λ(t), the area under the
// rate. Arrival n (from 0) is due when Λ reaches a point x_n:
//
//   - evenly spaced: x_n = n + ½, the middle of the n-th unit of area, so
//     a constant rate r puts arrival n at (n+½)/r, every arrival strictly
//     inside the duration, and the count by t is Λ(t) rounded;
//   - Poisson: x_n = E_0 + … + E_n, sums of exponential gaps of mean 1
//     from a seeded stream, so one seed gives one schedule (time-rescaling:
//     a Poisson process of rate 1 in Λ is one of rate r(t) in time).
//
// Each due time is computed from x_n alone, never by adding gaps of rounded
// nanoseconds, so a million arrivals do not drift (vegeta's ConstantPacer
// truncates its interval to whole nanoseconds, and drifts by what it cut
// times the count).

// Forever is a stage duration no run reaches (292 years): a rate held
// until the runner sets another.
const Forever = time.Duration(math.MaxInt64)

// Rate is an arrival rate over time, as k6's ramping-arrival-rate has
// it: Start arrivals per second at time 0, then each stage moves the
// rate linearly to its Target over its Duration (a stage whose target
// is the rate before it holds that rate; one of Duration 0 jumps to its
// target). The schedule ends with the last stage.
type Rate struct {
	Start  float64 // arrivals per second at time 0, >= 0
	Stages []Stage
}

// Stage is one part of a Rate.
type Stage struct {
	Target   float64       // arrivals per second at the stage's end, >= 0
	Duration time.Duration // >= 0; Forever holds it until the runner sets another rate
}

// Constant is perSecond arrivals a second for d (Forever: until stopped).
func Constant(perSecond float64, d time.Duration) Rate {
	return Rate{Start: perSecond, Stages: []Stage{{Target: perSecond, Duration: d}}}
}

// Length is how long the rate lasts: the sum of its stages' durations
// (Forever if one is Forever, or the sum passes it).
func (r Rate) Length() time.Duration {
	var d time.Duration
	for _, st := range r.Stages {
		d = satAdd(d, max(st.Duration, 0))
	}
	return d
}

// At is the rate, in arrivals per second, at t since the start: the
// start rate, moved linearly along each stage; 0 once the last stage is
// over (no more arrivals come).
func (r Rate) At(t time.Duration) float64 {
	from := r.Start
	var at time.Duration
	for _, st := range r.Stages {
		end := satAdd(at, st.Duration)
		if t < end {
			return from + (st.Target-from)*float64(t-at)/float64(st.Duration)
		}
		at, from = end, st.Target
	}
	return 0
}

// Peak is the highest rate the schedule reaches, in arrivals per second.
func (r Rate) Peak() float64 {
	p := r.Start
	for _, st := range r.Stages {
		p = max(p, st.Target)
	}
	return p
}

// Spacing is how arrivals are placed at a given rate.
type Spacing uint8

const (
	Even    Spacing = iota // evenly spaced: the same gap between two arrivals at a constant rate
	Poisson                // exponential gaps: independent arrivals, as many clients make
)

func (s Spacing) String() string {
	if s == Poisson {
		return "poisson"
	}
	return "even"
}

// A Pacer says when the next arrival is due: Pace returns how long after
// elapsed (time since the schedule began) the arrival numbered count (the
// count-th from 0: count arrivals have been started or dropped already) is
// due. wait < 0 means it was due -wait ago: the caller is behind, and
// elapsed+wait is still the arrival's intended time. stop means there is
// no such arrival: the schedule is over.
type Pacer interface {
	Pace(elapsed time.Duration, count int64) (wait time.Duration, stop bool)
}

var _ Pacer = (*Schedule)(nil)

// Schedule is the Pacer of a Rate and a Spacing. Its answers depend on
// its arguments alone; a Poisson schedule keeps the sum of the gaps it
// drew so far, so it is not safe for concurrent use, and asking for an
// earlier arrival than the last draws the gaps again from the start.
type Schedule struct {
	rate    Rate
	segs    []segment
	total   float64 // Λ at the end: the expected arrivals of the whole schedule
	poisson bool
	seed    uint64

	// Poisson: the stream and the point of arrival n (x_n), once drawn.
	rng *rand.Rand
	n   int64
	x   float64
	seg int // the segment of the last answer: the next is there or later
}

// segment is one stage, with where it starts in time and in area.
type segment struct {
	start    time.Duration // since the schedule began
	dur      time.Duration
	end      time.Duration // start+dur, or Forever if that is later
	from, to float64       // arrivals per second at its start and end
	before   float64       // Λ at its start
	area     float64       // expected arrivals in it
}

// NewSchedule returns the schedule of r spaced by s; seed fixes a
// Poisson schedule's gaps. It refuses a rate that is negative, NaN or
// infinite, and a negative duration.
func NewSchedule(r Rate, s Spacing, seed uint64) (*Schedule, error) {
	if bad(r.Start) {
		return nil, fmt.Errorf("start rate %v: want a finite number of arrivals per second, 0 or more", r.Start)
	}
	sc := &Schedule{rate: Rate{Start: r.Start, Stages: slices.Clone(r.Stages)}, poisson: s == Poisson, seed: seed, n: -1}
	var at time.Duration
	from := r.Start
	for i, st := range r.Stages {
		switch {
		case bad(st.Target):
			return nil, fmt.Errorf("stage %d: rate %v: want a finite number of arrivals per second, 0 or more", i+1, st.Target)
		case st.Duration < 0:
			return nil, fmt.Errorf("stage %d: duration %v is negative", i+1, st.Duration)
		}
		area := (from + st.Target) / 2 * st.Duration.Seconds()
		if area > 0 {
			sc.segs = append(sc.segs, segment{start: at, dur: st.Duration, end: satAdd(at, st.Duration), from: from, to: st.Target, before: sc.total, area: area})
			sc.total += area
		}
		at = satAdd(at, st.Duration)
		from = st.Target
	}
	return sc, nil
}

// Rate, Spacing and Seed describe the schedule: NewSchedule of the
// three is a schedule of the same arrivals (how agents are sent one).
func (sc *Schedule) Rate() Rate {
	return Rate{Start: sc.rate.Start, Stages: slices.Clone(sc.rate.Stages)}
}

// Spacing is the schedule's spacing; see Rate.
func (sc *Schedule) Spacing() Spacing {
	if sc.poisson {
		return Poisson
	}
	return Even
}

// Seed is the seed of a Poisson schedule's gaps; see Rate.
func (sc *Schedule) Seed() uint64 { return sc.seed }

func bad(rate float64) bool { return !(rate >= 0) || math.IsInf(rate, 1) }

// satAdd adds two durations >= 0, stopping at Forever.
func satAdd(a, b time.Duration) time.Duration {
	if a > Forever-b {
		return Forever
	}
	return a + b
}

// Expected is Λ(t): how many arrivals the rate makes by t, a real number.
// Evenly spaced, the arrivals due by t are Expected(t) rounded half up.
func (sc *Schedule) Expected(t time.Duration) float64 {
	var sum float64
	for _, g := range sc.segs {
		if t <= g.start {
			break
		}
		if t >= g.end {
			sum += g.area
			continue
		}
		tau := (t - g.start).Seconds()
		return sum + g.from*tau + (g.to-g.from)*tau*tau/(2*g.dur.Seconds())
	}
	return sum
}

// Pace implements Pacer.
func (sc *Schedule) Pace(elapsed time.Duration, count int64) (wait time.Duration, stop bool) {
	at, ok := sc.Due(count)
	if !ok {
		return 0, true
	}
	return at - elapsed, false
}

// Due returns when arrival n (from 0) is due, counted from the schedule's
// start, or false when the schedule ends before it. Due is
// non-decreasing in n.
func (sc *Schedule) Due(n int64) (time.Duration, bool) {
	if n < 0 {
		return 0, false
	}
	x := sc.point(n)
	if !(x < sc.total) {
		return 0, false
	}
	if sc.seg >= len(sc.segs) || x < sc.segs[sc.seg].before {
		sc.seg = 0
	}
	for sc.seg < len(sc.segs)-1 && x >= sc.segs[sc.seg+1].before {
		sc.seg++
	}
	g := sc.segs[sc.seg]
	return satAdd(g.start, g.offset(x-g.before)), true
}

// offset is when, from the segment's start, its area reaches a in
// [0, area): the root of from·τ + (to-from)·τ²/(2d) = a, written as
// 2a / (from + √(from² + 2(to-from)·a/d)) so that it stays exact for a
// constant rate (a/from) and loses nothing to cancellation on a ramp.
func (g segment) offset(a float64) time.Duration {
	d := g.dur.Seconds()
	disc := g.from*g.from + 2*(g.to-g.from)*a/d
	den := g.from + math.Sqrt(max(disc, 0))
	if den <= 0 { // a ramp from 0, at its very start
		return 0
	}
	ns := math.Round(2 * a / den * 1e9)
	if ns >= float64(g.dur) { // rounding at the end of the segment
		return g.dur - 1
	}
	return time.Duration(ns)
}

// Index is how many of the schedule's arrivals are due before t (since
// its start): the number of the first one due at t or later, or of all
// of them if the schedule ends before t. Evenly spaced it starts from
// Expected(t); a Poisson schedule draws its gaps up to t, from where the
// last call left them when t is not earlier (some nanoseconds an arrival:
// a second for tens of millions).
func (sc *Schedule) Index(t time.Duration) int64 {
	var n int64
	if sc.poisson {
		if d, ok := sc.Due(sc.n); ok && d < t {
			n = sc.n
		}
	} else {
		n = max(int64(math.Floor(sc.Expected(t)-0.5)), 0)
		for n > 0 {
			if d, ok := sc.Due(n - 1); ok && d < t {
				break
			}
			n--
		}
	}
	for {
		if d, ok := sc.Due(n); !ok || d >= t {
			return n
		}
		n++
	}
}

// point is x_n, where arrival n falls in area.
func (sc *Schedule) point(n int64) float64 {
	if !sc.poisson {
		return float64(n) + 0.5
	}
	if n < sc.n || sc.rng == nil {
		sc.rng = rand.New(rand.NewPCG(sc.seed, 0x9e3779b97f4a7c15))
		sc.n, sc.x = -1, 0
	}
	for sc.n < n && sc.x < sc.total {
		sc.x += sc.rng.ExpFloat64()
		sc.n++
	}
	if sc.n < n { // past the end already: every later point is too
		return math.Inf(1)
	}
	return sc.x
}
