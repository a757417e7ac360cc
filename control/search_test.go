package control

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// simulate runs a controller against a system that is healthy below
// ceiling users; blip is the chance that a healthy evaluation still fires.
// It returns the estimate and how long the search took.
func simulate(t *testing.T, c Controller, ceiling int, blip float64, limit time.Duration) (Estimate, time.Duration) {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 7))
	users := 0
	for el := time.Duration(0); el < limit; el += time.Second {
		o := Observation{Elapsed: el, Users: users}
		if users >= ceiling || r.Float64() < blip {
			o.Fired = []string{"p99"}
		}
		d := c.Decide(o)
		if d.Users < 0 {
			t.Fatalf("negative users %d", d.Users)
		}
		users = d.Users // the engine reaches the target within the second
		if d.Done {
			return c.Estimate(), el
		}
	}
	return c.Estimate(), limit
}

func TestSearchFindsTheCeilingWithinPrecision(t *testing.T) {
	for _, truth := range []int{7, 95, 218, 1000, 4321} {
		for _, blip := range []float64{0, 0.1} {
			// The simulated evaluations are independent: one a second.
			s := NewSearch(SearchConfig{Max: 20000, Settle: 10 * time.Second, Judge: 10 * time.Second, Window: time.Second})
			est, took := simulate(t, s, truth, blip, 4*time.Hour)
			if !est.Found {
				t.Errorf("truth %d blip %.1f: not found: %s", truth, blip, est.Why)
				continue
			}
			if est.Low >= float64(truth) || est.High < float64(truth) {
				t.Errorf("truth %d blip %.1f: interval [%v, %v) misses it", truth, blip, est.Low, est.High)
			}
			if (est.High-est.Low)/est.Low > 0.05 && est.High-est.Low > 1 {
				t.Errorf("truth %d: interval [%v, %v) wider than 5%%", truth, est.Low, est.High)
			}
			// truth is the first unhealthy count: truth-1 users is exact
			if err := (float64(truth-1) - est.Value) / float64(truth); err > 0.05 {
				t.Errorf("truth %d: value %v is %.1f%% under", truth, est.Value, 100*err)
			}
			t.Logf("truth %5d blip %.1f: %v in [%v, %v) after %v, %d levels", truth, blip, est.Value, est.Low, est.High, took, len(s.Levels()))
		}
	}
}

func TestSearchReportsNoCeilingBelowMax(t *testing.T) {
	s := NewSearch(SearchConfig{Max: 300, Settle: time.Second, Judge: 5 * time.Second})
	est, _ := simulate(t, s, 1_000_000, 0, time.Hour)
	if est.Found || est.Low != 300 || !strings.Contains(est.Why, "never unhealthy up to --max-users 300") {
		t.Errorf("estimate %+v", est)
	}
}

func TestSearchReportsUnhealthyFromTheStart(t *testing.T) {
	s := NewSearch(SearchConfig{Max: 300, Settle: time.Second, Judge: 5 * time.Second})
	est, _ := simulate(t, s, 0, 0, time.Hour)
	if est.Found || est.Low != 0 || !strings.Contains(est.Why, "unhealthy from the start") {
		t.Errorf("estimate %+v", est)
	}
	levels := s.Levels()
	if levels[len(levels)-1].Users != 1 {
		t.Errorf("last level tried %d users, want down to 1", levels[len(levels)-1].Users)
	}
}

func TestSearchIgnoresASingleBlip(t *testing.T) {
	s := NewSearch(SearchConfig{Start: 100, Max: 1000, Settle: 2 * time.Second, Judge: 10 * time.Second})
	users := 0
	var levels []Level
	for el := time.Duration(0); el < 40*time.Second; el += time.Second {
		o := Observation{Elapsed: el, Users: users}
		if el == 5*time.Second { // one evaluation fires while judging 100 users
			o.Fired = []string{"p99"}
		}
		users = s.Decide(o).Users
		levels = s.Levels()
	}
	if len(levels) == 0 || levels[0].Verdict != "healthy" || levels[0].Unhealthy != 1 {
		t.Fatalf("levels %+v: one blip must not fail a level", levels)
	}
}

func TestSearchRampsUpAndSettlesBeforeJudging(t *testing.T) {
	s := NewSearch(SearchConfig{Start: 200, Max: 1000, RampRate: 50, Settle: 5 * time.Second, Judge: 5 * time.Second})
	var got []int
	users := 0
	for el := time.Duration(0); el < 8*time.Second; el += time.Second {
		d := s.Decide(Observation{Elapsed: el, Users: users, Fired: []string{"x"}}) // unhealthy throughout
		users = d.Users
		got = append(got, d.Users)
	}
	want := []int{50, 100, 150, 200, 200, 200, 200, 200}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("targets %v, want %v (50 users/s up to 200, then held while settling)", got, want)
		}
	}
	if len(s.Levels()) != 0 {
		t.Errorf("a level was judged during its settle period")
	}
}

func TestSearchGoesDownAtOnce(t *testing.T) {
	s := NewSearch(SearchConfig{Start: 100, Max: 1000, Settle: time.Second, Judge: 3 * time.Second, FailFast: 100})
	users := 0
	var targets []int
	for el := time.Duration(0); el < 12*time.Second; el += time.Second {
		d := s.Decide(Observation{Elapsed: el, Users: users, Fired: []string{"x"}})
		users = d.Users
		targets = append(targets, d.Users)
	}
	// 100 judged unhealthy, then straight to 50 (no ramp down)
	found := false
	for i := 1; i < len(targets); i++ {
		if targets[i-1] == 100 && targets[i] == 50 {
			found = true
		}
	}
	if !found {
		t.Errorf("targets %v: want a drop from 100 to 50 in one step", targets)
	}
}

// kneePressure is a queueing system's mean latency over its threshold:
// flat at 0.4 up to the knee at 90% of the ceiling, then rising linearly
// to 1 at the ceiling.
func kneePressure(ceiling int) func(int) float64 {
	knee := 0.9 * float64(ceiling)
	return func(users int) float64 {
		u := float64(users)
		if u <= knee {
			return 0.4
		}
		return 0.4 + 0.6*(u-knee)/(float64(ceiling)-knee)
	}
}

func TestPressureMakesTheSearchShorter(t *testing.T) {
	with, without := 0, 0
	for _, truth := range []int{95, 380, 1000, 4321} {
		press := kneePressure(truth)
		plain := NewSearch(SearchConfig{Max: 20000, Settle: 10 * time.Second, Judge: 10 * time.Second})
		_, plainTook := simulate(t, plain, truth, 0, 4*time.Hour)

		s := NewSearch(SearchConfig{Max: 20000, Settle: 10 * time.Second, Judge: 10 * time.Second})
		users := 0
		var est Estimate
		var took time.Duration
		for el := time.Duration(0); el < 4*time.Hour; el += time.Second {
			o := Observation{Elapsed: el, Users: users, Pressure: press(users)}
			if users >= truth {
				o.Fired = []string{"mean"}
			}
			d := s.Decide(o)
			users = d.Users
			if d.Done {
				est, took = s.Estimate(), el
				break
			}
		}
		if !est.Found || est.Low >= float64(truth) || est.High < float64(truth) || (est.High-est.Low)/est.Low > 0.05 {
			t.Errorf("truth %d: %+v", truth, est)
		}
		if len(s.Levels()) > len(plain.Levels()) {
			t.Errorf("truth %d: %d levels with pressure, %d without: slower", truth, len(s.Levels()), len(plain.Levels()))
		}
		with, without = with+len(s.Levels()), without+len(plain.Levels())
		t.Logf("truth %5d: %v in [%v, %v) after %v and %d levels; without pressure %v and %d levels",
			truth, est.Value, est.Low, est.High, took, len(s.Levels()), plainTook, len(plain.Levels()))
	}
	if with >= without {
		t.Errorf("%d levels in all with pressure, %d without", with, without)
	}
}

func TestSearchStopsARampThatHurts(t *testing.T) {
	// Healthy up to 300 users; the search grows from 200 to 400 at 10
	// users a second and must stop near 300 instead of climbing to 400.
	s := NewSearch(SearchConfig{Start: 200, Max: 5000, RampRate: 10, Settle: 5 * time.Second, Judge: 5 * time.Second})
	users, peak := 0, 0
	var reasons []string
	for el := time.Duration(0); el < 10*time.Minute; el += time.Second {
		o := Observation{Elapsed: el, Users: users}
		if users > 300 {
			o.Fired = []string{"mean"}
		}
		d := s.Decide(o)
		users = d.Users
		if d.Reason != "" {
			reasons = append(reasons, d.Reason)
		}
		if len(s.Levels()) > 0 && s.Levels()[0].Verdict == "healthy" && s.lo == 200 {
			peak = max(peak, users)
		}
		if d.Done {
			break
		}
	}
	if peak >= 400 || peak < 300 {
		t.Errorf("climbed to %d users on the way to 400; want a stop a little above 300 (reasons %q)", peak, reasons)
	}
	est := s.Estimate()
	if !est.Found || est.Low >= 301 || est.High < 301 {
		t.Errorf("estimate %+v", est)
	}
	found := false
	for _, r := range reasons {
		found = found || strings.Contains(r, "on the way to 400 users: hold at")
	}
	if !found {
		t.Errorf("no decision says the ramp was stopped: %q", reasons)
	}
}

// A level whose evaluations are mixed is judged on until its majority is
// decided; one that stays a coin toss is undecided, and the interval is
// widened past it instead of claiming a precision the noise does not give.
func TestSearchJudgesNoisyLevelsLongerAndWidensTheInterval(t *testing.T) {
	// Healthy below 100; at 100..119 a check fires on every other
	// evaluation (the noisy zone); unhealthy from 120.
	s := NewSearch(SearchConfig{Start: 50, Max: 1000, Settle: 2 * time.Second, Judge: 10 * time.Second, Window: 5 * time.Second})
	users := 0
	var el time.Duration
	for ; el < 2*time.Hour; el += time.Second {
		o := Observation{Elapsed: el, Users: users}
		if users >= 120 || (users >= 100 && (el/time.Second)%2 == 0) {
			o.Fired = []string{"p99"}
		}
		d := s.Decide(o)
		users = d.Users
		if d.Done {
			break
		}
	}
	est := s.Estimate()
	var noisy []Level
	for _, l := range s.Levels() {
		if l.Users >= 100 && l.Users < 120 {
			noisy = append(noisy, l)
			if !l.Undecided || !strings.Contains(l.Why, "not decided at 90.0% confidence after 40s") {
				t.Errorf("level %d (a coin toss): undecided %v, why %q", l.Users, l.Undecided, l.Why)
			}
			if d := l.End - l.JudgeStart; d < 39 {
				t.Errorf("level %d judged %.0f s, want the 40 s cap", l.Users, d)
			}
		} else if l.Undecided {
			t.Errorf("level %d (clear) was undecided", l.Users)
		}
	}
	if len(noisy) == 0 {
		t.Fatalf("no level tried in the noisy zone: %+v", s.Levels())
	}
	if est.Low >= 100 || (est.High != 0 && est.High < 120) {
		t.Errorf("interval [%v, %v) claims to know where in the noisy zone 100..119 the ceiling is", est.Low, est.High)
	}
	t.Logf("estimate %+v", est)
	if est.Low < 90 {
		t.Errorf("low end %v: the search should probe one precision step below the undecided level for a decided bound near it", est.Low)
	}
	if !strings.Contains(est.Why, "noisy near the ceiling") || strings.Contains(est.Why, "contradicted") {
		t.Errorf("the estimate does not say why its interval is wide: %+v", est)
	}
}

// TestSearchProbesPastUndecidedLevels: a probe for a decided bound that is
// itself undecided is not tried again; the next probe goes a step further.
func TestSearchProbesPastUndecidedLevels(t *testing.T) {
	// Healthy below 80; a coin toss from 80 to 119; unhealthy from 120.
	s := NewSearch(SearchConfig{Start: 50, Max: 1000, Settle: 2 * time.Second, Judge: 10 * time.Second, Window: 5 * time.Second})
	users := 0
	for el := time.Duration(0); el < 2*time.Hour; el += time.Second {
		o := Observation{Elapsed: el, Users: users}
		if users >= 120 || (users >= 80 && (el/time.Second)%2 == 0) {
			o.Fired = []string{"p99"}
		}
		d := s.Decide(o)
		users = d.Users
		if d.Done {
			break
		}
	}
	probed := map[int]int{}
	for _, l := range s.Levels() {
		if !l.Hold && l.Users >= 80 && l.Users < 120 {
			probed[l.Users]++
		}
	}
	for users, n := range probed {
		if n > 1 {
			t.Errorf("level %d (undecided) judged %d times outside holds: a probe tried it again (levels %+v)", users, n, s.Levels())
		}
	}
}

// A clear level is not held past Judge: a unanimous verdict needs no more.
func TestSearchDecidesClearLevelsInTheJudgeTime(t *testing.T) {
	s := NewSearch(SearchConfig{Start: 50, Max: 1000, Settle: 2 * time.Second, Judge: 10 * time.Second, Window: 5 * time.Second})
	simulate(t, s, 300, 0, time.Hour)
	for _, l := range s.Levels() {
		if d := l.End - l.JudgeStart; d > 10 || l.Undecided {
			t.Errorf("level %d judged %.0f s (undecided %v), want within the 10 s judge", l.Users, d, l.Undecided)
		}
	}
}

// A level whose users cannot all finish setup is unhealthy, and says why;
// it is never judged on the users that did.
func TestSearchLevelThatCannotSetUpIsUnhealthy(t *testing.T) {
	s := NewSearch(SearchConfig{Start: 80, Max: 1000, Settle: 2 * time.Second, Judge: 5 * time.Second, RampRate: 1000, SetupTimeout: 30 * time.Second})
	users := 0
	for el := time.Duration(0); el < time.Hour; el += time.Second {
		ready := min(users, 69) // the server cannot log in more than 69
		d := s.Decide(Observation{Elapsed: el, Users: ready, Started: users})
		users = d.Users
		if d.Done {
			break
		}
	}
	levels := s.Levels()
	if len(levels) == 0 || levels[0].Users != 80 || levels[0].Verdict != "unhealthy" || levels[0].SetUp != 69 || levels[0].Evaluations != 0 ||
		!strings.Contains(levels[0].Why, "only 69 of 80 users had finished setup 30s after the ramp") {
		t.Fatalf("first level %+v", levels[0])
	}
	// Setup, not a check, bounds it: at the rate the server set users up
	// (69 in the 31 s from the move to the timeout).
	if l := levels[0]; !l.SetupBound || l.SetupPerS < 69.0/32 || l.SetupPerS > 69.0/30 || !strings.Contains(l.Why, "setups a second") {
		t.Errorf("first level %+v: want setup-bound at about 2.2 setups a second", l)
	}
	for _, l := range levels {
		if l.SetupBound && l.Evaluations > 0 {
			t.Errorf("level %d setup-bound, yet judged by checks", l.Users)
		}
	}
	for _, l := range levels {
		if l.Verdict == "healthy" && l.Users > 69 {
			t.Errorf("level %d judged healthy with only 69 users able to set up", l.Users)
		}
		if l.Verdict == "healthy" && l.SetUp != l.Users {
			t.Errorf("level %d judged with %d users set up", l.Users, l.SetUp)
		}
	}
}

// A level that cannot set its users up right after a step down (the
// removed users' logins still held the server) is tried once more before
// it counts; a level reached going up is not; and one that fails twice is
// unhealthy, saying so.
func TestSearchRetriesASetupFailureAfterAStepDown(t *testing.T) {
	for _, c := range []struct {
		name    string
		backlog time.Duration // how long after a step down no new user can be set up
		healthy bool          // the level stepped down to, in the end
	}{{"backlog shorter than a try", 15 * time.Second, true}, {"backlog past both tries", 10 * time.Minute, false}} {
		t.Run(c.name, func(t *testing.T) {
			s := NewSearch(SearchConfig{Start: 200, Max: 1000, Settle: time.Second, Judge: 3 * time.Second, Window: time.Second,
				RampRate: 1000, SetupTimeout: 10 * time.Second})
			// The server logs in at most 120 users at first (200 is
			// setup-bound); after a step down, of the users kept only
			// as many are set up as were in proportion, and none more
			// until the removed users' logins have drained (backlog).
			users, ready, stepped := 0, 0, 0
			var until time.Duration = -1
			var reasons []string
			for el := time.Duration(0); el < time.Hour; el += time.Second {
				o := Observation{Elapsed: el, Users: ready, Started: users}
				if ready > 150 {
					o.Fired = []string{"mean latency"}
				}
				d := s.Decide(o)
				reasons = append(reasons, d.Reason)
				switch {
				case d.Users < users && until < 0: // the first step down
					until, stepped = el+c.backlog, d.Users
					ready = ready * d.Users / users
				case until < 0:
					ready = min(d.Users, 120)
				case el < until:
					ready = min(ready, d.Users)
				default:
					ready = d.Users
				}
				users = d.Users
				if d.Done {
					break
				}
			}
			var tries []Level
			for _, l := range s.Levels() {
				if l.Users == stepped {
					tries = append(tries, l)
				}
			}
			said := strings.Contains(strings.Join(reasons, "\n"), "trying it once more before it counts")
			switch {
			case stepped == 0 || len(tries) == 0:
				t.Fatalf("no step down, or no level at it: levels %+v", s.Levels())
			case c.healthy && (tries[0].Verdict != "healthy" || !said):
				t.Errorf("level %d after the step down: %+v (retry said: %v), want healthy once tried again, clean", stepped, tries, said)
			case !c.healthy && (tries[0].Verdict != "unhealthy" || !tries[0].SetupBound || !strings.Contains(tries[0].Why, "second try")):
				t.Errorf("level %d after the step down: %+v, want setup-bound on its second try", stepped, tries)
			}
			if l := s.Levels()[0]; l.Users != 200 || !l.SetupBound || strings.Contains(l.Why, "second try") {
				t.Errorf("first level %+v, want 200 setup-bound at its first try (reached going up: no second)", l)
			}
		})
	}
}

// The ramp follows the server's setups: with a server that sets up 4
// users a second, at most a second of the ramp's users (50) are in setup
// at once, not the level's 300; and the level is reached, its users all
// set up, rather than stormed.
func TestSearchRampFollowsTheSetups(t *testing.T) {
	s := NewSearch(SearchConfig{Start: 300, Max: 300, Settle: time.Second, Judge: 3 * time.Second, RampRate: 50, SetupTimeout: 2 * time.Minute})
	users, ready, most := 0, 0, 0
	for el := time.Duration(0); el < 10*time.Minute; el += time.Second {
		d := s.Decide(Observation{Elapsed: el, Users: ready, Started: users})
		users = d.Users
		most = max(most, users-ready)
		ready = min(users, ready+4) // the server sets up 4 users a second
		if d.Done {
			break
		}
	}
	if most > 50+4 {
		t.Errorf("%d users in setup at once, want at most a second of the ramp's (50)", most)
	}
	if l := s.Levels(); len(l) == 0 || l[0].Users != 300 || l[0].SetupBound || l[0].Verdict != "healthy" {
		t.Errorf("levels %+v, want 300 reached and judged healthy", l)
	}
}

// An unhealthy hold at the answer takes the verdict back: the search goes
// on below it and finds a lower answer.
func TestSearchHoldThatIsUnhealthyReopensTheSearch(t *testing.T) {
	s := NewSearch(SearchConfig{Start: 100, Max: 1000, Settle: time.Second, Judge: 3 * time.Second, Window: time.Second})
	est, _ := simulate(t, s, 150, 0, time.Hour)
	if !est.Found {
		t.Fatalf("%+v", est)
	}
	first := int(est.Value)
	d := s.Held(Level{Users: first, Evaluations: 10, Unhealthy: 8, Verdict: "unhealthy", JudgeStart: 100, End: 109}, Observation{Elapsed: time.Hour, Users: first})
	if d.Users >= first || !strings.Contains(d.Reason, "the search goes on below it") {
		t.Fatalf("after an unhealthy hold: %+v", d)
	}
	// The hold's own level is now the lowest unhealthy one, the answer
	// the highest healthy level below it (within precision here: done).
	// The level was healthy, then not: the interval covers both verdicts,
	// up to the unhealthy level above it, and says why.
	e := s.Estimate()
	if e.Value >= float64(first) || e.Value != float64(d.Users) || e.High <= float64(first) || !strings.Contains(e.Why, "verdicts contradicted each other") {
		t.Errorf("estimate after the hold %+v, want below %d, its interval past %d, and why", e, first, first)
	}
	last := s.Levels()[len(s.Levels())-1]
	if !last.Hold || last.Users != first {
		t.Errorf("the hold is not in the levels: %+v", last)
	}
	if d := s.Held(Level{Users: 3, Evaluations: 10, Verdict: "healthy"}, Observation{}); !d.Done {
		t.Errorf("a healthy hold must confirm: %+v", d)
	}
}

// Verdicts that contradict each other over time (the target slowed as the
// search went on) widen the interval to cover both: an answer found late
// does not claim a precision the earlier verdicts deny.
func TestSearchWidensWhenTheCapacityMoves(t *testing.T) {
	s := NewSearch(SearchConfig{Start: 50, Max: 1000, Settle: time.Second, Judge: 5 * time.Second, Window: time.Second})
	ceiling := func(el time.Duration) int { // healthy below 120 for 40 s, then below 80
		if el > 40*time.Second {
			return 80
		}
		return 120
	}
	searchWithHolds(s, func(users int, el time.Duration) bool { return users >= ceiling(el) })
	e := s.Estimate()
	t.Logf("%+v; levels %+v", e, s.Levels())
	if !e.Found || e.Value >= 80 {
		t.Fatalf("estimate %+v: want the capacity at the end, below 80", e)
	}
	if e.High < 100 || !strings.Contains(e.Why, "verdicts contradicted each other") || len(e.Drift) != 2 || e.Drift[0] <= e.Drift[1] {
		t.Errorf("estimate %+v: the interval must cover the healthy verdicts above 80 from before the target slowed", e)
	}
}

// TestIntervalKeepsEveryHealthyLevel: whatever the target does during a
// search (its capacity moving, checks that toss coins near it), the
// interval never leaves out a level the search judged healthy above it,
// decided or not: a second search finding the ceiling there would land
// outside an interval that knew better.
func TestIntervalKeepsEveryHealthyLevel(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		r := rand.New(rand.NewPCG(seed, 3))
		s := NewSearch(SearchConfig{Start: 10, Max: 1000, Settle: time.Second, Judge: 5 * time.Second, Window: time.Second, Precision: 0.05})
		ceiling, period := 30+r.IntN(20), time.Duration(-1)
		searchWithHolds(s, func(users int, el time.Duration) bool {
			if p := el / (90 * time.Second); p != period { // every 90 s, maybe
				period = p
				if r.IntN(2) == 0 {
					ceiling = max(5, ceiling+r.IntN(11)-6) // the capacity moves, mostly down
				}
			}
			noisy := users >= ceiling-3 && users < ceiling+3 // a coin toss there
			return users >= ceiling+3 || (noisy && r.IntN(2) == 0)
		})
		e := s.Estimate()
		for _, l := range s.Levels() {
			if l.Verdict == "healthy" && e.High != 0 && float64(l.Users) >= e.High {
				t.Errorf("seed %d: [%v, %v) leaves out %d users, judged healthy (undecided %v) at %.0f s; why %q; levels %+v",
					seed, e.Low, e.High, l.Users, l.Undecided, l.End, e.Why, s.Levels())
				break
			}
		}
	}
}

// TestSearchWarmsUpFirst: with Warm, the users are set up to that level
// before the search, nothing judged there, then the search starts from
// Start as it would have; a warm-up whose users cannot all be set up is
// cut short at the setup timeout, not judged either.
func TestSearchWarmsUpFirst(t *testing.T) {
	// The target sets up every user at once; one a second (slower than
	// the setup timeout lets a level's ramp take: a warm-up goes on while
	// setups do); the first only after 50 s (a fresh server working on
	// the whole ramp at once), then all; at most 60.
	for _, c := range []struct{ capAt, perS, from int }{{1000, 1000, 0}, {1000, 1, 0}, {1000, 1000, 50}, {60, 1000, 0}} {
		capAt := c.capAt
		s := NewSearch(SearchConfig{Start: 10, Warm: 200, Max: 1000, Settle: time.Second, Judge: 3 * time.Second, Window: time.Second, SetupTimeout: 20 * time.Second})
		users, peak := 0, 0
		var reasons []string
		for el := time.Duration(0); el < time.Hour; el += time.Second {
			o := Observation{Elapsed: el, Users: min(users, capAt, c.perS*max(int(el/time.Second)-c.from, 0)), Started: users}
			if o.Users >= 150 {
				o.Fired = []string{"p99"}
			}
			d := s.Decide(o)
			if d.Reason != "" {
				reasons = append(reasons, d.Reason)
			}
			if d.Users > users+50 {
				t.Fatalf("cap %d: %d users asked for at %v with %d set up: past the ramp", capAt, d.Users, el, users)
			}
			users, peak = d.Users, max(peak, d.Users)
			if d.Done {
				break
			}
		}
		all := strings.Join(reasons, " | ")
		want := "warmed up: 200 users set up in"
		if capAt < 200 {
			want = "warm-up cut short: 60 of 200 users set up in"
		}
		if !strings.HasPrefix(reasons[0], "warm up: set 200 users up before the search") || !strings.Contains(reasons[1], want) ||
			!strings.Contains(reasons[1], "start the search at 10 users") {
			t.Errorf("cap %d: reasons %q", capAt, all)
		}
		lv := s.Levels()
		if peak < min(200, capAt+1) || lv[0].Users != 10 {
			t.Errorf("cap %d: peak %d users, first level judged %+v", capAt, peak, lv[0])
		}
		for _, l := range lv {
			if l.Users == 200 {
				t.Errorf("cap %d: the warm-up's level was judged: %+v", capAt, l)
			}
		}
		if e := s.Estimate(); capAt > 150 && (!e.Found || e.Value < 140 || e.Value >= 150) {
			t.Errorf("cap %d: estimate %+v, want the ceiling under 150 found as without the warm-up", capAt, e)
		}
	}
}

// searchWithHolds runs s a second at a time to its answer, a check firing
// whenever fires says so (users, elapsed), and hands it each measuring
// hold as the runner does: the answer held 10 s, judged by fires at its end.
func searchWithHolds(s *Search, fires func(users int, el time.Duration) bool) {
	users := 0
	for el := time.Duration(0); el < 2*time.Hour; el += time.Second {
		o := Observation{Elapsed: el, Users: users}
		if fires(users, el) {
			o.Fired = []string{"p99"}
		}
		d := s.Decide(o)
		users = d.Users
		if !d.Done {
			continue
		}
		h := Level{Users: users, JudgeStart: (el + time.Second).Seconds(), End: (el + 10*time.Second).Seconds(), Evaluations: 10, Verdict: "healthy"}
		el += 10 * time.Second
		if fires(users, el) {
			h.Unhealthy, h.Verdict = 10, "unhealthy"
		}
		if d = s.Held(h, Observation{Elapsed: el, Users: users}); d.Done {
			return
		}
		users = d.Users
	}
}
