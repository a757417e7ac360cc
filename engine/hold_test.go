package engine

import (
	"context"
	"net/url"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario"
)

// Held users (a search's warm-up) finish their setup and act on nothing
// until released; then they act, spread over a think time.
func TestHeldUsersSetUpAndWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc, err := scenario.Load(context.Background(), "s.star", []byte(
			"def setup(user):\n    pass\ndef a(user):\n    pass\nactions = [action('A', a)]\nthink_time = think.constant('1s')\n"), scenario.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		var acts atomic.Int64
		e := New(Config{Scenario: sc, Target: &url.URL{Scheme: "http", Host: "127.0.0.1:1"}, Seed: 7, Recorder: metrics.NewRecorder(1, nil, time.Now),
			OnAction: func(int, string) { acts.Add(1) }})
		e.Hold(true)
		e.SetUsers(20)
		time.Sleep(5 * time.Second) // virtual (synctest): the bubble's clock, no wall time
		if e.Ready() != 20 || acts.Load() != 0 {
			t.Fatalf("held: %d users ready, %d actions; want 20 and none", e.Ready(), acts.Load())
		}
		e.SetUsers(8) // the search starts below the warm-up
		e.Hold(false)
		time.Sleep(1200 * time.Millisecond) // a think time and the 100 ms a held user may still wait
		if n := acts.Load(); n < 8 || n > 16 {
			t.Errorf("released: %d actions in 1.2 s from 8 users with a 1 s think time, want each to act once or twice", n)
		}
		e.Stop()
	})
}
