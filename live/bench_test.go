package live

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/runner"
)

// BenchmarkTick is one second of a run with 200 request names and 4,400
// requests, watched: what --ui costs the run a second (bench/live-cost.sh
// measures it whole).
func BenchmarkTick(b *testing.B) {
	v := New()
	ch, _ := v.hub.join()
	go func() {
		for range ch {
		}
	}()
	r := rand.New(rand.NewPCG(1, 2))
	snap := metrics.NewSnapshot()
	now := time.Now()
	snap.Start, snap.End = now.Add(-time.Second), now
	for range 4400 {
		snap.Add(&metrics.Sample{Kind: metrics.Request, Name: fmt.Sprintf("GET /names/%d", r.IntN(200)), Outcome: metrics.OK, Status: 200,
			Latency: time.Duration(200+r.IntN(3000)) * time.Microsecond})
	}
	total := snap.Total(metrics.Request, metrics.NewStat())
	res := &result.Result{Kind: "run"}
	for i := range 600 {
		res.Timeline = append(res.Timeline, metrics.Point{T: float64(i), Users: 100, RPS: 4400, P99Ms: 3})
	}
	b.ResetTimer()
	for b.Loop() {
		v.Tick(runner.Tick{Res: res, Interval: snap, Total: total})
	}
}
