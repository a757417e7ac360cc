package memlimit

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
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

// TestGCFloorCollectsLessOften: a small live heap that allocates 256 MiB
// takes dozens of cycles under GOGC=100 and a few once the pacer has seen
// it allocate fast (a floor of 64 MiB); once it has seen it idle, GOGC is
// back to 100; stop gives GOGC back, and a GOGC from the environment is
// left alone.
func TestGCFloorCollectsLessOften(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Fatal("the test sets GOGC itself: run it without one")
	}
	live := make([][]byte, 0, 256)
	for range 256 {
		live = append(live, make([]byte, 4<<10)) // ~1 MiB kept
	}
	var sink []byte
	churn := func(n int) uint32 { // cycles while n × 4 KiB of garbage is made
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			sink = make([]byte, 4<<10)
		}
		runtime.ReadMemStats(&after)
		return after.NumGC - before.NumGC
	}
	runtime.GC()
	plain := churn(1 << 16)

	p := newPacer(func() uint64 { return 64 << 20 })
	churn(1 << 12) // 16 MiB: far more than 64 MiB over 15 s at any speed this machine has
	p.apply(time.Now())
	if p.percent <= 100 {
		t.Fatalf("GOGC %d after 16 MiB allocated in an instant, want it raised", p.percent)
	}
	runtime.GC()
	paced := churn(1 << 16)
	t.Logf("cycles for 256 MiB of garbage: %d under GOGC=100, %d paced (GOGC %d)", plain, paced, p.percent)
	if plain < 20 || paced > 6 {
		t.Errorf("%d cycles under GOGC=100 (want 20 or more), %d paced (want at most 6)", plain, paced)
	}
	p.apply(p.at.Add(time.Hour)) // nothing allocated for an hour
	if got := debug.SetGCPercent(100); got != 100 || p.percent != 100 {
		t.Errorf("GOGC %d (pacer's %d) after an idle hour, want 100", got, p.percent)
	}
	runtime.KeepAlive(live)
	runtime.KeepAlive(sink)

	stop := GCFloor(func() uint64 { return 64 << 20 })
	debug.SetGCPercent(321) // as the pacer would
	stop()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC after stop: %d, want 100", got)
	}
	t.Setenv("GOGC", "50")
	debug.SetGCPercent(50)
	GCFloor(func() uint64 { return 64 << 20 })() // a no-op, and so is its stop
	if got := debug.SetGCPercent(100); got != 50 {
		t.Errorf("GOGC with GOGC=50 in the environment: %d, want it left at 50", got)
	}
}

func TestFloorPercent(t *testing.T) {
	for _, c := range []struct {
		live, floor uint64
		base, want  int
	}{
		{40 << 20, 128 << 20, 100, 320},  // 40 MB live: goal 168 MB
		{256 << 20, 128 << 20, 100, 100}, // GOGC's own goal is more
		{0, 128 << 20, 100, 3200},        // at most 32 × the 4 MiB minimum: 128 MiB
		{2 << 20, 128 << 20, 100, 3200},
		{10 << 20, 5 << 20, 200, 200},
		{40 << 20, 0, 100, 100}, // idle
	} {
		if got := floorPercent(c.live, c.floor, c.base); got != c.want {
			t.Errorf("floorPercent(%d, %d, %d) = %d, want %d", c.live, c.floor, c.base, got, c.want)
		}
	}
}
