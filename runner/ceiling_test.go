package runner

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/control"
	"github.com/headroom-dev/headroom/health"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/testbed"
)

// postsScenario is the testbed's one-route scenario: its model gives the
// ceiling exactly.
var postsScenario = testbed.PostsScenario

const meanLatency = `sum(rate(loadtest_http_request_time_sum{name="GetChannelPosts"}[5s])) / sum(rate(loadtest_http_request_time_count{name="GetChannelPosts"}[5s]))`

// TestSearchFindsTheTestbedCeiling runs ceiling searches against the
// testbed on three capacity settings, in virtual time (the testbed's
// handler called in memory: inMemory), and compares each answer with the
// ceiling its documented model predicts: a mean-latency check with
// threshold T fires at Workers * (Z + T) / S users. The search reports
// the highest healthy level, up to its precision (3% here) below the
// crossing: within 5% of the model. In virtual time no timer is late, so
// the testbed's service time is exactly its model's; wall-clock searches
// of the same settings took 1 to 5 minutes each.
func TestSearchFindsTheTestbedCeiling(t *testing.T) {
	for _, st := range []struct {
		workers int
		scale   float64
		think   time.Duration
	}{
		{2, 20, time.Second}, // S = 80 ms: 2 * 1.1 / 0.08 = 27.5 users
		{4, 10, time.Second}, // S = 40 ms: 110 users
		{8, 10, time.Second}, // 220 users
	} {
		t.Run(fmt.Sprintf("workers=%d,scale=%g,think=%v", st.workers, st.scale, st.think), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) { searchTestbed(t, st.workers, st.scale, st.think) })
		})
	}
}

func searchTestbed(t *testing.T, workers int, scale float64, think time.Duration) {
	const threshold = 0.1
	srv, target, dial := testbedInMemory(t, testbed.Config{Workers: workers, Scale: scale})
	s := srv.ServiceTime("GetChannelPosts")
	truth := srv.Ceiling(map[string]float64{"GetChannelPosts": 1}, think+time.Duration(threshold*float64(time.Second))-s)

	checks := []health.Check{{Name: "mean latency (s)", Query: meanLatency, Threshold: threshold}}
	settle := checks[0].Window() + 3*time.Second
	out := filepath.Join(t.TempDir(), "ceil")
	c := &Ceiling{
		Common: Common{Scenario: load(t, postsScenario(think)), Target: target, Seed: 1, Timeout: 5 * time.Second, Grace: time.Second, Out: out,
			Dial: dial},
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
	t.Logf("model %.1f users; found %.0f in [%.0f, %.0f) after %.0f s; levels %v", truth, su.Value, su.Low, su.High, res.Ceiling.SearchSeconds, levelsOf(res))
	if !su.Found {
		t.Fatalf("ceiling not found: %s", su.Why)
	}
	if rel := math.Abs(su.Value-truth) / truth; rel > 0.05 {
		t.Errorf("found %.0f users, model says %.1f: %.1f%% off, want within 5%%", su.Value, truth, 100*rel)
	}
	if !res.Ceiling.Trustworthy {
		t.Errorf("not trustworthy (%s): in virtual time the generator is never late", res.Ceiling.Untrusted)
	}
	if b := res.Ceiling.Bottleneck[0]; b.Fired == 0 || !b.First {
		t.Errorf("bottleneck %+v: the latency check should have fired, first", b)
	}
	// about su.Value/1.1 requests a second, over the judging and 10 s of measuring
	if float64(res.Totals.Count) < 5*su.Value || res.Totals.MeanMs > 1000*threshold*1.2 {
		t.Errorf("figures at the ceiling (%s): %+v", res.Ceiling.StatsWindow, res.Totals)
	}
	// Stepping up and down, users are removed and added again: they sign
	// up no more accounts, and log in no more often, than the most users
	// that ran at once.
	peak := 0
	for _, d := range res.Ceiling.Decisions {
		peak = max(peak, d.Target)
	}
	for _, l := range res.Ceiling.Levels {
		peak = max(peak, l.Users)
	}
	checkNoLoginsPastThePeak(t, res, peak)
	for _, r := range res.Requests {
		if r.Name != "GetChannelPosts" {
			t.Errorf("figures at the ceiling include %d %q: a ramp (logins) leaked into the held level", r.Count, r.Name)
		}
	}
	back, err := result.Read(out)
	if err != nil || back.Ceiling == nil || back.Ceiling.SupportedUsers.Value != su.Value || len(back.Ceiling.Decisions) < 3 || len(back.Ceiling.CheckTimeline) == 0 {
		t.Errorf("result.json read back: %v", err)
	}
}

func levelsOf(r *result.Result) string {
	var parts []string
	for _, l := range r.Ceiling.Levels {
		parts = append(parts, fmt.Sprintf("%d%s", l.Users, map[string]string{"healthy": "+", "unhealthy": "-"}[l.Verdict]))
	}
	return strings.Join(parts, " ")
}

// checkNoLoginsPastThePeak: a search's sign-ups and logins (the testbed's
// PostsScenario) were no more than peak, the most users it ran at once,
// however often it stepped down and up (user.account, user.session);
// when it did step down and up, some setups kept their session.
func checkNoLoginsPastThePeak(t *testing.T, res *result.Result, peak int) {
	t.Helper()
	var signups, logins int64
	for _, r := range res.Setup.Requests {
		switch r.Name {
		case "POST /api/v4/users":
			signups = r.Status["201"]
		case "POST /api/v4/users/login":
			logins = r.Count
		}
	}
	if signups == 0 || signups > int64(peak) || logins > int64(peak) {
		t.Errorf("%d accounts signed up and %d logins for at most %d users at once (levels %v)", signups, logins, peak, levelsOf(res))
	}
	if res.Setup.Users > int64(peak) && res.Setup.SessionsKept == 0 {
		t.Errorf("%d users set up, at most %d at once, and no session kept", res.Setup.Users, peak)
	}
}
