package control

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// DefaultJudge is how long a level is judged unless said otherwise (the
// CLI's --judge too): six evaluations of a check a second.
const DefaultJudge = 6 * time.Second

// SearchConfig configures Search. Zero values get the defaults noted.
type SearchConfig struct {
	Start int // first level; default 10
	// Warm, when above Start, is a level set up before the search and
	// left at once, unjudged: on a fresh server the users' first setups
	// (accounts signed up, caches filled, sessions made) then happen
	// before any level is judged, not during the first levels the search
	// reaches. The search's levels re-add users already set up once.
	Warm      int
	Max       int           // never more users than this; required
	Min       int           // never fewer; default 1
	Growth    float64       // factor between levels while no level has failed; default 2
	Precision float64       // stop when (high-low)/low <= Precision; default 0.05
	Settle    time.Duration // after reaching a level, before judging it: at least the checks' longest window; default 30 s
	Judge     time.Duration // how long a level is judged; default DefaultJudge
	RampRate  float64       // users added per second at most when moving up; default 50 (logins are costly)
	// Unit is what a level counts, for the reasons: "users" (default) or
	// "arrivals/s" (the open model: levels are rates, moved to at once
	// with a RampRate past any level). MaxFlag names Max's flag in them;
	// default --max-users.
	Unit, MaxFlag string
	// A level is unhealthy when more than half of its judged evaluations
	// had a check firing. FailFast ends the judging early after that many
	// consecutive unhealthy evaluations; default 5.
	FailFast int
	// SetupTimeout is how long a level's users may take to finish setup
	// after its ramp should have ended; a level whose users are not all
	// set up by then is unhealthy for that reason (said in Level.Why).
	// Default 1 minute.
	SetupTimeout time.Duration
	// A level whose judged evaluations are mixed (some unhealthy, some
	// not) is judged on until its unhealthy share is above or below one
	// half at Confidence (default 0.9), or until MaxJudge (default 4 ×
	// Judge) has passed: then it is Undecided. Window is the checks'
	// longest range window (default 10 s): evaluations within one window
	// see the same requests, so a level judged t seconds counts as
	// t/Window independent observations, at least one.
	Confidence float64
	MaxJudge   time.Duration
	Window     time.Duration
}

func (c SearchConfig) withDefaults() SearchConfig {
	if c.Start <= 0 {
		c.Start = 10
	}
	if c.Min <= 0 {
		c.Min = 1
	}
	if c.Growth <= 1 {
		c.Growth = 2
	}
	if c.Precision <= 0 {
		c.Precision = 0.05
	}
	if c.Settle <= 0 {
		c.Settle = 30 * time.Second
	}
	if c.Judge <= 0 {
		c.Judge = DefaultJudge
	}
	if c.RampRate <= 0 {
		c.RampRate = 50
	}
	if c.FailFast <= 0 {
		c.FailFast = 5
	}
	if c.SetupTimeout <= 0 {
		c.SetupTimeout = time.Minute
	}
	if c.Confidence <= 0 || c.Confidence >= 1 {
		c.Confidence = 0.9
	}
	if c.MaxJudge < c.Judge {
		c.MaxJudge = 4 * c.Judge
	}
	if c.Window <= 0 {
		c.Window = 10 * time.Second
	}
	if c.Unit == "" {
		c.Unit = "users"
	}
	if c.MaxFlag == "" {
		c.MaxFlag = "--max-users"
	}
	c.Start = min(max(c.Start, c.Min), c.Max)
	c.Warm = min(c.Warm, c.Max)
	return c
}

// Search finds the ceiling by growing the load geometrically while every
// level is healthy, then narrowing the interval between the highest healthy
// level and the lowest unhealthy one until they are within Precision. Each
// level is held for Settle (so the checks' windows see only that level) and
// judged over Judge by majority, so one blip does not end the search. A
// level with mixed evaluations is judged on until its majority is decided
// at Confidence (Wilson's interval on the unhealthy share, over one
// observation per Window judged), at most MaxJudge; a level still
// undecided then takes the majority's verdict, and the estimate's
// interval is widened past it to the nearest decided levels. A level is
// reached only when every one of its users has finished setup; one that
// cannot set them up within SetupTimeout is unhealthy for that reason.
// The level held to measure the answer is judged again (Held): an
// unhealthy hold takes the verdict back and the search goes on below it.
//
// The checks' pressure (value over threshold) speeds it up: a level under
// a quarter of every threshold grows by Growth squared, and the next level
// inside the interval is interpolated where the pressure should reach 1
// (once the healthy level is at 60% of a threshold or more), safeguarded by
// bisection (the guess stays inside the middle 40% of the interval, and a
// step that did not halve the interval is followed by a plain bisection).
type Search struct {
	cfg      SearchConfig
	lo, hi   int // highest healthy level, lowest unhealthy level; 0 = none yet
	level    int // the level being moved to or held
	cur      *Level
	reached  time.Duration // when the level was reached; <0 while moving
	movedAt  time.Duration // when the move to the level began
	movedSet int           // users past setup then (Observation.Users)
	down     bool          // the move to the level was down, users removed: their setups may linger on the server
	retried  int           // the level last tried again after failing on setup after a step down
	badSince time.Duration // while moving: since when checks have fired without a pause; <0 none
	lastT    time.Duration
	target   float64 // users being ramped towards the level
	levels   []Level
	run      int // consecutive unhealthy judged evaluations
	done     bool
	why      string
	started  bool

	pressure  map[int]float64 // mean pressure of each judged level
	pressSum  float64         // over the current level's judged evaluations
	pressN    int
	lastGap   int // hi-lo before the last interpolated step; 0 after a bisection
	probes    int // levels tried next to an undecided bound, for a decided one (at most maxProbes)
	warming   bool
	warmAt    time.Duration // while warming up: when a user last finished setup
	warmMoved bool          // one has
}

var _ Controller = (*Search)(nil)

// NewSearch returns a search controller. cfg.Max must be positive.
func NewSearch(cfg SearchConfig) *Search {
	if cfg.Max <= 0 {
		panic("control: SearchConfig.Max must be positive")
	}
	return &Search{cfg: cfg.withDefaults(), reached: -1, badSince: -1, pressure: map[int]float64{}}
}

// Decide implements Controller.
func (s *Search) Decide(o Observation) Decision {
	if s.done {
		return Decision{Users: s.level, Done: true}
	}
	dt := o.Elapsed - s.lastT
	s.lastT = o.Elapsed
	if !s.started {
		s.started = true
		s.target = float64(o.Users)
		if s.cfg.Warm > s.cfg.Start {
			s.warming, s.warmAt = true, o.Elapsed
			d := s.moveTo(s.cfg.Warm, o, fmt.Sprintf("warm up: set %s up before the search (--warm-up), idle and unjudged", s.n(s.cfg.Warm)))
			d.Hold = true
			return d
		}
		return s.moveTo(s.cfg.Start, o, fmt.Sprintf("start at %s", s.n(s.cfg.Start)))
	}

	if s.reached < 0 {
		return s.move(o, dt)
	}
	return s.hold(o)
}

// hold is a decision while a reached level is held: settle, then judge
// it over Judge by majority (longer while mixed and undecided, at most
// MaxJudge), or at once when it fails fast.
func (s *Search) hold(o Observation) Decision {
	held := o.Elapsed - s.reached
	if held < s.cfg.Settle {
		return Decision{Users: s.level}
	}
	s.cur.Count(o)
	if o.Pressure > 0 && !math.IsInf(o.Pressure, 0) {
		s.pressSum += o.Pressure
		s.pressN++
	}
	if !o.Healthy() {
		s.run++
	} else {
		s.run = 0
	}
	failFast := s.run >= s.cfg.FailFast && 2*s.cur.Unhealthy > s.cur.Evaluations
	if held < s.cfg.Settle+s.cfg.Judge && !failFast {
		return Decision{Users: s.level, Judged: true}
	}
	mixed := s.cur.Unhealthy > 0 && s.cur.Unhealthy < s.cur.Evaluations
	if mixed && !failFast && !s.decided(s.cur, held-s.cfg.Settle) {
		if held < s.cfg.Settle+s.cfg.MaxJudge {
			return Decision{Users: s.level, Judged: true}
		}
		s.cur.Undecided = true
		s.cur.Why = fmt.Sprintf("%d of %d evaluations unhealthy: not decided at %s confidence after %v of judging",
			s.cur.Unhealthy, s.cur.Evaluations, pct(s.cfg.Confidence), s.cfg.MaxJudge)
	}
	if 2*s.cur.Unknown > s.cur.Evaluations && !s.cur.Undecided {
		// Healthy mostly for want of knowing: not a verdict to bound on.
		s.cur.Undecided = true
		s.cur.Why = fmt.Sprintf("%d of %d evaluations healthy only because some checks could not be evaluated (unknown: the target's scrape failed): judged mostly on unknowns",
			s.cur.Unknown, s.cur.Evaluations)
	}
	d := s.judge(o)
	d.Judged = true
	return d
}

// decided tells whether l's unhealthy share is above or below one half
// at the configured confidence, l having been judged for judged: Wilson's
// score interval, with one observation per Window judged.
func (s *Search) decided(l *Level, judged time.Duration) bool {
	n := max(1, judged.Seconds()/s.cfg.Window.Seconds())
	p := float64(l.Unhealthy) / float64(l.Evaluations)
	z := math.Sqrt2 * math.Erfinv(s.cfg.Confidence)
	lo, hi := wilson(p, n, z)
	return hi < 0.5 || lo > 0.5
}

// wilson is Wilson's score interval for a share p observed over n trials.
func wilson(p, n, z float64) (lo, hi float64) {
	z2 := z * z
	mid := (p + z2/(2*n)) / (1 + z2/n)
	half := z / (1 + z2/n) * math.Sqrt(p*(1-p)/n+z2/(4*n*n))
	return mid - half, mid + half
}

// minPos is the smaller of a and b, ignoring a zero a (none yet).
func minPos(a, b int) int {
	if a == 0 || b < a {
		return b
	}
	return a
}

// judge closes the current level and picks the next.
func (s *Search) judge(o Observation) Decision {
	l := s.cur
	l.End = o.Elapsed.Seconds()
	if s.pressN > 0 {
		l.Pressure = s.pressSum / float64(s.pressN)
		s.pressure[l.Users] = l.Pressure
	}
	s.pressSum, s.pressN = 0, 0
	healthy := 2*l.Unhealthy <= l.Evaluations
	if healthy {
		l.Verdict = "healthy"
		s.lo = max(s.lo, l.Users)
	} else {
		l.Verdict = "unhealthy"
		s.hi = minPos(s.hi, l.Users)
	}
	s.levels = append(s.levels, *l)
	if s.lo >= s.hi && s.hi > 0 { // noise: an unhealthy level under a healthy one
		s.relo()
	}
	s.cur, s.run = nil, 0
	verdict := fmt.Sprintf("%s %s (%d of %d evaluations unhealthy)", s.n(l.Users), l.Verdict, l.Unhealthy, l.Evaluations)
	if l.Undecided {
		verdict += ", undecided"
	}
	return s.after(verdict, o)
}

// Held takes the judgment of the hold at the answer (Estimate's Value),
// held again to measure it. A healthy hold confirms the answer; an
// unhealthy one takes the level's healthy verdict back, and the search
// goes on below it.
func (s *Search) Held(h Level, o Observation) Decision {
	h.Hold = true
	judged := time.Duration((h.End - h.JudgeStart) * float64(time.Second))
	if h.Unhealthy > 0 && h.Unhealthy < h.Evaluations && !s.decided(&h, judged+time.Second) {
		h.Undecided = true
		h.Why = fmt.Sprintf("%d of %d evaluations of the hold unhealthy: not decided at %s confidence", h.Unhealthy, h.Evaluations, pct(s.cfg.Confidence))
	}
	s.levels = append(s.levels, h)
	verdict := fmt.Sprintf("the hold at %s was %s (%d of %d evaluations unhealthy)", s.n(h.Users), h.Verdict, h.Unhealthy, h.Evaluations)
	if h.Verdict != "unhealthy" {
		if next, why := s.probe(); next > 0 {
			s.done = false
			s.probes++
			return s.moveTo(next, o, verdict+", undecided; "+why)
		}
		return Decision{Users: s.level, Done: true, Reason: verdict + ": answer confirmed"}
	}
	s.done, s.why = false, ""
	s.hi = minPos(s.hi, h.Users)
	s.relo()
	return s.after(verdict+"; the search goes on below it", o)
}

// after picks what follows a verdict: the answer, or the next level.
func (s *Search) after(verdict string, o Observation) Decision {
	switch {
	case s.hi == 0 && s.lo >= s.cfg.Max:
		return s.finish(fmt.Sprintf("never unhealthy up to %s %d: the ceiling is above it", s.cfg.MaxFlag, s.cfg.Max), verdict)
	case s.lo == 0 && s.hi <= s.cfg.Min:
		return s.finish(fmt.Sprintf("unhealthy from the start: even %s fired a check", s.n(s.hi)), verdict)
	case s.lo > 0 && s.hi > 0 && (s.hi-s.lo <= 1 || float64(s.hi-s.lo) <= s.cfg.Precision*float64(s.lo)):
		if next, why := s.probe(); next > 0 {
			s.probes++
			return s.moveTo(next, o, verdict+"; "+why)
		}
		s.done = true
		s.level = s.lo
		return Decision{Users: s.lo, Done: true, Reason: fmt.Sprintf("%s; ceiling in [%d, %d), within %s", verdict, s.lo, s.hi, pct(s.cfg.Precision))}
	case s.hi == 0:
		g, why := s.cfg.Growth, ""
		if p := s.pressure[s.lo]; p > 0 && p < 0.25 {
			g, why = s.cfg.Growth*s.cfg.Growth, fmt.Sprintf(" (checks at %.0f%% of their thresholds)", 100*p)
		}
		next := min(s.cfg.Max, int(math.Ceil(float64(s.lo)*g)))
		return s.moveTo(next, o, verdict+fmt.Sprintf("; grow to %d%s", next, why))
	case s.lo == 0:
		next := max(s.cfg.Min, int(float64(s.hi)/s.cfg.Growth))
		return s.moveTo(next, o, verdict+fmt.Sprintf("; no healthy level yet, go down to %d", next))
	default:
		next, how := s.next()
		return s.moveTo(next, o, verdict+fmt.Sprintf("; %s [%d, %d) at %d", how, s.lo, s.hi, next))
	}
}

// maxProbes bounds the levels tried next to an undecided bound.
const maxProbes = 3

// probe picks a level one precision step past an undecided bound (below
// an undecided healthy level, above an undecided unhealthy one), where a
// decided verdict is likely, so the reported interval has decided ends;
// 0 when both ends are decided, or close enough, or after maxProbes.
func (s *Search) probe() (int, string) {
	if s.probes >= maxProbes {
		return 0, ""
	}
	latest := s.latest()
	dlo, dhi := s.decided2(latest)
	// Past the undecided bound by a precision step, and past every level
	// there that was undecided too: trying one of those again would only
	// toss the same coin.
	if l := latest[s.lo]; l.Undecided {
		next := s.lo
		for {
			next = min(int(math.Floor(float64(next)*(1-s.cfg.Precision))), next-1)
			if l, ok := latest[next]; !ok || !l.Undecided {
				break
			}
		}
		if next > dlo && next >= s.cfg.Min {
			return next, fmt.Sprintf("%s were undecided: try %d for a decided lower bound", s.n(s.lo), next)
		}
	}
	if l := latest[s.hi]; l.Undecided {
		next := s.hi
		for {
			next = max(int(math.Ceil(float64(next)*(1+s.cfg.Precision))), next+1)
			if l, ok := latest[next]; !ok || !l.Undecided {
				break
			}
		}
		if (dhi == 0 || next < dhi) && next <= s.cfg.Max {
			return next, fmt.Sprintf("%s were undecided: try %d for a decided upper bound", s.n(s.hi), next)
		}
	}
	return 0, ""
}

// latest is each level's last judgment.
func (s *Search) latest() map[int]Level {
	m := make(map[int]Level, len(s.levels))
	for _, l := range s.levels {
		m[l.Users] = l
	}
	return m
}

// decided2 is the highest decided healthy level at or below lo and the
// lowest decided unhealthy level at or above hi; 0 for none.
func (s *Search) decided2(latest map[int]Level) (dlo, dhi int) {
	for users, l := range latest {
		if l.Undecided {
			continue
		}
		if l.Verdict == "healthy" && users <= s.lo {
			dlo = max(dlo, users)
		}
		if l.Verdict == "unhealthy" && users >= s.hi && s.hi > 0 {
			dhi = minPos(dhi, users)
		}
	}
	return dlo, dhi
}

// relo makes lo the highest level below hi whose last verdict is
// healthy, after a verdict that contradicts an earlier one.
func (s *Search) relo() {
	s.lo = 0
	for users, l := range s.latest() {
		if l.Verdict == "healthy" && (s.hi == 0 || users < s.hi) {
			s.lo = max(s.lo, users)
		}
	}
}

// next picks the level to try inside (lo, hi): where the pressure should
// reach 1, by linear interpolation, or the middle.
func (s *Search) next() (int, string) {
	gap := s.hi - s.lo
	mid := s.lo + gap/2
	plo, okLo := s.pressure[s.lo]
	phi, okHi := s.pressure[s.hi]
	endgame := float64(gap) <= 2.5*s.cfg.Precision*float64(s.lo)
	stalled := s.lastGap > 0 && 2*gap > s.lastGap
	// A straight line is only sound once the healthy level already feels
	// the load: from the flat part below a knee it would aim far too low.
	if !okLo || !okHi || plo < 0.6 || plo >= 1 || phi <= plo || endgame || stalled {
		s.lastGap = 0
		return mid, "bisect"
	}
	// An overloaded level's queue grows while it is judged, which inflates
	// its pressure and pulls the guess low: keep it in the middle 40%.
	f := (1 - plo) / (phi - plo)
	f = min(max(f, 0.3), 0.7)
	guess := s.lo + int(math.Round(f*float64(gap)))
	guess = min(max(guess, s.lo+1), s.hi-1)
	s.lastGap = gap
	return guess, "interpolate"
}

func (s *Search) moveTo(n int, o Observation, reason string) Decision {
	s.down = n < s.level
	s.level = n
	s.reached, s.movedAt, s.movedSet, s.badSince = -1, o.Elapsed, o.Users, -1
	if float64(n) <= s.target {
		s.target = float64(n)
	} else {
		s.target = math.Min(s.target+s.cfg.RampRate, float64(n))
	}
	if o.Users == n {
		s.reached = o.Elapsed
		s.cur = &Level{Users: n, Start: o.Elapsed.Seconds(), Fired: map[string]int{}}
	}
	return Decision{Users: int(s.target), Reason: reason}
}

func (s *Search) finish(why, verdict string) Decision {
	s.done, s.why = true, why
	return Decision{Users: s.level, Done: true, Reason: verdict + "; " + why}
}

// Estimate implements Controller: the highest healthy level, with the
// interval [highest healthy level, lowest unhealthy level). High is 0 when
// no level was unhealthy.
func (s *Search) Estimate() Estimate {
	e := Estimate{Method: fmt.Sprintf("search (precision %s)", pct(s.cfg.Precision)), Value: float64(s.lo), Low: float64(s.lo), High: float64(s.hi)}
	switch {
	case s.why != "":
		e.Why = s.why
	case s.lo > 0 && s.hi > 0 && (s.hi-s.lo <= 1 || float64(s.hi-s.lo) <= s.cfg.Precision*float64(s.lo)):
		e.Found = true
	case s.lo == 0 && s.hi == 0:
		e.Why = "no level judged yet"
	default:
		e.Why = fmt.Sprintf("stopped before the interval [%d, %d) narrowed to %s", s.lo, s.hi, pct(s.cfg.Precision))
	}
	// An undecided bound does not bound: widen to the nearest decided
	// level past it (none: the bound is unknown, 0).
	latest := s.latest()
	dlo, dhi := s.decided2(latest)
	var widened []string
	if l, ok := latest[s.lo]; ok && l.Undecided {
		e.Low = float64(dlo)
		widened = append(widened, fmt.Sprintf("the checks were noisy near the ceiling, %s were undecided (%s): down to the nearest decided level", s.n(s.lo), l.Why))
	}
	if l, ok := latest[s.hi]; ok && l.Undecided {
		e.High = float64(dhi)
		widened = append(widened, fmt.Sprintf("the checks were noisy near the ceiling, %s were undecided (%s): up to the nearest decided level", s.n(s.hi), l.Why))
	}
	if why := s.drift(&e); why != "" {
		widened = append(widened, why)
	}
	if len(widened) > 0 {
		why := "the interval is widened: " + strings.Join(widened, "; ")
		if e.Why != "" {
			why = e.Why + "; " + why
		}
		e.Why = why
	}
	return e
}

// drift widens e when verdicts contradict each other: a level healthy
// while a lower one was unhealthy (at another time) means the target's
// capacity moved during the search (state that grows, a cache, a slower
// phase) or the load the generator applied did (a stall that bunched its
// users), and the interval must cover both. A healthy level counts even
// undecided (its majority was healthy): an interval that left it out
// would claim the ceiling below a level this search saw hold. It returns
// why, or "", and names the two levels in e.Drift.
func (s *Search) drift(e *Estimate) string {
	var hi, lo *Level // the highest healthy level, the lowest decided unhealthy one
	for i := range s.levels {
		l := &s.levels[i]
		switch {
		case l.Verdict == "healthy" && (hi == nil || l.Users > hi.Users):
			hi = l
		case l.Undecided:
		case l.Verdict == "unhealthy" && (lo == nil || l.Users < lo.Users):
			lo = l
		}
	}
	if hi == nil || lo == nil || lo.Users > hi.Users {
		return ""
	}
	below, above := 0, 0 // the nearest decided levels past the contradiction
	for _, l := range s.levels {
		switch {
		case l.Undecided:
		case l.Verdict == "healthy" && l.Users < lo.Users:
			below = max(below, l.Users)
		case l.Verdict == "unhealthy" && l.Users > hi.Users:
			above = minPos(above, l.Users)
		}
	}
	e.Low = min(e.Low, float64(below))
	if above == 0 || (e.High != 0 && float64(above) > e.High) {
		e.High = float64(above) // 0: no decided level above bounds it
	}
	e.Drift = []int{hi.Users, lo.Users}
	healthy := "healthy"
	if hi.Undecided {
		healthy = "healthy by a majority not decided"
	}
	return fmt.Sprintf("verdicts contradicted each other, %s %s at %s and %d unhealthy at %s, so the interval covers both",
		s.n(hi.Users), healthy, clock(hi.End), lo.Users, clock(lo.End))
}

func clock(s float64) string {
	d := time.Duration(s * float64(time.Second)).Round(time.Second)
	return fmt.Sprintf("%02d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

// n is x in the search's unit: "40 users", "40 arrivals/s".
func (s *Search) n(x int) string { return fmt.Sprintf("%d %s", x, s.cfg.Unit) }

// Levels implements Controller.
func (s *Search) Levels() []Level { return s.levels }
