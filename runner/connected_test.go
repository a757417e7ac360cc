package runner

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/control"
	"github.com/headroom-dev/headroom/health"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/testbed"
)

// TestSearchFindsTheConnectedCeiling is TestSearchFindsTheTestbedCeiling with every user holding a
// WebSocket: posts fan out to all connections, and the testbed's documented model of what connections
// cost (ConnectedCeiling) predicts a ceiling 44% below the HTTP-only one (45.1 users against 80). The search must find the connected one, within 5%, and the result must carry the
// connections, the fan-out and its delivery latency. In virtual time: the testbed, its WebSockets
// among them, in memory (inMemory).
func TestSearchFindsTheConnectedCeiling(t *testing.T) {
	t.Parallel()
	synctest.Test(t, connectedCeiling)
}

func connectedCeiling(t *testing.T) {
	const threshold = 0.2 // where the queue, not S(N), crosses it (see testbed's TestConnectedCeiling)
	think := time.Second
	srv, target, dial := testbedInMemory(t, testbed.Config{Workers: 4, Scale: 10, Channels: 1})
	mix := map[string]float64{"CreatePost": 1}
	reach := func(route string, n float64) float64 {
		if route == "CreatePost" {
			return n // every user is in the one channel, and connected
		}
		return 0
	}
	truth := srv.ConnectedCeiling(mix, think, time.Duration(threshold*float64(time.Second)), reach)
	httpOnly := srv.Ceiling(mix, think+time.Duration(threshold*float64(time.Second))-srv.ServiceTime("CreatePost"))

	checks := []health.Check{{Name: "mean latency (s)", Threshold: threshold,
		Query: `sum(rate(loadtest_http_request_time_sum[5s])) / sum(rate(loadtest_http_request_time_count[5s]))`}}
	settle := checks[0].Window() + 3*time.Second
	out := filepath.Join(t.TempDir(), "ceil")
	c := &Ceiling{
		Common:      Common{Scenario: load(t, testbed.ConnectedScenario(think)), Target: target, Seed: 1, Timeout: 5 * time.Second, Grace: time.Second, Out: out, Dial: dial},
		Evaluation:  evaluation(t, CheckSource{Given: checks}),
		Controller:  control.NewSearch(control.SearchConfig{Start: 16, Max: 2000, Precision: 0.03, Settle: settle, Judge: 5 * time.Second, RampRate: 50}),
		MaxDuration: 6 * time.Minute,
		Settle:      settle,
		Measure:     10 * time.Second,
	}
	res, err := c.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	su := res.Ceiling.SupportedUsers
	t.Logf("model %.1f users (HTTP alone %.1f); found %.0f in [%.0f, %.0f) after %.0f s; levels %v",
		truth, httpOnly, su.Value, su.Low, su.High, res.Ceiling.SearchSeconds, levelsOf(res))
	if !su.Found {
		t.Fatalf("ceiling not found: %s", su.Why)
	}
	if rel := math.Abs(su.Value-truth) / truth; rel > 0.05 {
		t.Errorf("found %.0f users, the connected model says %.1f: %.1f%% off, want within 5%%", su.Value, truth, 100*rel)
	}
	if len(res.WebSockets) != 1 || len(res.Deliveries) != 1 {
		t.Fatalf("connected figures at the ceiling: websockets %+v, deliveries %+v", res.WebSockets, res.Deliveries)
	}
	ws, d := res.WebSockets[0], res.Deliveries[0]
	posts := 0.0
	for _, r := range res.Requests {
		if r.Name == "CreatePost" {
			posts = float64(r.Count)
		}
	}
	// Every post reaches about su.Value connections (a level's users; a few may be between levels).
	if fan := float64(d.Count) / posts; posts == 0 || fan < 0.8*su.Value || fan > 1.2*su.Value {
		t.Errorf("%v deliveries for %v posts: %.1f a post, want about %.0f", d.Count, posts, fan, su.Value)
	}
	if ws.Abnormal != 0 || ws.Dropped != 0 || d.P99Ms <= 0 {
		t.Errorf("websocket figures %+v, delivery %+v", ws, d)
	}
	var peak int64
	for _, p := range res.Timeline {
		peak = max(peak, p.Connections)
	}
	if peak < int64(su.Value) {
		t.Errorf("the timeline's connections peaked at %d, below the ceiling's %.0f users", peak, su.Value)
	}
	back, err := result.Read(out)
	if err != nil || len(back.WebSockets) != 1 || back.WebSockets[0].MessagesIn != ws.MessagesIn {
		t.Errorf("result.json read back: %v", err)
	}
}
