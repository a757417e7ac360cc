package wire

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
)

// agentSecond fills s with one agent's second at issue 13's scale: names
// request names of 10 to 50 samples each, latencies log-uniform from
// 100 µs to 2 s, 1% failed.
func agentSecond(r *rand.Rand, s *metrics.Snapshot, names int) {
	s.Reset()
	for i := range names {
		name := "GET /api/v1/things/" + strconv.Itoa(i)
		for range 10 + r.IntN(41) {
			x := metrics.Sample{Name: name, Status: 200, Latency: time.Duration(100e3 * math.Pow(2e4, r.Float64())),
				BytesIn: 500 + r.Int64N(5000), BytesOut: 200}
			if r.IntN(100) == 0 {
				x.Outcome, x.Status, x.Message = metrics.Failed, 503, "status 503"
			}
			s.Add(&x)
		}
	}
	s.Seq++
	s.Start = time.Unix(1_700_000_000+int64(s.Seq), 0)
	s.End = s.Start.Add(time.Second)
}

// BenchmarkMergeEncoded: one op is a coordinator's second of issue 13, 64
// agents' snapshots of 1,000 request names each merged, one by one
// (MergeEncoded) or all at once (MergeEncodedAll); %core is the share of
// one core that takes, once a second.
func BenchmarkMergeEncoded(b *testing.B) {
	const agents, names = 64, 1000
	r := rand.New(rand.NewPCG(1, 1))
	s := metrics.NewSnapshot()
	encs := make([][]byte, agents)
	size := 0
	for i := range encs {
		agentSecond(r, s, names)
		encs[i] = AppendSnapshot(nil, s)
		size += len(encs[i])
	}
	s = nil
	for _, all := range []bool{false, true} {
		b.Run(map[bool]string{false: "each", true: "all"}[all], func(b *testing.B) {
			coordinator := metrics.NewSnapshot()
			merge := func() {
				if !all {
					for _, e := range encs {
						if _, err := MergeEncoded(e, coordinator); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				_, errs := MergeEncodedAll(encs, coordinator)
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			merge() // every name is known after a run's first second
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				merge()
			}
			op := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(op/1e9*100, "%core")
			b.ReportMetric(op/(agents*names), "ns/hist")
			b.ReportMetric(float64(size)/agents, "B/agent")
		})
	}
}

// BenchmarkAppendSnapshot: one op is one agent's second of 1,000 request
// names encoded.
func BenchmarkAppendSnapshot(b *testing.B) {
	const names = 1000
	s := metrics.NewSnapshot()
	agentSecond(rand.New(rand.NewPCG(1, 1)), s, names)
	buf := AppendSnapshot(nil, s)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		buf = AppendSnapshot(buf[:0], s)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/names, "ns/hist")
	b.ReportMetric(float64(len(buf)), "B/agent")
}
