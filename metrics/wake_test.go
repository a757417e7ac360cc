package metrics

import (
	"testing"
	"time"
)

// A second of starts spread evenly, then the same with a stall that woke
// 60 of them at once: Max is the bunch, Meant stays the schedule.
func TestBurstSeesABunchTheScheduleDidNotAskFor(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	even := NewWakes()
	for i := range 300 { // 300 starts a second, one every 3.33 ms
		at := t0.Add(time.Duration(i) * time.Second / 300)
		even.add(at, at)
	}
	b := even.burst(time.Second)
	if b.Starts != 300 || b.Max10 > 4 || b.Max100 > 31 || b.Meant10 != b.Max10 || b.Meant100 != b.Max100 {
		t.Errorf("even starts: %+v", b)
	}
	if b.Fair10 < 5 || b.Fair10 > 9 || b.Fair100 < 33 || b.Fair100 > 42 {
		t.Errorf("fair share of 3 a slot (30 a window): %d and %d", b.Fair10, b.Fair100)
	}

	stalled := NewWakes()
	stall := t0.Add(500 * time.Millisecond)
	for i := range 300 {
		want := t0.Add(time.Duration(i) * time.Second / 300)
		at := want
		if want.After(stall.Add(-200*time.Millisecond)) && !want.After(stall) { // a 200 ms stall
			at = stall
		}
		stalled.add(want, at)
	}
	b = stalled.burst(time.Second)
	if b.Max10 < 60 || b.Max100 < 60 || b.Meant10 > 4 || b.Meant100 > 31 {
		t.Errorf("a 200 ms stall: %+v", b)
	}
	if p := stalled.Late.Percentile(100); p < 190_000 || p > 201_000 {
		t.Errorf("the latest start %d µs late, want ~200 ms", p)
	}
	if got := stalled.Seal(time.Second); got != b || stalled.Peak != b {
		t.Errorf("Seal: %+v, peak %+v", got, stalled.Peak)
	}
	even.Merge(stalled)
	if even.Peak != b || even.Late.Count != 600 {
		t.Errorf("merged: peak %+v, %d starts", even.Peak, even.Late.Count)
	}
}

// A long window keeps its peak but not every slot.
func TestWakesKeepAFewSecondsOfSlots(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	all := NewWakes()
	for s := range 60 {
		sec := NewWakes()
		for i := range 100 {
			at := t0.Add(time.Duration(s)*time.Second + time.Duration(i)*SlotWidth)
			sec.add(at, at)
		}
		sec.Seal(time.Second)
		all.Merge(sec)
	}
	if len(all.Slots) > 2*MaxSlotAge+100 || all.Late.Count != 6000 || all.Peak.Max10 != 1 || all.Peak.Max100 != 10 {
		t.Errorf("%d slots, %d starts, peak %+v", len(all.Slots), all.Late.Count, all.Peak)
	}
}

func TestPoissonMax(t *testing.T) {
	for _, c := range []struct {
		mu     float64
		n      int
		lo, hi int64
	}{
		{0, 100, 0, 0},
		{0.01, 100, 0, 1},
		{1, 1, 1, 1},   // the median of Poisson(1)
		{3, 100, 7, 8}, // 1 - F(7) = 0.012, 1 - F(8) = 0.0038
		{1000, 10, 1040, 1052},
	} {
		if got := PoissonMax(c.mu, c.n); got < c.lo || got > c.hi {
			t.Errorf("PoissonMax(%v, %d) = %d, want [%d, %d]", c.mu, c.n, got, c.lo, c.hi)
		}
	}
}

func TestPoissonBound(t *testing.T) {
	for _, c := range []struct {
		mu     float64
		n      int
		p      float64
		lo, hi int64
	}{
		{0, 100, 1e-6, 0, 0},
		{1, 1, 0.5, 2, 2},            // P(X >= 1) = 0.63, P(X >= 2) = 0.26
		{2.8, 100, 1e-6, 17, 17},     // 280 starts a second in 10 ms windows: P(X >= 17) < 1e-8 < P(X >= 16)
		{28, 100, 1e-6, 62, 64},      // in 100 ms: about 6.5 standard deviations
		{1000, 10, 1e-6, 1160, 1170}, // normal: 1000 + 5.2·31.6
	} {
		if got := PoissonBound(c.mu, c.n, c.p); got < c.lo || got > c.hi {
			t.Errorf("PoissonBound(%v, %d, %v) = %d, want [%d, %d]", c.mu, c.n, c.p, got, c.lo, c.hi)
		}
	}
	// Above the median of the busiest window, always.
	for _, mu := range []float64{0.1, 1, 2.5, 6.4, 40} {
		if b, m := PoissonBound(mu, 100, 1e-6), PoissonMax(mu, 100); b <= m {
			t.Errorf("mu %v: bound %d, median max %d", mu, b, m)
		}
	}
}
