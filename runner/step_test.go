package runner

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/testbed"
)

// testbedTarget starts the testbed with a capacity model on loopback.
func testbedTarget(t *testing.T, cfg testbed.Config) (*testbed.Server, *url.URL) {
	t.Helper()
	srv := testbed.New(cfg)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	u, _ := url.Parse(ts.URL)
	return srv, u
}

// TestStepFindsTheTestbedKnee steps through five levels of users against
// a testbed whose capacity lies between two of them, and checks each
// level's throughput against the model and the knee against the level
// where the model saturates.
//
// The model (docs/TESTBED.md): 8 workers, GetChannelPosts takes S = 80 ms
// (4 ms × 20), users think Z = 160 ms, so the capacity is 8/S = 100 req/s,
// reached at N* = 8·(Z+S)/S = 24 users. Below it throughput is N/(Z+S):
// 5 → 21, 10 → 42, 20 → 83 req/s; above it 100 req/s, flat, while the
// response time grows as N·S/8 − Z (60 users: 440 ms against 80 ms).
// From 20 to 40 users throughput can grow 20% at most, far under the half
// of +100% the knee rule asks for, so the knee is at 20.
//
// In virtual time: the testbed and its /metrics in memory.
func TestStepFindsTheTestbedKnee(t *testing.T) {
	t.Parallel()
	synctest.Test(t, stepTestbedKnee)
}

func stepTestbedKnee(t *testing.T) {
	srv, target, dial := testbedInMemory(t, testbed.Config{Workers: 8, Scale: 20})
	const think = 160 * time.Millisecond
	mix := map[string]float64{"GetChannelPosts": 1}
	capacity := srv.Capacity(mix)
	S := srv.ServiceTime("GetChannelPosts")
	if capacity != 100 || S != 80*time.Millisecond {
		t.Fatalf("the testbed's model changed: capacity %.1f req/s, S %v; update this test", capacity, S)
	}
	out := filepath.Join(t.TempDir(), "step")
	const hold, settle = 3 * time.Second, 2 * time.Second
	st := &Step{
		Common: Common{Scenario: load(t, postsScenario(think)), Target: target, Seed: 1, Timeout: 5 * time.Second, Grace: time.Second, Out: out,
			Dial: dial, Scrape: []string{target.String() + "/metrics"}},
		Levels: []int{5, 10, 20, 40, 60}, Hold: hold, Settle: settle,
	}
	var lines []string
	st.OnTick = func(t Tick) {
		if x := t.Step; x != nil && x.Done != nil {
			lines = append(lines, fmt.Sprintf("%d users: %.1f req/s p95 %.1f ms", x.Done.Users, x.Done.Totals.RPS, x.Done.Totals.P95Ms))
		}
	}
	start := time.Now()
	res, err := st.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v in %v; %s", lines, time.Since(start).Round(time.Second), res.Step.Knee.Summary)
	if res.Status != result.Completed || len(res.Step.Levels) != 5 || len(lines) != 5 {
		t.Fatalf("status %s, %d levels, %d reported done", res.Status, len(res.Step.Levels), len(lines))
	}

	var count int64
	for i, l := range res.Step.Levels {
		// Under the capacity a busy generator can only lower throughput
		// (its think times end late, its latencies include its own
		// waits); at the capacity the testbed holds it.
		want, lo, hi := float64(l.Users)/(think+S).Seconds(), -0.20, 0.10
		if want > capacity {
			want, lo = capacity, -0.10
		}
		if rel := (l.Totals.RPS - want) / want; rel < lo || rel > hi {
			t.Errorf("%d users: %.1f req/s, model %.1f: %+.0f%%, want within %+.0f%%..%+.0f%%", l.Users, l.Totals.RPS, want, 100*rel, 100*lo, 100*hi)
		}
		if i > 0 && l.Users <= 24 {
			prev := res.Step.Levels[i-1]
			if gain, users := l.Totals.RPS/prev.Totals.RPS, float64(l.Users)/float64(prev.Users); gain < 0.8*users {
				t.Errorf("from %d to %d users throughput grew %.2fx, want near %.0fx below the capacity", prev.Users, l.Users, gain, users)
			}
		}
		if !l.Complete || l.Totals.Errors+l.Totals.Timeouts != 0 {
			t.Errorf("%d users: complete %v, %d errors %d timeouts", l.Users, l.Complete, l.Totals.Errors, l.Totals.Timeouts)
		}
		// Only the held window: no setup request, no settling.
		if len(l.Requests) != 1 || l.Requests[0].Name != "GetChannelPosts" || len(l.Actions) != 1 || l.Actions[0].Name != "Posts" {
			t.Errorf("%d users: figures include more than the held window: %d request names, %d actions", l.Users, len(l.Requests), len(l.Actions))
		}
		if l.Window.Seconds < hold.Seconds()-0.6 || l.Window.Seconds > hold.Seconds()+1.2 {
			t.Errorf("%d users: held %.2f s, want about %v", l.Users, l.Window.Seconds, hold)
		}
		if l.SettleS < l.StartS || l.Window.Start-l.SettleS < settle.Seconds()-0.6 || (i > 0 && l.StartS < res.Step.Levels[i-1].Window.End-0.01) {
			t.Errorf("%d users: started %.2f, set up %.2f, held from %.2f: settle not honoured", l.Users, l.StartS, l.SettleS, l.Window.Start)
		}
		// The server's side of the same window: its GetChannelPosts rate
		// is the client's. Each mark waits for the scrape of its own tick,
		// so the two windows differ by that scrape's latency, not a second.
		if srvRPS := serverRPS(l, "GetChannelPosts"); math.Abs(srvRPS-l.Totals.RPS) > 0.1*l.Totals.RPS {
			t.Errorf("%d users: the server saw %.1f req/s, the client %.1f", l.Users, srvRPS, l.Totals.RPS)
		}
		count += l.Totals.Count
	}
	lv := res.Step.Levels
	if r := lv[4].Totals.RPS / lv[3].Totals.RPS; r < 0.9 || r > 1.1 {
		t.Errorf("from 40 to 60 users throughput changed %.2fx: want it flat at the capacity", r)
	}
	// The model's mean response time: 80 ms at 20 users, 440 ms at 60.
	if lv[4].Totals.MeanMs < 3*lv[2].Totals.MeanMs {
		t.Errorf("mean at 60 users %.1f ms, at 20 users %.1f ms: the queue should have grown it past 3x", lv[4].Totals.MeanMs, lv[2].Totals.MeanMs)
	}
	k := res.Step.Knee
	if !k.Found || k.Users != 20 || k.Next != 40 {
		t.Errorf("knee: %s; want it at 20 users", k.Summary)
	}
	if !strings.HasPrefix(k.Summary, "knee at 20 users: from 20 to 40 users (+100%) throughput ") || !strings.Contains(k.Summary, " rose ") {
		t.Errorf("knee in words: %s", k.Summary)
	}

	// The top level merges the held windows; setup went to ramp_totals.
	if res.Totals.Count != count || res.RampTotals.Count == 0 {
		t.Errorf("totals %d requests, levels %d; excluded %d", res.Totals.Count, count, res.RampTotals.Count)
	}
	back, err := result.Read(out)
	if err != nil || back.Kind != "step" || back.Step == nil || back.Step.Knee.Users != k.Users || len(back.Step.Levels) != 5 {
		t.Fatalf("result.json read back: %v", err)
	}
	hist, err := result.ReadLevelHistograms(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range back.Step.Levels {
		h := hist[l.Users]
		if h == nil || h.Requests["GetChannelPosts"] == nil || h.Requests["GetChannelPosts"].Count != l.Totals.Count {
			t.Errorf("%d users: histograms.json does not hold the level's %d requests", l.Users, l.Totals.Count)
		} else if p95 := float64(h.Requests["GetChannelPosts"].Hist().ValueAtPercentile(95)) / 1000; p95 != l.Requests[0].P95Ms {
			t.Errorf("%d users: p95 from histograms.json %.3f != result.json %.3f", l.Users, p95, l.Requests[0].P95Ms)
		}
	}
}

func TestStepRefusesBadLevelsBeforeTraffic(t *testing.T) {
	t.Parallel()
	sc := load(t, "def a(user):\n    pass\nactions = [action('A', a)]\n")
	closed, _ := url.Parse("http://127.0.0.1:1") // a level error must come before the target is tried
	cases := []struct {
		name   string
		levels []int
		hold   time.Duration
		settle time.Duration
		rate   float64
		want   string
	}{
		{"none", nil, time.Second, 0, 0, "no levels: give the user counts"},
		{"zero users", []int{0, 10}, time.Second, 0, 0, "level 1 is 0 users: each level must be at least 1 user"},
		{"negative", []int{10, -20}, time.Second, 0, 0, "level 2 is -20 users"},
		{"decreasing", []int{48, 96, 64}, time.Second, 0, 0, "levels must increase: 64 comes after 96"},
		{"repeated", []int{48, 48}, time.Second, 0, 0, "levels must increase: 48 comes after 48"},
		{"no hold", []int{10}, 0, 0, 0, "hold must be positive"},
		{"negative settle", []int{10}, time.Second, -time.Second, 0, "settle must be 0 or more"},
		{"negative ramp rate", []int{10}, time.Second, 0, -5, "ramp rate must be 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			_, err := (&Step{Common: Common{Scenario: sc, Target: closed, Out: out}, Levels: c.levels, Hold: c.hold, Settle: c.settle, RampRate: c.rate}).Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
			if _, statErr := os.Stat(out); !os.IsNotExist(statErr) {
				t.Errorf("a result directory was written for a run that never started")
			}
		})
	}
}

// Ctrl-C in the middle of the second level: the first is kept whole, the
// second as far as it was held, both in result.json and histograms.json;
// the checkpoint before it already had the first level.
//
// In virtual time: the testbed in memory (on a busy machine a real one's
// levels were cut at other moments than meant).
func TestStepInterruptKeepsTheLevelsHeld(t *testing.T) {
	t.Parallel()
	synctest.Test(t, stepInterrupted)
}

func stepInterrupted(t *testing.T) {
	_, target, dial := testbedInMemory(t, testbed.Config{})
	out := filepath.Join(t.TempDir(), "step")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := &Step{
		Common: Common{Scenario: load(t, postsScenario(50*time.Millisecond)), Target: target, Timeout: 5 * time.Second, Grace: time.Second, Out: out, Save: 500 * time.Millisecond, Dial: dial},
		Levels: []int{2, 4, 8}, Hold: 3 * time.Second,
	}
	var checkpoint *result.Result
	var checkpointErr error
	st.OnTick = func(t Tick) {
		// one tick into the second level's hold
		if x := t.Step; x != nil && x.Level == 1 && x.Phase == PhaseHolding && x.Left < st.Hold-st.Tick/2 && checkpoint == nil {
			checkpoint, checkpointErr = result.Read(out)
			cancel()
		}
	}
	start := time.Now()
	res, err := st.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("the run took %v: the interrupt did not stop it", el)
	}
	if checkpointErr != nil || checkpoint == nil {
		t.Fatalf("no checkpoint during the run: %v", checkpointErr)
	}
	if checkpoint.Status != result.Running || len(checkpoint.Step.Levels) == 0 || !checkpoint.Step.Levels[0].Complete || checkpoint.Step.Levels[0].Totals.Count == 0 {
		t.Errorf("the checkpoint lacks the first level: status %s, levels %+v", checkpoint.Status, checkpoint.Step.Levels)
	}

	back, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if back.Status != result.Interrupted || res.Status != result.Interrupted {
		t.Errorf("status %q, want interrupted", back.Status)
	}
	lv := back.Step.Levels
	if len(lv) != 2 || lv[0].Users != 2 || !lv[0].Complete || lv[1].Users != 4 || lv[1].Complete {
		t.Fatalf("levels %+v: want 2 users complete, 4 users cut short", lv)
	}
	// Cut short: less than the hold, however late the interrupt came
	// (a later one would have let the level complete, failing above).
	if lv[1].Totals.Count == 0 || lv[1].Window.Seconds < 0.5 || lv[1].Window.Seconds >= st.Hold.Seconds() {
		t.Errorf("the level cut short: %d requests over %.1f s", lv[1].Totals.Count, lv[1].Window.Seconds)
	}
	if back.Step.Knee.Found || !strings.Contains(back.Step.Knee.Summary, "got 1") {
		t.Errorf("knee from one complete level: %s", back.Step.Knee.Summary)
	}
	if back.Totals.Count != lv[0].Totals.Count+lv[1].Totals.Count {
		t.Errorf("top-level totals %d, levels %d + %d", back.Totals.Count, lv[0].Totals.Count, lv[1].Totals.Count)
	}
	noted := false
	for _, n := range back.Notes {
		noted = noted || strings.Contains(n, "interrupted: 1 of 3 levels held completely")
	}
	if !noted {
		t.Errorf("notes %v", back.Notes)
	}
	hist, err := result.ReadLevelHistograms(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lv {
		if h := hist[l.Users]; h == nil || h.Requests["GetChannelPosts"].Count != l.Totals.Count {
			t.Errorf("%d users: histograms.json does not hold the level's %d requests", l.Users, l.Totals.Count)
		}
	}
}

// Users whose setup keeps failing never make a level: the run stops after
// the setup timeout and says why, instead of waiting for ever; having held
// no level, it measured nothing: status failed.
func TestStepStopsWhenSetupKeepsFailing(t *testing.T) {
	t.Parallel()
	_, target := testbedTarget(t, testbed.Config{})
	sc := load(t, `
def setup(user):
    r = user.http.post("/api/v4/users/login", json={"login_id": "nobody", "password": "x"}, name="login")
    if r.status != 200:
        fail("login: status %d" % r.status)
def a(user):
    user.http.get("/healthz")
actions = [action("A", a)]
think_time = think.constant("200ms")
`)
	res, err := (&Step{Common: Common{Scenario: sc, Target: target, Grace: time.Second},
		Levels: []int{3, 6}, Hold: time.Second, SetupTimeout: 2 * time.Second}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Step.Levels) != 0 || !strings.Contains(res.Step.Stopped, "at 3 users only 0 had finished setup") {
		t.Errorf("levels %d, stopped %q", len(res.Step.Levels), res.Step.Stopped)
	}
	if res.Status != result.Failed || !strings.Contains(strings.Join(res.Notes, "\n"), "the run measured nothing: no user finished setup: all ") {
		t.Errorf("status %q, want %q: no user finished setup; notes %v", res.Status, result.Failed, res.Notes)
	}
	if res.Setup == nil || res.Setup.Totals.Errors == 0 || res.Setup.Users != 0 || res.RampTotals.Count != 0 {
		t.Errorf("the failed logins belong in the setup section and only there: setup %+v, ramp_totals %+v", res.Setup, res.RampTotals)
	}
}

// serverRPS is the rate the scraped server reported for one handler over
// a level's held window; 0 if it reported none.
func serverRPS(l result.StepLevel, handler string) float64 {
	for _, w := range l.Server {
		for _, g := range w.Timings {
			for _, it := range g.Items {
				if g.Label == "handler" && it.Name == handler {
					return it.RPS
				}
			}
		}
	}
	return 0
}
