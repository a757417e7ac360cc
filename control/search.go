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
// level is healthy, then bisecting between the highest healthy level and
// the lowest unhealthy one until they are within Precision. Each level is
// held for Settle (so the checks' windows see only that level) and judged
// over Judge by majority, so one blip does not end the search.
type Search struct {
	cfg     SearchConfig
	lo, hi  int // highest healthy level, lowest unhealthy level; 0 = none yet
	level   int // the level being moved to or held
	cur     *Level
	reached time.Duration // when the level was reached; <0 while moving
	movedAt time.Duration // when the move to the level began
	lastT   time.Duration
	target  float64 // users being ramped towards the level
	levels  []Level
	run     int // consecutive unhealthy judged evaluations
	done    bool
	why     string
	started bool
}

var _ Controller = (*Search)(nil)

// NewSearch returns a search controller. cfg.Max must be positive.
func NewSearch(cfg SearchConfig) *Search {
	if cfg.Max <= 0 {
		panic("control: SearchConfig.Max must be positive")
	}
	return &Search{cfg: cfg.withDefaults(), reached: -1}
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
		next := min(s.cfg.Max, int(math.Ceil(float64(s.lo)*s.cfg.Growth)))
		return s.moveTo(next, o, verdict+fmt.Sprintf("; grow to %d", next))
	case s.lo == 0:
		next := max(s.cfg.Min, int(float64(s.hi)/s.cfg.Growth))
		return s.moveTo(next, o, verdict+fmt.Sprintf("; no healthy level yet, go down to %d", next))
	default:
		next := (s.lo + s.hi) / 2
		return s.moveTo(next, o, verdict+fmt.Sprintf("; bisect [%d, %d) at %d", s.lo, s.hi, next))
	}
}

func (s *Search) moveTo(n int, o Observation, reason string) Decision {
	s.level = n
	s.reached, s.movedAt = -1, o.Elapsed
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
