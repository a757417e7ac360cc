package metrics

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// BenchmarkSecond is one second of a chat run's collection at 2,000 users
// (~920 requests over 15 names, ~1,200 messages, 15 actions): the shard
// records, the collector drains it into the interval, sums and summarizes
// the interval, merges it into the run's total and resets both.
func BenchmarkSecond(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	shard, interval, all, scratch := NewSnapshot(), NewSnapshot(), NewSnapshot(), NewStat()
	names := make([]string, 15)
	for i := range names {
		names[i] = "GET /api/v4/thing/" + strconv.Itoa(i)
	}
	start := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		for i := range 920 {
			shard.Add(&Sample{Kind: Request, Name: names[i%15], Status: 200, Latency: time.Duration(500+r.IntN(4500)) * time.Microsecond})
		}
		for i := range 400 {
			shard.Add(&Sample{Kind: Action, Name: names[i%15], Latency: time.Duration(1000+r.IntN(9000)) * time.Microsecond, Requests: 1})
		}
		interval.Merge(shard)
		shard.Reset()
		PointOf(interval, start, 2000, 2000, scratch)
		interval.Summaries(Request, time.Second)
		interval.Summaries(Action, time.Second)
		all.Merge(interval)
		interval.Reset()
	}
}
