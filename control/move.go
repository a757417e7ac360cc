package control

import (
	"fmt"
	"math"
	"time"
)

// Moving to a level: the ramp, paced by the setups it started, and the
// verdict on a level whose users cannot all be set up.

// move is a decision while moving to a level: ramp up at most RampRate
// users a second, go down at once; stop the ramp where checks keep
// firing; the level is reached once every user is set up, or unhealthy
// when they cannot be.
func (s *Search) move(o Observation, dt time.Duration) Decision {
	if o.Healthy() {
		s.badSince = -1
	} else if s.badSince < 0 {
		s.badSince = o.Elapsed
	}
	// Checks firing for FailFast seconds on the way up: stop the ramp
	// here and judge this level the usual way (settled, by majority),
	// rather than pile on users. The firing may be the new users' own
	// logins, so it is not yet a verdict.
	if s.warming {
		return s.warm(o, dt)
	}
	if cur := int(s.target); float64(s.level) > s.target && s.badSince >= 0 && cur > s.lo && cur > 0 &&
		o.Elapsed-s.badSince >= time.Duration(s.cfg.FailFast)*time.Second {
		why := fmt.Sprintf("checks firing for %v on the way to %s: hold at %d and judge it",
			(o.Elapsed - s.badSince).Round(time.Second), s.n(s.level), cur)
		s.level, s.badSince = cur, -1
		return Decision{Users: cur, Reason: why}
	}
	if float64(s.level) > s.target {
		step := s.cfg.RampRate * dt.Seconds()
		if s.cfg.Unit == "users" && o.Started > 0 {
			// Paced by the server: at most a second of the ramp's users
			// in setup at once, so that the ramp follows the setups'
			// completions and a server that logs users in slowly gets
			// a level it can reach, not a storm of logins that time out.
			step = math.Min(step, math.Max(0, float64(o.Users)+s.cfg.RampRate-s.target))
		}
		s.target = math.Min(float64(s.level), s.target+step)
	} else {
		s.target = float64(s.level)
	}
	// Reached when every user is set up. A level whose users are not
	// all set up SetupTimeout after its ramp should have ended cannot
	// be held: it is unhealthy, and says why.
	late := o.Elapsed-s.movedAt > time.Duration(float64(time.Second)*float64(s.level)/s.cfg.RampRate)+s.cfg.SetupTimeout
	switch {
	case int(s.target) >= s.level && o.Users >= s.level:
		s.reached = o.Elapsed
		s.cur = &Level{Users: s.level, Start: o.Elapsed.Seconds(), Fired: map[string]int{}, SetUp: s.level}
		if s.cfg.Unit == "users" && o.Users > s.movedSet {
			s.cur.SetupPerS = s.setupRate(o) // how fast its new users were set up; none when reached by removing users
		}
	case int(s.target) >= s.level && late && s.down && s.retried != s.level:
		// Reached by removing users, whose setups the server may still be
		// working through (a password hash goes on when the client has
		// gone): not a verdict on this level yet. Once more, clean.
		why := fmt.Sprintf("%s: %s, after a step down whose removed users' setups may have held the server; trying it once more before it counts",
			s.n(s.level), s.setupShort(o, s.setupRate(o)))
		s.retried, s.down = s.level, false
		s.movedAt, s.movedSet = o.Elapsed, o.Users
		return Decision{Users: s.level, Reason: why}
	case int(s.target) >= s.level && late:
		l := Level{Users: s.level, Start: s.movedAt.Seconds(), End: o.Elapsed.Seconds(), SetUp: o.Users, Verdict: "unhealthy",
			SetupBound: true, SetupPerS: s.setupRate(o)}
		l.Why = s.setupShort(o, l.SetupPerS)
		if s.retried == s.level {
			l.Why += ", on its second try (the first followed a step down)"
		}
		s.levels = append(s.levels, l)
		s.hi = minPos(s.hi, l.Users)
		d := s.after(fmt.Sprintf("%s unhealthy: %s", s.n(l.Users), l.Why), o)
		d.Judged = true
		return d
	}
	return Decision{Users: int(s.target)}
}

// warm is a decision while warming up: ramp as to a level, its users held
// idle once set up (Decision.Hold), then, once every user is set up (or
// none has finished setup for the setup timeout: a slow server's warm-up
// goes on as long as its setups do; the first may take three times as
// long, since a fresh server works on the ramp's setups at once and
// finishes them together), start the search from Start, its users let
// act, without judging anything.
func (s *Search) warm(o Observation, dt time.Duration) Decision {
	if float64(s.level) > s.target {
		step := math.Min(s.cfg.RampRate*dt.Seconds(), math.Max(0, float64(o.Users)+s.cfg.RampRate-s.target))
		s.target = math.Min(float64(s.level), s.target+step)
	}
	wait := 3 * s.cfg.SetupTimeout
	if o.Users > s.movedSet { // a setup finished: the warm-up goes on
		s.movedSet, s.warmAt, s.warmMoved = o.Users, o.Elapsed, true
	}
	if s.warmMoved {
		wait = s.cfg.SetupTimeout
	}
	took := (o.Elapsed - s.movedAt).Round(time.Second)
	var why string
	switch {
	case int(s.target) >= s.level && o.Users >= s.level:
		why = fmt.Sprintf("warmed up: %s set up in %v", s.n(s.level), took)
	case o.Elapsed-s.warmAt > wait:
		why = fmt.Sprintf("warm-up cut short: %d of %s set up in %v, none for the last %v (setup timeout)", o.Users, s.n(s.level), took, wait)
	default:
		return Decision{Users: int(s.target), Hold: true}
	}
	s.warming = false
	return s.moveTo(s.cfg.Start, o, fmt.Sprintf("%s; start the search at %s", why, s.n(s.cfg.Start)))
}

// setupRate is how fast users were set up since the move to the level
// began: users past setup gained, a second.
func (s *Search) setupRate(o Observation) float64 {
	return float64(max(o.Users-s.movedSet, 0)) / max((o.Elapsed-s.movedAt).Seconds(), 1e-9)
}

// setupShort says why a level was reached short of its load: users (or,
// in the open model, the pool) not set up within SetupTimeout.
func (s *Search) setupShort(o Observation, rate float64) string {
	if s.cfg.Unit != "users" {
		return fmt.Sprintf("the pool of users had not finished setup %v after the level was asked for (setup timeout)", s.cfg.SetupTimeout)
	}
	return fmt.Sprintf("only %d of %d users had finished setup %v after the ramp (setup timeout): %.3g setups a second since the level was asked for",
		o.Users, s.level, s.cfg.SetupTimeout, rate)
}
