package control

import (
	"fmt"
	"math"
	"time"
)

// SearchConfig configures Search. Zero values get the defaults noted.
type SearchConfig struct {
	Start     int           // first level; default 10
	Max       int           // never more users than this; required
	Min       int           // never fewer; default 1
	Growth    float64       // factor between levels while no level has failed; default 2
	Precision float64       // stop when (high-low)/low <= Precision; default 0.05
	Settle    time.Duration // after reaching a level, before judging it: at least the checks' longest window; default 30 s
	Judge     time.Duration // how long a level is judged; default 10 s
	RampRate  float64       // users added per second at most when moving up; default 50 (logins are costly)
	// A level is unhealthy when more than half of its judged evaluations
	// had a check firing. FailFast ends the judging early after that many
	// consecutive unhealthy evaluations; default 5.
	FailFast int
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
		c.Judge = 10 * time.Second
	}
	if c.RampRate <= 0 {
		c.RampRate = 50
	}
	if c.FailFast <= 0 {
		c.FailFast = 5
	}
	c.Start = min(max(c.Start, c.Min), c.Max)
	return c
}

// Search finds the ceiling by growing the load geometrically while every
// level is healthy, then narrowing the interval between the highest healthy
// level and the lowest unhealthy one until they are within Precision. Each
// level is held for Settle (so the checks' windows see only that level) and
// judged over Judge by majority, so one blip does not end the search.
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
	badSince time.Duration // while moving: since when checks have fired without a pause; <0 none
	lastT    time.Duration
	target   float64 // users being ramped towards the level
	levels   []Level
	run      int // consecutive unhealthy judged evaluations
	done     bool
	why      string
	started  bool

	pressure map[int]float64 // mean pressure of each judged level
	pressSum float64         // over the current level's judged evaluations
	pressN   int
	lastGap  int // hi-lo before the last interpolated step; 0 after a bisection
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
		return s.moveTo(s.cfg.Start, o, fmt.Sprintf("start at %d users", s.cfg.Start))
	}

	// Moving: ramp up at most RampRate users a second; go down at once.
	if s.reached < 0 {
		if o.Healthy() {
			s.badSince = -1
		} else if s.badSince < 0 {
			s.badSince = o.Elapsed
		}
		// Checks firing for FailFast seconds on the way up: stop the ramp
		// here and judge this level the usual way (settled, by majority),
		// rather than pile on users. The firing may be the new users' own
		// logins, so it is not yet a verdict.
		if cur := int(s.target); float64(s.level) > s.target && s.badSince >= 0 && cur > s.lo && cur > 0 &&
			o.Elapsed-s.badSince >= time.Duration(s.cfg.FailFast)*time.Second {
			why := fmt.Sprintf("checks firing for %v on the way to %d users: hold at %d and judge it",
				(o.Elapsed - s.badSince).Round(time.Second), s.level, cur)
			s.level, s.badSince = cur, -1
			return Decision{Users: cur, Reason: why}
		}
		if float64(s.level) > s.target {
			s.target = math.Min(float64(s.level), s.target+s.cfg.RampRate*dt.Seconds())
		} else {
			s.target = float64(s.level)
		}
		// Reached when every user is set up; a level whose setups keep
		// failing is taken as reached after the time its ramp should take
		// plus a settle period, so it gets judged (unhealthy) all the same.
		late := o.Elapsed-s.movedAt > time.Duration(float64(time.Second)*float64(s.level)/s.cfg.RampRate)+s.cfg.Settle
		if int(s.target) >= s.level && (o.Users == s.level || late) {
			s.reached = o.Elapsed
			s.cur = &Level{Users: s.level, Start: o.Elapsed.Seconds(), Fired: map[string]int{}}
		}
		return Decision{Users: int(s.target)}
	}

	held := o.Elapsed - s.reached
	if held < s.cfg.Settle {
		return Decision{Users: s.level}
	}
	if s.cur.Evaluations == 0 {
		s.cur.JudgeStart = o.Elapsed.Seconds()
	}
	s.cur.Evaluations++
	if o.Pressure > 0 && !math.IsInf(o.Pressure, 0) {
		s.pressSum += o.Pressure
		s.pressN++
	}
	if !o.Healthy() {
		s.cur.Unhealthy++
		s.run++
		for _, f := range o.Fired {
			s.cur.Fired[f]++
		}
	} else {
		s.run = 0
	}
	failFast := s.run >= s.cfg.FailFast && 2*s.cur.Unhealthy > s.cur.Evaluations
	if held < s.cfg.Settle+s.cfg.Judge && !failFast {
		return Decision{Users: s.level, Judged: true}
	}
	d := s.judge(o)
	d.Judged = true
	return d
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
		if s.hi == 0 || l.Users < s.hi {
			s.hi = l.Users
		}
	}
	s.levels = append(s.levels, *l)
	s.cur, s.run = nil, 0
	verdict := fmt.Sprintf("%d users %s (%d of %d evaluations unhealthy)", l.Users, l.Verdict, l.Unhealthy, l.Evaluations)

	switch {
	case s.hi == 0 && s.lo >= s.cfg.Max:
		return s.finish(fmt.Sprintf("never unhealthy up to --max-users %d: the ceiling is above it", s.cfg.Max), verdict)
	case s.lo == 0 && s.hi <= s.cfg.Min:
		return s.finish(fmt.Sprintf("unhealthy from the start: even %d users fired a check", s.hi), verdict)
	case s.lo > 0 && s.hi > 0 && (s.hi-s.lo <= 1 || float64(s.hi-s.lo) <= s.cfg.Precision*float64(s.lo)):
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
	s.level = n
	s.reached, s.movedAt, s.badSince = -1, o.Elapsed, -1
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
	return e
}

// Levels implements Controller.
func (s *Search) Levels() []Level { return s.levels }
