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
