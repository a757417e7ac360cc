package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/control"
	"github.com/headroom-dev/headroom/health"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/testbed"
)

// TestCeilingsRepeatOnAnExpensiveLogin: on a testbed whose sign-ups and
// logins each hold a worker 0.5 s longer (a password hashed slowly: with 4
// workers it sets up about 3 users a second, against a ramp of 50), with
// requests timing out at 10 s, ceiling searches of two seeds each find the
// steady model's 110 users (within 15% below), bound by the latency check
// and never by setup, their intervals overlapping; and they sign up no more
// accounts, and log in no more often, than the most users they ran at once. In virtual time (the
// testbed's service times are its model's), so the two searches see no
// noise: this holds the answer to the truth, not its spread on a noisy
// machine.
func TestCeilingsRepeatOnAnExpensiveLogin(t *testing.T) {
	var runs [2]*result.Result
	for i := range runs {
		t.Run(fmt.Sprintf("seed=%d", i+1), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runs[i] = expensiveCeiling(t, uint64(i+1)) })
		})
	}
	if runs[0] == nil || runs[1] == nil {
		return
	}
	a, b := runs[0].Ceiling.SupportedUsers, runs[1].Ceiling.SupportedUsers
	if !a.Found || !b.Found || a.Low >= b.High || b.Low >= a.High {
		t.Errorf("two searches: %g [%g, %g) and %g [%g, %g): want both found, their intervals overlapping", a.Value, a.Low, a.High, b.Value, b.Low, b.High)
	}
}

func expensiveCeiling(t *testing.T, seed uint64) *result.Result {
	const threshold = 0.1
	srv, target, dial := testbedInMemory(t, testbed.Config{Workers: 4, Scale: 10, LoginCost: 500 * time.Millisecond})
	truth := srv.Ceiling(map[string]float64{"GetChannelPosts": 1}, time.Second+time.Duration(threshold*float64(time.Second))-srv.ServiceTime("GetChannelPosts"))
	checks := []health.Check{{Name: "mean latency (s)", Query: meanLatency, Threshold: threshold}}
	settle := checks[0].Window() + 3*time.Second
	c := &Ceiling{
		Common: Common{Scenario: load(t, postsScenario(time.Second)), Target: target, Seed: seed, Timeout: 10 * time.Second, Grace: time.Second,
			Out: filepath.Join(t.TempDir(), "ceil"), Dial: dial},
		Evaluation: evaluation(t, CheckSource{Given: checks}),
		Controller: control.NewSearch(control.SearchConfig{Start: 16, Max: 2000, Precision: 0.05, Settle: settle, Judge: 5 * time.Second,
			RampRate: 50, SetupTimeout: time.Minute}),
		MaxDuration: 20 * time.Minute,
		Settle:      settle,
	}
	res, err := c.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	su := res.Ceiling.SupportedUsers
	t.Logf("model %.1f users (steady); found %.0f in [%.0f, %.0f) after %.0f s; levels %v", truth, su.Value, su.Low, su.High, res.Ceiling.SearchSeconds, levelsOf(res))
	if !su.Found || su.Value < 0.85*truth || su.Value > truth {
		t.Errorf("found %v %.0f users, the steady model says %.1f: want within 15%% below it", su.Found, su.Value, truth)
	}
	for _, l := range res.Ceiling.Levels {
		if l.SetupBound {
			t.Errorf("level %d setup-bound (%s): with the ramp following the setups, every level should be reached", l.Users, l.Why)
		}
	}
	if b := res.Ceiling.Bottleneck[0]; b.Fired == 0 || !b.First {
		t.Errorf("bottleneck %+v: the latency check should bound the answer", b)
	}
	peak := 0
	for _, l := range res.Ceiling.Levels {
		peak = max(peak, l.Users)
	}
	checkNoLoginsPastThePeak(t, res, peak)
	return res
}

// TestSetupOnlyMeasuresHowFastTheServerSetsUsersUp: 60 users added at
// once to a testbed whose sign-ups and logins each hold one of its 4
// workers 0.25 s (so it sets up at most 8 users a second: two expensive
// requests each; its other service times a tenth of the model's, next to
// nothing), with no action (SetupOnly): the run ends once they are
// all set up, and its setup rate is the server's, not the ramp's; no
// action ran, and the window is empty without the run being failed. Twice
// the login cost halves the rate. In virtual time.
func TestSetupOnlyMeasuresHowFastTheServerSetsUsersUp(t *testing.T) {
	rate := func(cost time.Duration) float64 {
		var perS float64
		synctest.Test(t, func(t *testing.T) {
			_, target, dial := testbedInMemory(t, testbed.Config{Workers: 4, Scale: 0.1, LoginCost: cost})
			res, err := (&Bounded{Common: Common{Scenario: load(t, postsScenario(time.Second)), Target: target, Seed: 1, Timeout: time.Minute,
				Grace: time.Second, Dial: dial, SetupOnly: true}, Users: 60, Duration: time.Hour, SetupTimeout: 5 * time.Minute}).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			st := res.Setup
			if res.Status != result.Completed || st == nil || st.Users != 60 || !res.Config.SetupOnly {
				t.Fatalf("status %s, setup %+v, notes %q: want completed, 60 users set up", res.Status, st, res.Notes)
			}
			if len(res.Actions) != 0 || res.Totals.Count != 0 || res.Window.Seconds > 1 {
				t.Errorf("actions %+v, totals %+v, window %+v: want no action, an empty window", res.Actions, res.Totals, res.Window)
			}
			perS = st.PerS
			t.Logf("login cost %v: 60 users set up at %.2f a second, time to set up p50 %.0f ms, attempts %d (%d failed: %v)", cost, perS, st.TimeToSetUp.P50Ms, st.Attempts.Count, st.Attempts.Errors+st.Attempts.Timeouts, st.Attempts.Messages)
		})
		return perS
	}
	one, two := rate(250*time.Millisecond), rate(500*time.Millisecond)
	if max := 4 / (2 * 0.25); one > max || one < 0.8*max {
		t.Errorf("at 0.25 s a sign-up or login on 4 workers: %.2f users a second, want within 20%% below %.0f", one, max)
	}
	if r := two / one; r < 0.45 || r > 0.55 {
		t.Errorf("twice the login cost: %.2f → %.2f users a second (×%.2f), want about half", one, two, r)
	}
}
