package compare

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/internal/testing/memhttp"
	"github.com/headroom-dev/headroom/runner"
	"github.com/headroom-dev/headroom/scenario"
)

// loginRun says how loginRuns runs: its users, their ramp, and whether
// they only set up (run --setup-only) against a server that logs in one
// user at a time, whose setup capacity is then one over the login time.
type loginRun struct {
	users     int
	ramp      time.Duration
	setupOnly bool
}

// loginRuns makes a bounded run for each login time, each against a
// server of its own, in memory, whose login takes that long and whose one
// other endpoint 2 ms; one after the other, in virtual time
// (testing/synctest), so the latencies are the servers' and nothing the
// machine runs besides.
func loginRuns(t *testing.T, o loginRun, logins ...time.Duration) []string {
	t.Helper()
	sc, err := scenario.Load(context.Background(), "login.star", []byte(`
def setup(user):
    user.http.post("/login", json={"user": user.id}, name="POST /login")

def act(user):
    user.http.get("/channels", name="GET /channels")

actions = [action("Act", act)]
think_time = think.constant("50ms")
`), scenario.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	dirs := make([]string, len(logins))
	for i := range logins {
		dirs[i] = filepath.Join(t.TempDir(), fmt.Sprintf("run-%d", i))
	}
	synctest.Test(t, func(t *testing.T) {
		for i, login := range logins {
			one := make(chan struct{}, 1) // the login's one place, with o.setupOnly
			dial := memhttp.Dial(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path != "/login":
					time.Sleep(2 * time.Millisecond)
				case o.setupOnly:
					one <- struct{}{}
					time.Sleep(login)
					<-one
				default:
					time.Sleep(login)
				}
			}))
			target, _ := url.Parse(fmt.Sprintf("http://login-%d.invalid", i))
			_, err := (&runner.Bounded{Common: runner.Common{Scenario: sc, Target: target, Seed: uint64(i + 1), Timeout: 10 * time.Second,
				Grace: time.Second, Out: dirs[i], Dial: dial, SetupOnly: o.setupOnly}, Users: o.users, Ramp: o.ramp, Duration: 2 * time.Second}).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
		}
	})
	return dirs
}

// TestSetupRegressionIsFound: the new build's login takes 30 ms where the
// base's took 10, and nothing else changed. Every window figure leaves
// setups out, so only the setup comparison can see it (the reference's
// v11.0 finding: its password hashing made logins slower): it must call
// the login a regression, and --fail-on setup must fail on it. A result
// without the setup histograms (of a headroom before them) is not
// compared, and the note says which.
func TestSetupRegressionIsFound(t *testing.T) {
	const was, is = 10 * time.Millisecond, 30 * time.Millisecond
	dirs := loginRuns(t, loginRun{users: 40, ramp: time.Second}, was, is, was, is, was, is) // three a side: with two, Welch's interval is ±12.7 SDs
	base, err := Load("base", []string{dirs[0], dirs[2], dirs[4]})
	if err != nil {
		t.Fatal(err)
	}
	newDirs := []string{dirs[1], dirs[3], dirs[5]}
	nw, err := Load("new", newDirs)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compare(base, nw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Setup == nil {
		t.Fatalf("no setup comparison; notes %q", c.Notes)
	}
	var login *Row
	for i := range c.Setup.Requests {
		if c.Setup.Requests[i].Name == "POST /login" {
			login = &c.Setup.Requests[i]
		}
	}
	if login == nil || login.BaseCount != 120 || login.NewCount != 120 || login.Mean.Verdict != Regression || login.Mean.Delta < 1 {
		t.Fatalf("login row %+v: want 120 logins a side, mean a regression of +200%%", login)
	}
	if m := c.Setup.MixMean; m.Verdict != Regression {
		t.Errorf("setup mix mean %+v: want a regression", m)
	}
	for _, r := range c.Window.Requests {
		if r.Name == "POST /login" {
			t.Errorf("a login in the window: %+v", r)
		}
		if r.Name == "GET /channels" && r.Mean.Delta > login.Mean.Delta/4 {
			t.Errorf("GET /channels moved %+.0f%%: nothing but the login changed", 100*r.Mean.Delta)
		}
	}
	gates, _ := ParseFailOn("setup:+50%")
	if b := strings.Join(c.Breaches(gates), "\n"); !strings.Contains(b, "setup: setup: mean latency, common mix") || !strings.Contains(b, "setup POST /login: mean +") || !strings.Contains(b, "setup (time to set up): mean +") {
		t.Errorf("--fail-on setup:+50%% breaches %q: want the setup mix's mean, the login's and the time to set up's", b)
	}
	t.Logf("login %.1f → %.1f ms (%s): %s", login.Mean.Base, login.Mean.New, login.Mean.DeltaText(), login.Mean.Verdict)

	// A new run written by a headroom before setup histograms were kept.
	h := filepath.Join(newDirs[1], "histograms.json")
	b, err := os.ReadFile(h)
	if err != nil {
		t.Fatal(err)
	}
	old := regexp.MustCompile(`(?s),\s*"setup": \{.*?\n  \}`).ReplaceAll(b, nil)
	if len(old) == len(b) {
		t.Fatal("no setup section in histograms.json")
	}
	if err := os.WriteFile(h, old, 0o644); err != nil {
		t.Fatal(err)
	}
	if nw, err = Load("new", newDirs); err != nil {
		t.Fatal(err)
	}
	if c, err = Compare(base, nw, Options{}); err != nil {
		t.Fatal(err)
	}
	if c.Setup != nil || !strings.Contains(strings.Join(c.Notes, "\n"), "setups not compared: no setup histograms in "+newDirs[1]) {
		t.Errorf("setup %v, notes %q: want no setup comparison, and a note naming the run", c.Setup, c.Notes)
	}
}

// TestSetupRateRegressionIsFound: --setup-only runs against servers that
// log one user in at a time, in 20 ms (base) or 40 ms (new): the users set
// up a second halve, and compare calls it a regression, beside the
// login's latency.
func TestSetupRateRegressionIsFound(t *testing.T) {
	const was, is = 20 * time.Millisecond, 40 * time.Millisecond
	dirs := loginRuns(t, loginRun{users: 30, setupOnly: true}, was, is, was, is, was, is)
	base, err := Load("base", []string{dirs[0], dirs[2], dirs[4]})
	if err != nil {
		t.Fatal(err)
	}
	nw, err := Load("new", []string{dirs[1], dirs[3], dirs[5]})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compare(base, nw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := c.SetupRate
	if m == nil || m.Verdict != Regression || m.Delta > -0.35 || m.Delta < -0.65 {
		t.Fatalf("setup rate %+v: want a regression of about -50%% (notes %q)", m, c.Notes)
	}
	if c.Setup == nil || c.Setup.MixMean.Verdict != Regression {
		t.Errorf("setup mix mean %+v: want a regression beside the rate", c.Setup)
	}
	t.Logf("users set up a second: %.1f → %.1f (%s): %s", m.Base, m.New, m.DeltaText(), m.Verdict)
}
