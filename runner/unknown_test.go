package runner

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/control"
	"github.com/headroom-dev/headroom/health"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/prom"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/testbed"
)

// busyMetrics is a target's metrics endpoint that answers while the load
// is light and, past busyAt users, times out (a busy server's scrape);
// refuse makes it refuse instead (a server that went away).
type busyMetrics struct {
	users  func() int
	busyAt int
	refuse bool
	cpu    atomic.Int64 // the counter's value, in ms, for a rate
}

func (b *busyMetrics) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.users() >= b.busyAt {
		if b.refuse {
			return nil, fmt.Errorf("dial tcp 127.0.0.1:9: connect: connection refused")
		}
		<-req.Context().Done() // past prom.ScrapeTimeout
		return nil, req.Context().Err()
	}
	page := fmt.Sprintf("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %g\n", float64(b.cpu.Add(100))/1000)
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/plain; version=0.0.4"}},
		Body: io.NopCloser(strings.NewReader(page)), Request: req}, nil
}

// A check on the target's metrics whose scrapes time out once the load is
// heavy (a busy server) is unknown, not fired: the search is not bounded
// by the scrapes' gaps, the levels judged on them say so (undecided,
// mostly unknowns), and the answer is the client-side check's. The same
// scrapes refused (a server that went away) still fire, fail closed.
func TestScrapeTimeoutsAreUnknownNotFired(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("refuse=%v", refuse), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { scrapeGaps(t, refuse) })
		})
	}
}

func scrapeGaps(t *testing.T, refuse bool) {
	const threshold, busyAt = 0.1, 60
	srv, target, dial := testbedInMemory(t, testbed.Config{Workers: 4, Scale: 10}) // ~110 users by the latency check
	truth := srv.Ceiling(map[string]float64{"GetChannelPosts": 1}, time.Second+time.Duration(threshold*float64(time.Second))-srv.ServiceTime("GetChannelPosts"))
	var users atomic.Int64 // the users past setup, as the search's progress says
	metrics := &busyMetrics{busyAt: busyAt, refuse: refuse, users: func() int { return int(users.Load()) }}
	checks := []health.Check{
		{Name: "mean latency (s)", Query: meanLatency, Threshold: threshold},
		{Name: "server CPU (cores)", Query: `rate(process_cpu_seconds_total[5s])`, Threshold: 50},
	}
	settle := checks[0].Window() + 3*time.Second
	c := &Ceiling{
		Common: Common{Scenario: load(t, postsScenario(time.Second)), Target: target, Seed: 1, Timeout: 5 * time.Second, Grace: time.Second,
			Out: filepath.Join(t.TempDir(), "ceil"), Dial: dial, OnTick: func(t Tick) {
				if t.Ceiling != nil {
					users.Store(int64(t.Ceiling.Applied))
				}
			}},
		Evaluation:  evaluation(t, CheckSource{Given: checks, Scrape: []string{"http://127.0.0.1:9/metrics"}, Client: &http.Client{Transport: metrics}}),
		Controller:  control.NewSearch(control.SearchConfig{Start: 16, Max: 2000, Precision: 0.05, Settle: settle, Judge: 5 * time.Second, RampRate: 50}),
		MaxDuration: 15 * time.Minute,
		Settle:      settle,
	}
	res, err := c.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	su := res.Ceiling.SupportedUsers
	t.Logf("model %.1f users; found %.0f in [%.0f, %.0f) (found %v); levels %v", truth, su.Value, su.Low, su.High, su.Found, levelsOf(res))
	var unknown, fired int
	for _, l := range res.Ceiling.Levels {
		if l.Users >= busyAt {
			unknown += l.Unknown
			fired += l.Fired["server CPU (cores)"]
		}
	}
	if refuse {
		if su.Value >= busyAt || fired == 0 {
			t.Errorf("refused scrapes: %.0f users, the server check fired %d times past %d users: want it to fail closed, bounding the answer below %d", su.Value, fired, busyAt, busyAt)
		}
		return
	}
	if su.Value < busyAt || math.Abs(su.Value-truth)/truth > 0.15 || fired > 0 || unknown == 0 {
		t.Errorf("timed-out scrapes: %.0f users (model %.1f), the server check fired %d times and was unknown in %d evaluations past %d users: want the latency check's answer, the server check unknown, never fired",
			su.Value, truth, fired, unknown, busyAt)
	}
	var said bool
	for _, l := range res.Ceiling.Levels {
		said = said || l.Undecided && strings.Contains(l.Why, "judged mostly on unknowns")
	}
	if !said {
		t.Errorf("no level past %d users says it was judged mostly on unknowns: %+v", busyAt, res.Ceiling.Levels)
	}
}

// noData answers every query with no value: NaN, or no series at all.
type noData struct{ empty bool }

func (n noData) Query(context.Context, string, time.Time) (float64, error) {
	if n.empty {
		return 0, fmt.Errorf("%w", prom.ErrNoData)
	}
	return math.NaN(), nil
}

// A check on headroom's own series with no value is no news before any
// request has ended, and while the first requests are younger than its
// window and a second (rate needs two samples in its window); after that,
// no value fires, fail closed. The demo's first level showed its checks
// FIRED at 6 s for a value of "?". A check on the target's metrics with no
// value fires once requests have ended, young or not (a scrape refused).
func TestNoDataWhileTheFirstRequestsAreYoung(t *testing.T) {
	for _, empty := range []bool{false, true} {
		checks := []health.Check{{Name: "mean latency (s)", Query: meanLatency, Threshold: 0.1},
			{Name: "app cpu (%)", Query: `sum(rate(process_cpu_seconds_total[5s])) * 100`, Threshold: 85}}
		window := checks[0].Window()
		if window != 5*time.Second {
			t.Fatalf("the check's window is %v, want the 5s the test is written for", window)
		}
		r := &ceilingRun{c: &Ceiling{Evaluation: Evaluation{Checks: checks, Evaluator: noData{empty}}}, ci: &result.Ceiling{}, trafficAt: -1}
		for _, step := range []struct {
			el       time.Duration
			requests int64
			fired    bool
		}{
			{0, 0, false},
			{3 * time.Second, 0, false},                      // users setting up: nothing ended
			{4 * time.Second, 7, false},                      // the first requests: the window holds one sample
			{4*time.Second + window + time.Second, 9, false}, // the window and a second after them: still young
			{5*time.Second + window + time.Second, 9, true},  // older: no value is news
			{6*time.Second + window + time.Second, 0, true},  // requests that stopped ending fire too
		} {
			res := r.evaluate(context.Background(), time.Now(), step.el, 10, metrics.Point{Requests: step.requests})
			if res[0].Fired != step.fired || !math.IsNaN(res[0].Value) {
				t.Errorf("empty=%v at %v with %d requests: fired %v (%s), want %v", empty, step.el, step.requests, res[0].Fired, res[0].Err, step.fired)
			}
			if !step.fired && !strings.HasPrefix(res[0].Err, "no data yet: ") {
				t.Errorf("empty=%v at %v: %q, want it said as no data yet", empty, step.el, res[0].Err)
			}
			if target := step.requests > 0 || step.fired; res[1].Fired != target {
				t.Errorf("empty=%v at %v with %d requests: the target's check fired %v (%s), want %v", empty, step.el, step.requests, res[1].Fired, res[1].Err, target)
			}
		}
		if n := len(r.ci.CheckTimeline); n != 6 {
			t.Errorf("%d evaluations in the check timeline, want 6", n)
		}
	}
}
