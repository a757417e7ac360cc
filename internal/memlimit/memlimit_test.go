package memlimit

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
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

// TestGCFloorRaisesTheGoal: once the pacer has seen the process allocate
// fast, the collector's goal is the live heap plus the floor (64 MiB);
// once it has seen it idle, it is GOGC=100's again; stop gives GOGC back,
// a second pacer leaves the first alone, and a GOGC from the environment
// is left alone.
func TestGCFloorRaisesTheGoal(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Fatal("the test sets GOGC itself: run it without one")
	}
	defer debug.SetGCPercent(100)
	var sink []byte
	goal := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	p := newPacer(func() uint64 { return 64 << 20 })
	for range 1 << 12 { // 16 MiB: far more than 64 MiB over 15 s at any speed this machine has
		sink = make([]byte, 4<<10)
	}
	runtime.KeepAlive(sink)
	runtime.GC() // the live heap as it is, not as a cycle during the loop saw it
	p.apply(time.Now())
	_, live := heapStats()
	if g := goal(); g < live+60<<20 {
		t.Errorf("goal %d MiB for %d MiB live after 16 MiB allocated in an instant (GOGC %d), want the live heap + 64 MiB",
			g>>20, live>>20, p.percent)
	}
	p.apply(p.at.Add(time.Hour)) // nothing allocated for an hour
	if g := goal(); p.percent != 100 || g > max(2*live, 4<<20)+1<<20 {
		t.Errorf("goal %d MiB for %d MiB live (GOGC %d) after an idle hour, want GOGC=100's", g>>20, live>>20, p.percent)
	}

	stop := GCFloor(func() uint64 { return 64 << 20 })
	debug.SetGCPercent(321)                      // as the pacer would
	GCFloor(func() uint64 { return 64 << 20 })() // a second one leaves the first's alone
	if got := debug.SetGCPercent(321); got != 321 {
		t.Errorf("GOGC after a second pacer's stop: %d, want the first's 321", got)
	}
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
