package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/runner"
)

// TestOpenProgressLine: the live line of the open model shows the
// arrivals a second against the rate, the drops and late starts so far,
// and labels its latencies.
func TestOpenProgressLine(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(Env{Stderr: &b})
	p.open = true
	p.update(runner.Tick{Ready: 3, Want: 10, Run: &runner.RunTick{Phase: "setup"}})
	p.update(runner.Tick{Elapsed: 12 * time.Second, Users: 10, Last: metrics.Point{P50Ms: 1.5, P99Ms: 700},
		Run: &runner.RunTick{Total: time.Minute, Phase: "steady", Rate: 100, Started: 97, Dropped: 30, Late: 2}}) // within 5 s of the last: printed only on a terminal
	p.statusLine.last = time.Time{}
	p.update(runner.Tick{Elapsed: 13 * time.Second, Users: 10, Last: metrics.Point{P50Ms: 1.5, P99Ms: 700},
		Run: &runner.RunTick{Total: time.Minute, Phase: "steady", Rate: 100, Started: 97, Dropped: 30, Late: 2}})
	out := b.String()
	for _, want := range []string{"setting up the pool 00:00  users 3/10 set up", "open 00:13/01:00  arrivals/s 97 of 100  dropped 30  late 2  pool 10 users",
		"p99 700.0ms (from intended start)"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress lacks %q:\n%s", want, out)
		}
	}
}
