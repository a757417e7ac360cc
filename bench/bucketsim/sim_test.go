package main

import (
	"testing"
	"time"
)

// The bucket is nginx's: burst+1 requests at once pass (the first makes
// the key's node), the next is refused; requests spaced at the rate pass
// for ever; a refused request does not fill the bucket.
func TestLimiterIsNginxs(t *testing.T) {
	l := &limiter{rate: 400, burst: 20}
	for i := range 21 {
		if !l.allow(1000) {
			t.Fatalf("request %d of a burst of 21 refused: burst 20 lets 21 through at once", i+1)
		}
	}
	if l.allow(1000) {
		t.Fatal("the 22nd request at once passed")
	}
	// 400/s drains a request in 2.5 ms: one every 3 ms passes for ever,
	// once the burst has drained.
	for ms := int64(1100); ms < 11100; ms += 3 {
		if !l.allow(ms) {
			t.Fatalf("a request at %d ms, spaced under the rate, refused (excess %d)", ms, l.excess)
		}
	}
	l = &limiter{rate: 400, burst: 0}
	refused := 0
	for ms := int64(0); ms < 1000; ms++ { // one a millisecond at a 400/s bucket
		if !l.allow(ms) {
			refused++
		}
	}
	// Without a burst a request passes only once the bucket has drained
	// a whole one, 2.5 ms, counted in whole ms: one in 3 passes, 334.
	if refused != 666 {
		t.Errorf("1,000 requests a second at a 400/s bucket without a burst: %d refused, want 666", refused)
	}
}

// An ideal generator's search of a 400/s bucket with a burst of 20 lands
// under the rate (random phases overflow the burst by chance before the
// rate) and never past it: the range bench/contention.sh judges headroom's
// answers by, as the issue measured it (~370-388, the answers of an ideal
// generator's levels).
func TestIdealSearchOfTheBucket(t *testing.T) {
	c := config{Rate: 400, Burst: 20, Think: time.Second, Service: time.Millisecond, Jitter: 0.01,
		Window: 5 * time.Second, Start: 133, Settle: 6 * time.Second, Judge: 4 * time.Second, Measure: 10 * time.Second, Threshold: 0.00025}
	lo, median, hi := c.ideal(200, 1)
	t.Logf("400/s, burst 20: ideal answers [%d, %d], median %d", lo, hi, median)
	if lo < 330 || median < 370 || median > 395 || hi > 405 || lo > median || median > hi {
		t.Errorf("400/s, burst 20: ideal answers [%d, %d], median %d; want the median in [370, 395], the range in [330, 405]", lo, hi, median)
	}
	// With a burst of a thousand the bucket is its rate: the users a
	// cycle (1.001 s) can send at 400/s.
	c.Burst = 1000
	if lo, _, hi := c.ideal(40, 1); lo < 380 || hi > 420 {
		t.Errorf("a burst of 1,000: ideal answers [%d, %d], want about the rate", lo, hi)
	}
}
