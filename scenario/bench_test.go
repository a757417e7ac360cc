package scenario

import (
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/transport"
)

type nopDoer struct{}

func (nopDoer) Do(_ *transport.Request, resp *transport.Response) {
	*resp = transport.Response{Status: 200, Body: []byte("Hello, World!")}
}
func (nopDoer) Cookies() map[string]string { return nil }

// BenchmarkActionOverhead is what headroom adds to each request of the
// cheapest scenario: one Starlark action making one GET, recorded into a
// real shard. The transport is a no-op, so this is scenario + metrics only.
func BenchmarkActionOverhead(b *testing.B) {
	sc, err := load("b.star", "def hit(user):\n    user.http.get('/', name='GET /')\nactions = [action('Hit', hit)]\n")
	if err != nil {
		b.Fatal(err)
	}
	rec := metrics.NewRecorder(1, metrics.NewProm(), time.Now)
	u := NewUser(sc, Env{ID: 1, Seed: 1, HTTP: nopDoer{}, Record: rec.Shard(0)})
	b.ReportAllocs()
	for b.Loop() {
		u.Run(u.Next())
	}
}
