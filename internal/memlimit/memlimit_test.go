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

// TestGCFloorCollectsLessOften: a small live heap and 256 MiB of garbage
// take dozens of cycles under GOGC=100 and a few under a 64 MiB floor;
// stop gives GOGC back, and a GOGC from the environment is left alone.
func TestGCFloorCollectsLessOften(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Fatal("the test sets GOGC itself: run it without one")
	}
	live := make([][]byte, 0, 256)
	for range 256 {
		live = append(live, make([]byte, 4<<10)) // ~1 MiB kept
	}
	var sink []byte
	churn := func() uint32 { // cycles while 256 MiB of garbage is made
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 1 << 16 {
			sink = make([]byte, 4<<10)
		}
		runtime.ReadMemStats(&after)
		return after.NumGC - before.NumGC
	}
	plain := churn()
	stop := GCFloor(func() uint64 { return 64 << 20 })
	runtime.GC() // the first cycle sets the floor
	floored := churn()
	stop()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC after stop: %d, want 100", got)
	}
	t.Logf("cycles for 256 MiB of garbage: %d under GOGC=100, %d with a 64 MiB floor", plain, floored)
	if plain < 20 || floored > 6 {
		t.Errorf("%d cycles under GOGC=100 (want 20 or more), %d with the floor (want at most 6)", plain, floored)
	}
	runtime.KeepAlive(live)
	runtime.KeepAlive(sink)

	t.Setenv("GOGC", "100")
	stop = GCFloor(func() uint64 { return 64 << 20 })
	runtime.GC()
	runtime.GC() // its finalizer, were there one, has run
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC with GOGC=100 in the environment: %d, want it left at 100", got)
	}
	stop()
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
	} {
		if got := floorPercent(c.live, c.floor, c.base); got != c.want {
			t.Errorf("floorPercent(%d, %d, %d) = %d, want %d", c.live, c.floor, c.base, got, c.want)
		}
	}
}

func TestFloorFollowsUsers(t *testing.T) {
	for _, c := range []struct {
		limit uint64
		users int
		want  uint64
	}{
		{12 << 30, 2, 128 << 10},     // a hostile server's two users: GOGC's own goal
		{12 << 30, 2000, 125 << 20},  // a chat run's 2,000
		{12 << 30, 100000, MaxFloor}, // at most 128 MiB
		{256 << 20, 2000, 32 << 20},  // a pod's agent: an eighth of its limit
		{12 << 30, -1, 0},
	} {
		if got := Floor(c.limit, c.users); got != c.want {
			t.Errorf("Floor(%d, %d) = %d, want %d", c.limit, c.users, got, c.want)
		}
	}
}
