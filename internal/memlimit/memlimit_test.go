package memlimit

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestMemWatchReportsTheFirstSamplePastTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		samples := []uint64{100, 900, 1000, 1001, 5000}
		calls := 0
		w := Watch{Limit: 1000, Every: 20 * time.Millisecond, Sample: func() uint64 {
			calls++
			return samples[calls-1]
		}}
		start := time.Now()
		var got uint64
		var at time.Duration
		w.Run(context.Background(), func(used uint64) { got, at = used, time.Since(start) })
		if got != 1001 || at != 80*time.Millisecond || calls != 4 {
			t.Errorf("over(%d) at %v after %d samples; want 1001 at 80ms, the 4th", got, at, calls)
		}

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		w.Sample = func() uint64 { return 10 }
		start = time.Now()
		w.Run(ctx, func(uint64) { t.Error("over called under the limit") })
		if el := time.Since(start); el != time.Second {
			t.Errorf("returned after %v, want when ctx ended (1s)", el)
		}
	})
}
