package engine

import (
	"math"
	"math/big"
	"testing"
	"time"
)

func schedule(t *testing.T, r Rate, s Spacing, seed uint64) *Schedule {
	t.Helper()
	sc, err := NewSchedule(r, s, seed)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// dues returns the due times of the first n arrivals, and how many the
// schedule has in all (up to max).
func dues(sc *Schedule, n int, max int64) (first []time.Duration, total int64) {
	for i := int64(0); i < max; i++ {
		at, ok := sc.Due(i)
		if !ok {
			return first, i
		}
		if i < int64(n) {
			first = append(first, at)
		}
	}
	return first, max
}

const ms = time.Millisecond

// TestScheduleEven: where the first arrivals fall, how many there are in
// all, for a constant rate, a ramp from 0, a stage at rate 0 between two,
// a ramp down to 0 and a rate of a billion a second.
func TestScheduleEven(t *testing.T) {
	sec := func(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }
	for _, c := range []struct {
		name  string
		rate  Rate
		first []time.Duration
		total int64
	}{
		{"constant", Constant(4, 2*time.Second), []time.Duration{125 * ms, 375 * ms, 625 * ms, 875 * ms, 1125 * ms}, 8},
		{"100/s for 10 s", Constant(100, 10*time.Second), []time.Duration{5 * ms, 15 * ms}, 1000},
		{"fractional rate", Constant(0.5, 10*time.Second), []time.Duration{time.Second, 3 * time.Second}, 5},
		{"too short for one", Constant(1, 400*ms), nil, 0},
		{"half an arrival is none", Constant(1, 500*ms), nil, 0},
		// rate t/s from 0: Λ(t) = t²/2, arrival n at √(2n+1) s.
		{"ramp from 0", Rate{Stages: []Stage{{Target: 10, Duration: 10 * time.Second}}},
			[]time.Duration{time.Second, sec(math.Sqrt(3)), sec(math.Sqrt(5))}, 50},
		// 10/s for 1 s, 0 for 2 s, 10/s for 1 s: the eleventh arrival waits out the gap.
		{"a stage at rate 0", Rate{Start: 10, Stages: []Stage{{10, time.Second}, {0, 0}, {0, 2 * time.Second}, {10, 0}, {10, time.Second}}},
			nil, 20},
		// 10/s down to 0 over 2 s: Λ(t) = 10t - 2.5t², ten arrivals, the first at (10-√95)/5 s.
		{"ramp down to 0", Rate{Start: 10, Stages: []Stage{{0, 2 * time.Second}}}, []time.Duration{sec((10 - math.Sqrt(95)) / 5)}, 10},
		{"a billion a second", Constant(1e9, ms), []time.Duration{1, 2, 3}, 1_000_000}, // (n+½) ns, rounded up
		{"no stages", Rate{Start: 5}, nil, 0},
	} {
		sc := schedule(t, c.rate, Even, 0)
		first, total := dues(sc, len(c.first), 10_000_000)
		if total != c.total {
			t.Errorf("%s: %d arrivals, want %d", c.name, total, c.total)
		}
		for i, want := range c.first {
			if i >= len(first) || first[i] != want {
				t.Errorf("%s: first arrivals %v, want %v", c.name, first, c.first)
				break
			}
		}
	}
	gap := schedule(t, Rate{Start: 10, Stages: []Stage{{10, time.Second}, {0, 0}, {0, 2 * time.Second}, {10, 0}, {10, time.Second}}}, Even, 0)
	if a, _ := gap.Due(9); a != 950*ms {
		t.Errorf("tenth arrival at %v, want 950ms", a)
	}
	if a, _ := gap.Due(10); a != 3050*ms {
		t.Errorf("eleventh arrival at %v, want 3.05s: none while the rate is 0", a)
	}
}

// TestScheduleCountByElapsed: evenly spaced, the arrivals due by t are
// Λ(t) rounded, at any t, on ramps too; and each arrival n falls where Λ
// is n+½ (Due inverts Expected).
func TestScheduleCountByElapsed(t *testing.T) {
	for _, r := range []Rate{
		Constant(7, 30*time.Second),
		{Start: 3, Stages: []Stage{{50, 10 * time.Second}, {50, 5 * time.Second}, {0, 20 * time.Second}, {0, time.Second}, {12, 3 * time.Second}}},
	} {
		sc := schedule(t, r, Even, 0)
		var n int64
		for el := time.Duration(0); el <= 40*time.Second; el += 37 * ms {
			for {
				at, ok := sc.Due(n)
				if !ok || at > el {
					break
				}
				n++
			}
			if want := int64(math.Floor(sc.Expected(el) + 0.5)); n != want {
				t.Fatalf("rate %+v: %d arrivals due by %v, want Λ rounded = %d (Λ = %.4f)", r, n, el, want, sc.Expected(el))
			}
		}
		for i := int64(0); ; i++ {
			at, ok := sc.Due(i)
			if !ok {
				break
			}
			if x := sc.Expected(at); math.Abs(x-(float64(i)+0.5)) > 1e-6 {
				t.Fatalf("rate %+v: Λ at arrival %d is %v, want %v", r, i, x, float64(i)+0.5)
			}
		}
	}
}

// TestScheduleDoesNotDrift: at 3/s (a gap of 333,333,333⅓ ns) the
// millionth arrival is where exact arithmetic puts it, within the 1 ns
// of its own rounding: no error piles up from one gap to the next.
func TestScheduleDoesNotDrift(t *testing.T) {
	sc := schedule(t, Constant(3, Forever), Even, 0)
	for _, n := range []int64{0, 1, 999_999, 1_000_000, 12_345_678} {
		at, ok := sc.Due(n)
		if !ok {
			t.Fatalf("arrival %d: none", n)
		}
		exact := new(big.Rat).SetFrac64(2*n+1, 6) // (n+½)/3 s
		exact.Mul(exact, big.NewRat(1e9, 1))
		f, _ := exact.Float64()
		if d := math.Abs(float64(at) - f); d > 1 {
			t.Errorf("arrival %d at %d ns, exact %.1f ns: %v off", n, at, f, d)
		}
	}
}

func TestPace(t *testing.T) {
	sc := schedule(t, Constant(4, 2*time.Second), Even, 0)
	for _, c := range []struct {
		elapsed time.Duration
		count   int64
		wait    time.Duration
		stop    bool
	}{
		{0, 0, 125 * ms, false},
		{100 * ms, 0, 25 * ms, false},
		{125 * ms, 0, 0, false},
		{time.Second, 1, -625 * ms, false}, // behind: due 625 ms ago, its intended time kept
		{1900 * ms, 7, -25 * ms, false},
		{1900 * ms, 8, 0, true},
		{time.Hour, 8, 0, true},
	} {
		wait, stop := sc.Pace(c.elapsed, c.count)
		if wait != c.wait || stop != c.stop {
			t.Errorf("Pace(%v, %d) = %v, %v; want %v, %v", c.elapsed, c.count, wait, stop, c.wait, c.stop)
		}
	}
}

// TestSchedulePoisson: a seed gives one schedule, whichever order it is
// asked in; another seed another; gaps are exponential with the rate's
// mean, and the count by t keeps to Λ(t) within its noise.
func TestSchedulePoisson(t *testing.T) {
	r := Constant(100, 1000*time.Second) // 100,000 arrivals expected
	a, b := schedule(t, r, Poisson, 42), schedule(t, r, Poisson, 42)
	late, _ := a.Due(5000)
	first, _ := dues(a, 5, 5) // asked after a later one: drawn again from the start
	again, _ := dues(b, 5, 5)
	for i := range first {
		if first[i] != again[i] {
			t.Fatalf("seed 42 gave %v, then %v", first, again)
		}
	}
	if l2, _ := b.Due(5000); l2 != late {
		t.Errorf("arrival 5000 at %v, then %v", late, l2)
	}
	other, _ := dues(schedule(t, r, Poisson, 43), 5, 5)
	if other[0] == first[0] && other[1] == first[1] {
		t.Errorf("seeds 42 and 43 gave the same arrivals %v", first)
	}
	_, total := dues(a, 0, 1_000_000)
	if d := math.Abs(float64(total) - 100_000); d > 4*math.Sqrt(100_000) {
		t.Errorf("%d arrivals, want 100,000 ± 4σ (1,265)", total)
	}
	// Gaps: mean 10 ms, and the share above the mean e^-1 for an exponential.
	var sum, above float64
	prev := time.Duration(0)
	for i := range int64(10_000) {
		at, _ := a.Due(i)
		if at < prev {
			t.Fatalf("arrival %d at %v, before the one before it (%v)", i, at, prev)
		}
		g := float64(at - prev)
		sum += g
		if g > float64(10*ms) {
			above++
		}
		prev = at
	}
	if mean := sum / 10_000 / 1e6; math.Abs(mean-10) > 0.4 {
		t.Errorf("mean gap %.2f ms, want 10 ± 0.4", mean)
	}
	if share := above / 10_000; math.Abs(share-math.Exp(-1)) > 0.02 {
		t.Errorf("%.3f of gaps above the mean, want e^-1 = 0.368 ± 0.02: not exponential", share)
	}
}

func TestScheduleRefusesBadRates(t *testing.T) {
	for _, r := range []Rate{
		{Start: -1},
		{Start: math.NaN()},
		{Start: math.Inf(1)},
		{Stages: []Stage{{Target: 1, Duration: -time.Second}}},
		{Stages: []Stage{{Target: math.NaN(), Duration: time.Second}}},
	} {
		if _, err := NewSchedule(r, Even, 0); err == nil {
			t.Errorf("NewSchedule(%+v) took it", r)
		}
	}
}

// TestRateAtLengthPeak: the rate at a time follows the stages linearly
// (a stage of 0 s jumps), is 0 once they are over; the length sums them.
func TestRateAtLengthPeak(t *testing.T) {
	r := Rate{Start: 10, Stages: []Stage{
		{Target: 110, Duration: 10 * time.Second}, // 10 -> 110 over 10 s
		{Target: 110, Duration: 5 * time.Second},  // held
		{Target: 40, Duration: 0},                 // a jump
		{Target: 0, Duration: 4 * time.Second},    // down to 0
	}}
	for _, c := range []struct {
		at   time.Duration
		want float64
	}{{0, 10}, {5 * time.Second, 60}, {12 * time.Second, 110}, {15 * time.Second, 40}, {17 * time.Second, 20}, {19 * time.Second, 0}, {time.Hour, 0}} {
		if got := r.At(c.at); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("At(%v) = %v, want %v", c.at, got, c.want)
		}
	}
	if l := r.Length(); l != 19*time.Second {
		t.Errorf("Length = %v, want 19s", l)
	}
	if p := r.Peak(); p != 110 {
		t.Errorf("Peak = %v, want 110", p)
	}
	if l := Constant(5, Forever).Length(); l != Forever {
		t.Errorf("a rate held forever lasts %v", l)
	}
}

// TestScheduleDescribesItself: a schedule made again from its Rate,
// Spacing and Seed (as agents are sent one) has the same arrivals.
func TestScheduleDescribesItself(t *testing.T) {
	for _, sp := range []Spacing{Even, Poisson} {
		r := Rate{Start: 5, Stages: []Stage{{Target: 50, Duration: 3 * time.Second}, {Target: 50, Duration: Forever}}}
		a := schedule(t, r, sp, 9)
		r.Stages[0].Target = 1 // the schedule keeps its own copy
		b := schedule(t, a.Rate(), a.Spacing(), a.Seed())
		if a.Spacing() != sp || a.Seed() != 9 || a.Rate().Stages[0].Target != 50 {
			t.Fatalf("%v: described as %+v, %v, %d", sp, a.Rate(), a.Spacing(), a.Seed())
		}
		da, _ := dues(a, 300, 300)
		db, _ := dues(b, 300, 300)
		for i := range da {
			if da[i] != db[i] {
				t.Fatalf("%v: arrival %d at %v, and %v from the description", sp, i, da[i], db[i])
			}
		}
	}
}

// TestScheduleIndex: Index(t) is the number of the first arrival due at t
// or later, for each arrival's own due time and a nanosecond either side,
// past the end, and for a Poisson schedule asked forwards and backwards.
func TestScheduleIndex(t *testing.T) {
	for _, c := range []struct {
		name string
		sp   Spacing
		r    Rate
	}{
		{"even", Even, Constant(100, 2*time.Second)},
		{"even ramp", Even, Rate{Stages: []Stage{{Target: 200, Duration: time.Second}, {Target: 30, Duration: time.Second}}}},
		{"even forever", Even, Constant(7, Forever)},
		{"poisson", Poisson, Constant(100, 2*time.Second)},
	} {
		sc := schedule(t, c.r, c.sp, 3)
		ref := schedule(t, c.r, c.sp, 3)
		first, total := dues(ref, 300, 300)
		check := func(at time.Duration, want int64) {
			t.Helper()
			if got := sc.Index(at); got != want {
				t.Errorf("%s: Index(%v) = %d, want %d", c.name, at, got, want)
			}
		}
		check(0, 0)
		for i, at := range first {
			if i > 0 && first[i-1] == at {
				continue // two due at once: the first of them is the answer
			}
			check(at-1, int64(i))
			check(at, int64(i))
		}
		for i := len(first) - 1; i >= 0; i -= 37 { // backwards: drawn again from the start
			if i+1 < len(first) && first[i+1] == first[i] {
				continue
			}
			check(first[i]+1, int64(i+1))
		}
		if total < 300 {
			check(5*time.Second, total)
		}
	}
}

// TestStrideTakesItsShare: of every 4 arrivals from 10 on, the share at
// positions 1 and 3, from arrival 15 on, is arrivals 15, 17, 19, 21, ...,
// each due at its schedule's time less the offset.
func TestStrideTakesItsShare(t *testing.T) {
	sc := schedule(t, Constant(10, 10*time.Second), Even, 0)
	s, err := NewStride(sc, 10, 4, []int64{1, 3}, 15, 1500*ms)
	if err != nil {
		t.Fatal(err)
	}
	for j, want := range []int64{15, 17, 19, 21, 23} {
		if got := s.Arrival(int64(j)); got != want {
			t.Errorf("arrival %d of the share is the schedule's %d, want %d", j, got, want)
		}
	}
	// arrival 15 is due at 1.55 s: 50 ms after the offset
	if wait, stop := s.Pace(0, 0); stop || wait != 50*ms {
		t.Errorf("Pace(0, 0) = %v, %v; want 50ms", wait, stop)
	}
	if wait, stop := s.Pace(100*ms, 1); stop || wait != 150*ms { // arrival 17 at 1.75 s
		t.Errorf("Pace(100ms, 1) = %v, %v; want 150ms", wait, stop)
	}
	if _, stop := s.Pace(0, 42); stop || s.Arrival(42) != 99 { // the schedule's last
		t.Errorf("Pace(0, 42) stops before arrival 99, the schedule's last")
	}
	if _, stop := s.Pace(0, 43); !stop { // arrival 101
		t.Errorf("Pace(0, 43) goes on past the schedule's 100 arrivals")
	}
	for _, bad := range []struct {
		anchor, cycle, from int64
		pos                 []int64
		off                 time.Duration
	}{{0, 0, 0, nil, 0}, {5, 2, 4, []int64{0}, 0}, {0, 2, 0, []int64{2}, 0}, {0, 3, 0, []int64{1, 1}, 0}, {0, 1, 0, []int64{0}, -1}} {
		if _, err := NewStride(sc, bad.anchor, bad.cycle, bad.pos, bad.from, bad.off); err == nil {
			t.Errorf("NewStride(%+v) took it", bad)
		}
	}
	none, _ := NewStride(sc, 0, 3, nil, 0, 0)
	if _, stop := none.Pace(0, 0); !stop {
		t.Error("a share of no position has arrivals")
	}
}
