package runner

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/testbed"
)

// TestBoundedRunKeepsServerFigures scrapes a real testbed during a bounded
// run: the server's own count of GetChannelPosts in the measured window
// must match headroom's (the ramp's requests and the setup's left out),
// at the modelled service time. In virtual time (the testbed and its
// /metrics in memory): on the wall clock a busy machine stretched the
// server's mean past the model's (issue 33).
func TestBoundedRunKeepsServerFigures(t *testing.T) {
	t.Parallel()
	synctest.Test(t, boundedServerFigures)
}

func boundedServerFigures(t *testing.T) {
	srv, target, dial := testbedInMemory(t, testbed.Config{Workers: 8, Scale: 1})
	res := run(t, &Bounded{
		Common: Common{Scenario: load(t, postsScenario(50*time.Millisecond)), Target: target, Seed: 1, Dial: dial,
			Scrape: []string{target.String() + "/metrics"}},
		Users: 5, Ramp: 2 * time.Second, Duration: 5 * time.Second,
	})
	if res.Server == nil || len(res.Server.Targets) != 1 {
		t.Fatalf("server figures: %+v", res.Server)
	}
	tg := res.Server.Targets[0]
	if tg.Failed != 0 || tg.Scrapes < 6 || len(tg.Timeline) < 6 {
		t.Errorf("%d scrapes, %d failed, %d points: want one a second, none failed", tg.Scrapes, tg.Failed, len(tg.Timeline))
	}
	var api *result.Timing
	for _, g := range tg.Window.Timings {
		for i := range g.Items {
			if g.Metric == "mattermost_api_time" && g.Items[i].Name == "GetChannelPosts" {
				api = &g.Items[i]
			}
		}
	}
	if api == nil {
		t.Fatalf("no API time for GetChannelPosts in %+v", tg.Window.Timings)
	}
	client := request(t, res, "GetChannelPosts")
	// Both sides cut the window at a one-second tick, at slightly different
	// moments: allow a quarter of a second's worth of requests.
	if d := api.Count - float64(client.Count); d < -client.RPS/4 || d > client.RPS/4 {
		t.Errorf("server counted %v GetChannelPosts in the window, headroom %d", api.Count, client.Count)
	}
	model := float64(srv.ServiceTime("GetChannelPosts")) / 1e6
	if api.MeanMs < model || api.MeanMs > 1.5*model {
		t.Errorf("server mean %.2f ms; the model's service time is %.2f ms with no queue (8 workers, 5 users)", api.MeanMs, model)
	}
	if tg.Window.CPUCoresMean <= 0 || tg.Window.MemoryMBMax <= 0 || tg.Window.GoroutinesMax <= 0 {
		t.Errorf("window %+v: want CPU, heap and goroutines", tg.Window)
	}
}
