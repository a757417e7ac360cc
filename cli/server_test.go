package cli

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/testbed"
)

// --server-latency FAMILY:LABEL reaches the run's server figures: a
// family headroom does not know shows in the result by that label.
func TestServerLatencyFlag(t *testing.T) {
	dir := t.TempDir()
	tb := httptest.NewServer(testbed.New(testbed.Config{}).Handler())
	defer tb.Close()
	var scrapes atomic.Int64
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := scrapes.Add(1) // one more 50 ms call of Search each scrape
		fmt.Fprintf(w, "# TYPE myapp_rpc_duration_seconds histogram\n"+
			"myapp_rpc_duration_seconds_bucket{rpc=\"Search\",code=\"OK\",le=\"0.1\"} %d\n"+
			"myapp_rpc_duration_seconds_bucket{rpc=\"Search\",code=\"OK\",le=\"+Inf\"} %d\n"+
			"myapp_rpc_duration_seconds_sum{rpc=\"Search\",code=\"OK\"} %g\n"+
			"myapp_rpc_duration_seconds_count{rpc=\"Search\",code=\"OK\"} %d\n", n, n, 0.05*float64(n), n)
	}))
	defer metrics.Close()
	sc := write(t, dir, "s.star", "def a(user):\n    user.http.get('/healthz')\nactions = [action('A', a)]\nthink_time = think.constant('100ms')\n")
	out := filepath.Join(dir, "out")
	code, _, stderr := headroom(t, "run", sc, "--target", tb.URL, "--users", "1", "--duration", "2s", "--scrape", metrics.URL+"/metrics",
		"--server-latency", "myapp_rpc_duration_seconds:rpc", "--out", out, "--quiet", "--no-report")
	if code != ExitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	res, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	ts := res.Server.Targets[0].Window.Timings
	if len(ts) != 1 || ts[0].Metric != "myapp_rpc_duration_seconds" || ts[0].Label != "rpc" || len(ts[0].Items) != 1 {
		t.Fatalf("timings %+v: want myapp_rpc_duration_seconds by rpc", ts)
	}
	if it := ts[0].Items[0]; it.Name != "Search" || it.Count < 1 || it.MeanMs < 49.999 || it.MeanMs > 50.001 {
		t.Errorf("item %+v: want Search, its calls in the window at 50 ms", it)
	}
}
