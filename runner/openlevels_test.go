package runner

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/control"
	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/health"
	"github.com/headroom-dev/headroom/internal/testing/memhttp"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/testbed"
)

// Issue 14 part 3: the step and ceiling runs in rate terms, on the
// testbed, whose capacity in requests per second its model gives:
// Workers / S (docs/TESTBED.md).

// TestOpenSearchFindsTheTestbedCapacity runs a real ceiling search of
// the open model (ceiling --open) with the open model's default checks
// and compares the supported arrival rate with the testbed's capacity.
// Below it each arrival is served in S; past it the queue grows by the
// excess every second, so the mean latency from the intended start
// crosses 100 ms within the settle time of any level a few percent over.
// In virtual time (the testbed in memory), as the closed model's search.
func TestOpenSearchFindsTheTestbedCapacity(t *testing.T) {
	t.Parallel()
	synctest.Test(t, openSearchTestbed)
}

func openSearchTestbed(t *testing.T) {
	srv, target, dial := testbedInMemory(t, testbed.Config{Workers: 8, Scale: 10})
	capacity := srv.Capacity(map[string]float64{"GetChannelPosts": 1})
	if capacity != 200 {
		t.Fatalf("the testbed's model changed: capacity %.1f req/s; update this test", capacity)
	}
	const window = 2 * time.Second
	checks := health.OpenDefaults(window, func(string) bool { return false })
	settle := window + 2*time.Second
	out := filepath.Join(t.TempDir(), "ceil")
	c := &Ceiling{
		Common:     Common{Scenario: load(t, postsScenario(time.Second)), Target: target, Seed: 1, Timeout: 5 * time.Second, Grace: time.Second, Out: out, Dial: dial},
		Evaluation: evaluation(t, CheckSource{Given: checks}),
		Controller: control.NewSearch(control.SearchConfig{Start: 120, Max: 5000, Precision: 0.04, Settle: settle, Judge: 3 * time.Second,
			RampRate: math.MaxInt32, Window: window, Unit: result.UnitRate, MaxFlag: "--max-rate"}),
		MaxDuration: 4 * time.Minute,
		Settle:      settle,
		Measure:     4 * time.Second,
		Open:        &OpenLevels{Arrivals: engine.Even, MaxUsers: 2000, PreUsers: 20},
	}
	res, err := c.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ci := res.Ceiling
	su := ci.SupportedUsers
	t.Logf("capacity %.1f/s; found %.0f/s in [%.0f, %.0f) after %.0f s; levels %v", capacity, su.Value, su.Low, su.High, ci.SearchSeconds, levelsOf(res))
	if !su.Found {
		t.Fatalf("ceiling not found: %s", su.Why)
	}
	if rel := math.Abs(su.Value-capacity) / capacity; rel > 0.05 {
		t.Errorf("found %.0f arrivals/s, the model's capacity is %.1f: %.1f%% off, want within 5%%", su.Value, capacity, 100*rel)
	}
	if ci.Unit != result.UnitRate || res.Config.Model != result.ModelOpen || res.Config.Rate == nil || res.Config.Rate.PerSecond != su.Value {
		t.Errorf("result: unit %q, model %q, rate %+v", ci.Unit, res.Config.Model, res.Config.Rate)
	}
	// The figures at the answer: its arrivals all started on time, the
	// rate achieved, latencies from the intended start beside the service
	// times, and no login among them.
	a := res.Arrivals
	if a == nil || res.ServiceTimes == nil {
		t.Fatalf("arrivals %v, service times %v at the answer", a, res.ServiceTimes)
	}
	if a.Dropped != 0 || math.Abs(a.StartedRPS-su.Value) > 0.03*su.Value || res.Totals.MeanMs > 100 {
		t.Errorf("at %.0f/s: arrivals %+v, totals %+v", su.Value, a, res.Totals)
	}
	for _, r := range res.Requests {
		if r.Name != "GetChannelPosts" {
			t.Errorf("figures at the answer include %d %q: setup leaked into a level", r.Count, r.Name)
		}
	}
	fired := false
	for _, l := range ci.Levels {
		fired = fired || (l.Verdict == "unhealthy" && float64(l.Users) > capacity)
		if l.Verdict == "unhealthy" && float64(l.Users) < 0.97*capacity {
			t.Errorf("level %d/s unhealthy, under the capacity %.0f/s: %+v", l.Users, capacity, l)
		}
	}
	if !fired {
		t.Errorf("no level over the capacity was judged unhealthy: %s", levelsOf(res))
	}
	back, err := result.Read(out)
	if err != nil || back.Ceiling.UnitName() != result.UnitRate || back.Ceiling.SupportedUsers.Value != su.Value {
		t.Errorf("result.json read back: %v", err)
	}
}

// TestStepRatesSaturateAtTheTestbedCapacity holds three rates, the last
// one past the testbed's capacity: under it every arrival starts on time
// and throughput is the rate; past it throughput stays at the capacity,
// the latency from the intended start climbs while the service time is
// the server's own, the pool runs out (drops counted) and the knee is at
// the level before. In virtual time (the testbed in memory).
func TestStepRatesSaturateAtTheTestbedCapacity(t *testing.T) {
	t.Parallel()
	synctest.Test(t, stepRatesTestbed)
}

func stepRatesTestbed(t *testing.T) {
	srv, target, dial := testbedInMemory(t, testbed.Config{Workers: 8, Scale: 10})
	capacity := srv.Capacity(map[string]float64{"GetChannelPosts": 1})
	out := filepath.Join(t.TempDir(), "step")
	st := &Step{
		Common: Common{Scenario: load(t, postsScenario(time.Second)), Target: target, Seed: 1, Timeout: 5 * time.Second, Grace: time.Second, Out: out, Dial: dial},
		Levels: []int{50, 150, 300}, Hold: 3 * time.Second, Settle: time.Second,
		Open: &OpenLevels{Arrivals: engine.Even, MaxUsers: 100, PreUsers: 100},
	}
	res, err := st.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sr := res.Step
	if res.Status != result.Completed || len(sr.Levels) != 3 || sr.Unit != result.UnitRate || res.Config.Model != result.ModelOpen {
		t.Fatalf("status %s, %d levels, unit %q, model %q", res.Status, len(sr.Levels), sr.Unit, res.Config.Model)
	}
	var lines []string
	for _, l := range sr.Levels {
		a := l.Arrivals
		if a == nil || l.ServiceTimes == nil {
			t.Fatalf("%d/s: no arrivals or service times", l.Users)
		}
		lines = append(lines, fmt.Sprintf("%d/s: %.1f req/s, dropped %.1f%%, mean %.0f ms (service %.0f ms)",
			l.Users, l.Totals.RPS, a.DroppedPct, l.Totals.MeanMs, l.ServiceTimes.Totals.MeanMs))
		if len(l.Requests) != 1 || l.Requests[0].Name != "GetChannelPosts" {
			t.Errorf("%d/s: figures include more than the held window: %+v", l.Users, l.Requests)
		}
	}
	t.Logf("%v; %s", lines, sr.Knee.Summary)
	for _, l := range sr.Levels[:2] {
		if rel := l.Totals.RPS/float64(l.Users) - 1; math.Abs(rel) > 0.05 || l.Arrivals.Dropped != 0 || l.Totals.MeanMs > 60 {
			t.Errorf("%d/s, under the capacity: %.1f req/s, %d dropped, mean %.1f ms; want the rate, none dropped, about S (40 ms)",
				l.Users, l.Totals.RPS, l.Arrivals.Dropped, l.Totals.MeanMs)
		}
	}
	over := sr.Levels[2]
	if rel := over.Totals.RPS/capacity - 1; math.Abs(rel) > 0.05 {
		t.Errorf("300/s, past the capacity: %.1f req/s, want the capacity %.0f within 5%%", over.Totals.RPS, capacity)
	}
	if over.Arrivals.DroppedPct < 20 || over.Totals.MeanMs < 200 {
		t.Errorf("300/s with a pool of 100 on a server of 200/s: dropped %.1f%%, mean %.0f ms; want a third dropped and the queue's wait", over.Arrivals.DroppedPct, over.Totals.MeanMs)
	}
	if k := sr.Knee; !k.Found || k.Users != 150 {
		t.Errorf("knee %+v, want at 150/s", k)
	}
}

// TestLowerRateWaitsForTheTargetToDrain: after a level the target could
// not keep up with, a lower rate starts only once the pool's users have
// nothing in flight (the target's backlog is done), so the lower level is
// not judged on the one before; meanwhile no arrival comes and the level
// is not reached (applied 0).
//
// In virtual time, the target in memory: synctest.Wait lets every request
// already handed out reach the target before the drain is watched (with
// a real socket one sent just before the lower rate could arrive after).
func TestLowerRateWaitsForTheTargetToDrain(t *testing.T) {
	synctest.Test(t, lowerRateWaits)
}

func lowerRateWaits(t *testing.T) {
	var held atomic.Bool
	held.Store(true)
	var served atomic.Int64
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	dial := memhttp.Dial(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if held.Load() {
			<-release
		}
	}))
	t.Cleanup(free) // before the server's Close
	c := &Common{Scenario: load(t, loginThenGet), Target: &url.URL{Scheme: "http", Host: "target.invalid"}, Timeout: 10 * time.Second, Grace: time.Second, Dial: dial}
	s, err := c.open(context.Background(), "step")
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	held.Store(false) // the pool's logins pass
	r, err := openRates(s, &OpenLevels{Arrivals: engine.Even, MaxUsers: 20, PreUsers: 20})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pool set up and 50/s running", func() bool { r.set(50); return r.applied() == 50 })
	held.Store(true) // the target stalls: the pool's users fill up with requests it holds
	waitFor(t, "requests held", func() bool { return busy(s.eng.Doing()) >= 5 })

	r.set(10)
	if r.applied() != 0 {
		t.Fatalf("a lower rate was applied (%d) while the target held %d requests", r.applied(), busy(s.eng.Doing()))
	}
	synctest.Wait() // what was handed out before has reached the target
	before := served.Load()
	time.Sleep(300 * time.Millisecond)
	r.set(10)
	if n := served.Load() - before; n != 0 || r.applied() != 0 {
		t.Errorf("while the target drained: %d new requests, applied %d; want none and 0", n, r.applied())
	}
	held.Store(false)
	free()
	waitFor(t, "10/s once the backlog is done", func() bool { r.set(10); return r.applied() == 10 })
	before = served.Load()
	waitFor(t, "arrivals again", func() bool { return served.Load() > before })
}

// waitFor polls cond every 10 ms for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not within 10 s: %s", what)
		}
	}
}
