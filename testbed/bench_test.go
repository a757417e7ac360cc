package testbed

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkSaturated drives a testbed (8 workers, GetChannelPosts at 4 ms) over real HTTP with 32
// closed-loop clients and reports its throughput, in requests per second, and that throughput as a
// fraction of Capacity ("of-capacity", about 1 when the model holds):
//
//	go test -run '^$' -bench Saturated -benchtime 8000x ./testbed/
func BenchmarkSaturated(b *testing.B) {
	s := New(Config{})
	c := startServer(b, s)
	_, alice := c.signup("alice")
	var chans []channel
	alice.do("GET", "/api/v4/users/me/channels", nil, &chans)
	path := "/api/v4/channels/" + chans[0].ID + "/posts"

	var left atomic.Int64
	left.Store(int64(b.N))
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				alice.do("GET", path, nil, nil)
			}
		})
	}
	wg.Wait()
	rate := float64(b.N) / time.Since(start).Seconds()
	b.ReportMetric(rate, "req/s")
	b.ReportMetric(rate/s.Capacity(map[string]float64{"GetChannelPosts": 1}), "of-capacity")
}
