package agents

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/internal/rusage"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/metrics/wire"
)

// BenchmarkCoordinatorDrain is the coordinator's second at the issue's
// scale: 64 agents' snapshots of 1,000 request names each (10-50 samples a
// name, latencies log-uniform from 100 µs to 2 s), queued as they arrive
// and merged by Fleet.Drain into the second's snapshot, as the runner
// calls it. cpu-%/op is the share of one core a second of that takes.
func BenchmarkCoordinatorDrain(b *testing.B) {
	const agents, names = 64, 1000
	rng := rand.New(rand.NewPCG(7, 13))
	encs := make([][]byte, agents)
	for a := range encs {
		s := metrics.NewSnapshot()
		s.Start, s.End = time.Unix(100, 0), time.Unix(101, 0)
		for n := range names {
			for range 10 + rng.IntN(41) {
				us := math.Exp(math.Log(100) + rng.Float64()*(math.Log(2e6)-math.Log(100)))
				s.Add(&metrics.Sample{Kind: metrics.Request, Name: fmt.Sprintf("GET /api/%d", n), Status: 200, Latency: time.Duration(us) * time.Microsecond})
			}
		}
		encs[a] = wire.AppendSnapshot(nil, s)
	}
	c, f, _, _ := fleetOf(agents)
	into := metrics.NewSnapshot()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := rusage.CPU()
	for range b.N {
		c.mu.Lock()
		for i, r := range c.remotes {
			r.pending = append(r.pending, encs[i])
			r.flushed = f.tick + 1 // each has answered this tick's flush
		}
		c.mu.Unlock()
		into.Reset()
		f.Drain(into)
	}
	b.StopTimer()
	if into.Requests["GET /api/0"] == nil || into.Requests["GET /api/0"].Count < agents*10 {
		b.Fatal("the snapshots did not merge")
	}
	b.ReportMetric(100*(rusage.CPU()-cpu0).Seconds()/float64(b.N), "cpu-%/op")
}
