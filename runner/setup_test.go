package runner

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/control"
	"github.com/headroom-dev/headroom/health"
)

// Slow logins (each user's setup takes 0.6 s, users added over 0.5 s) do
// not land in the window: it begins once every user is set up, the
// window's figures hold no setup request, and setup is reported apart
// with one time to set up per user.
func TestWindowBeginsWhenEveryUserIsSetUp(t *testing.T) {
	t.Parallel()
	target := httpbinServer(t)
	sc := load(t, `
def setup(user):
    user.http.get("/delay/0.6", name="login")
def a(user):
    user.http.get("/get", name="get")
actions = [action("A", a)]
think_time = think.constant("100ms")
`)
	res := run(t, &Bounded{Common: Common{Scenario: sc, Target: target}, Users: 5, Ramp: 500 * time.Millisecond, Duration: time.Second})
	for _, r := range append(res.Requests, res.RampTotals, res.Totals, res.StoppingTotals) {
		if r.Name == "login" {
			t.Errorf("a setup request among the acting figures: %+v", r)
		}
	}
	if res.Totals.Count == 0 {
		t.Fatalf("nothing measured: %+v", res.Totals)
	}
	// The last user starts by 0.5 s (plus its spread) and takes 0.6 s to log in.
	if res.Window.Start < 1.1 || res.Window.Start > 2.5 {
		t.Errorf("window began at %.2f s; want once the last login ended (after 1.1 s)", res.Window.Start)
	}
	st := res.Setup
	if st == nil || st.Users != 5 || st.Started != 5 || st.TimeToSetUp.Count != 5 || st.TimeToSetUp.P50Ms < 590 {
		t.Fatalf("setup %+v", st)
	}
	if len(st.Requests) != 1 || st.Requests[0].Name != "login" || st.Requests[0].Count != 5 {
		t.Errorf("setup requests %+v", st.Requests)
	}
	for _, p := range res.Timeline {
		if p.T >= res.Window.Start+0.01 && p.T <= res.Window.End-0.01 && p.Ready != 5 {
			t.Errorf("at %.1f s, inside the window, %d users ready", p.T, p.Ready)
		}
	}
}

// A window that cannot wait for every user begins --setup-timeout after
// the ramp, and the result says so.
func TestWindowBeginsAfterTheSetupTimeoutWithANote(t *testing.T) {
	t.Parallel()
	target := httpbinServer(t)
	sc := load(t, `
def setup(user):
    if user.id == 2:
        user.http.get("/status/500", name="login")
def a(user):
    user.http.get("/get", name="get")
actions = [action("A", a)]
think_time = think.constant("100ms")
`)
	res := run(t, &Bounded{Common: Common{Scenario: sc, Target: target}, Users: 2, Duration: time.Second, SetupTimeout: 700 * time.Millisecond})
	if res.Window.Start < 0.65 || res.Totals.Count == 0 {
		t.Errorf("window began at %.2f s with %d requests; want at the 0.7 s setup timeout, with user 1's requests", res.Window.Start, res.Totals.Count)
	}
	if n := strings.Join(res.Notes, "\n"); !strings.Contains(n, "only 1 of 2 users had finished setup 700ms after the ramp (--setup-timeout)") {
		t.Errorf("notes: %s", n)
	}
}

// scripted is an Evaluator whose check fires from a load level on, and
// during the first measuring hold: what a server that looked healthy at
// the answer but not when held again does.
type scripted struct {
	mu          sync.Mutex
	users       int  // past setup, as the last progress said
	from        int  // fires at this many users and more
	holding     bool // in the first measuring hold
	holds       int
	firedInHold int
}

func (e *scripted) Query(_ context.Context, _ string, _ time.Time) (float64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.users >= e.from || (e.holding && e.holds == 1) {
		if e.holding {
			e.firedInHold++
		}
		return 2, nil
	}
	return 0, nil
}

func (e *scripted) progress(t Tick) {
	x := t.Ceiling
	if x == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.users = x.Applied
	switch {
	case strings.Contains(x.Decision, "to measure them"):
		e.holding = true
		e.holds++
	case strings.Contains(x.Decision, "the hold at"):
		e.holding = false
	}
}

// The measuring hold is judged: an unhealthy hold at the answer takes it
// back, the search goes on below, and the answer is the level whose own
// hold was healthy. Its figures are that level's only.
func TestCeilingHoldThatIsUnhealthyTakesTheAnswerBack(t *testing.T) {
	target := httpbinServer(t)
	ev := &scripted{from: 8}
	c := &Ceiling{
		Common: Common{Scenario: load(t, "def a(user):\n    user.http.get('/get', name='get')\nactions = [action('A', a)]\nthink_time = think.constant('200ms')\n"),
			Target: target, Timeout: 5 * time.Second, Grace: time.Second, Tick: 100 * time.Millisecond, OnTick: ev.progress},
		Evaluation: Evaluation{Checks: []health.Check{{Name: "scripted", Query: "scripted", Threshold: 1}}, Evaluator: ev, EvaluatorName: "scripted"},
		Controller: control.NewSearch(control.SearchConfig{Start: 4, Max: 20, Precision: 0.05, Settle: 300 * time.Millisecond,
			Judge: 500 * time.Millisecond, RampRate: 1000, Window: 100 * time.Millisecond}),
		MaxDuration: time.Minute,
		Settle:      300 * time.Millisecond, Measure: 500 * time.Millisecond,
	}
	res, err := c.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ci := res.Ceiling
	t.Logf("levels %s; decisions %+v", levelsOf(res), ci.Decisions)
	if ev.holds != 2 || ev.firedInHold == 0 {
		t.Fatalf("%d holds, %d firings in the first: want two holds, the first unhealthy", ev.holds, ev.firedInHold)
	}
	var rejected bool
	for _, l := range ci.Levels {
		if l.Hold && l.Users == 7 && l.Verdict == "unhealthy" {
			rejected = true
		}
	}
	// 7 was healthy, then unhealthy when held: the interval covers both
	// verdicts, up to the unhealthy 8, and says why.
	su := ci.SupportedUsers
	if !rejected || !su.Found || su.Value != 6 || su.Low != 6 || su.High != 8 || !strings.Contains(su.Why, "verdicts contradicted each other, 7 users healthy") {
		t.Errorf("supported %+v; want 6 in [6, 8) after the hold at 7 was unhealthy, and why", su)
	}
	if ci.Hold == nil || ci.Hold.Users != 6 || ci.Hold.Verdict != "healthy" {
		t.Errorf("final hold %+v", ci.Hold)
	}
	if !strings.HasPrefix(ci.StatsWindow, "requests made while 6 users were held") {
		t.Errorf("figures at the supported users: %s", ci.StatsWindow)
	}
}
