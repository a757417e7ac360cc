package engine

import (
	"context"
	"net/url"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario"
)

// Users added in one call with a constant think time must not act in
// lockstep: their starts spread over Config.Spread and their first
// actions over one think time, and the spread stays (the think time is
// constant).
func TestUsersAddedTogetherAreSpread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc, err := scenario.Load(context.Background(), "s.star", []byte(
			"def setup(user):\n    pass\ndef a(user):\n    pass\nactions = [action('A', a)]\nthink_time = think.constant('1s')\n"), scenario.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		start := time.Now()
		acts := map[int][]time.Duration{}
		rec := metrics.NewRecorder(1, nil, time.Now)
		e := New(Config{Scenario: sc, Target: &url.URL{Scheme: "http", Host: "127.0.0.1:1"}, Seed: 7, Recorder: rec,
			OnAction: func(user int, _ string) {
				mu.Lock()
				acts[user] = append(acts[user], time.Since(start))
				mu.Unlock()
			}})
		const users = 40
		e.SetUsers(users)
		time.Sleep(3500 * time.Millisecond) // virtual: three think cycles and a half
		e.Stop()

		// Within one second, the first actions fall in many distinct
		// milliseconds, and each user keeps its phase.
		firsts := map[time.Duration]int{}
		var ms []float64
		for u, ts := range acts {
			if len(ts) < 3 {
				t.Fatalf("user %d acted %d times in 3.5 s with a 1 s think time", u, len(ts))
			}
			firsts[ts[0].Truncate(time.Millisecond)]++
			if d := ts[1] - ts[0]; d < 990*time.Millisecond || d > 1010*time.Millisecond {
				t.Errorf("user %d: %v between its first two actions, want the think time, give or take its 1%% jitter", u, d)
			}
			ms = append(ms, float64(ts[0].Milliseconds()))
		}
		if len(acts) != users {
			t.Fatalf("%d users acted, want %d", len(acts), users)
		}
		most := 0
		for _, n := range firsts {
			most = max(most, n)
		}
		if most > 2 {
			t.Errorf("%d of %d users first acted in the same millisecond: lockstep", most, users)
		}
		sort.Float64s(ms)
		if ms[0] > 250 || ms[len(ms)-1] < 750 || ms[len(ms)-1] > 1100 {
			t.Errorf("first actions from %v ms to %v ms: want them spread over one think time (0..1100 ms)", ms[0], ms[len(ms)-1])
		}

		// The time to set up is recorded once per user, as a setup sample.
		snap := metrics.NewSnapshot()
		rec.Drain(snap)
		if snap.Setup == nil || snap.Setup.Actions[scenario.ReadyAction] == nil || snap.Setup.Actions[scenario.ReadyAction].Count != users {
			t.Errorf("want %d %q setup samples, got %+v", users, scenario.ReadyAction, snap.Setup)
		}
		if snap.Actions[scenario.SetupAction] != nil {
			t.Errorf("setup recorded among the acting actions")
		}
	})
}
