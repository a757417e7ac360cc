package scenario

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Think is a think-time distribution: the pause a user takes after each
// action. Implementations are immutable and safe for concurrent use; the
// randomness comes from the user's own stream.
type Think interface {
	// Factor draws a user's rate factor, once, when the user starts. It
	// multiplies every pause of that user (1 for most distributions).
	Factor(r *rand.Rand) float64
	// Next draws one pause for a user with the given factor.
	Next(r *rand.Rand, factor float64) time.Duration
	// Mean is the expected pause over users and draws.
	Mean() time.Duration
}

// Constant pauses for d every time.
type Constant time.Duration

func (c Constant) Factor(*rand.Rand) float64                  { return 1 }
func (c Constant) Next(_ *rand.Rand, f float64) time.Duration { return scale(time.Duration(c), f) }
func (c Constant) Mean() time.Duration                        { return time.Duration(c) }

// Uniform pauses for a duration drawn uniformly from [Min, Max).
type Uniform struct{ Min, Max time.Duration }

func (u Uniform) Factor(*rand.Rand) float64 { return 1 }
func (u Uniform) Next(r *rand.Rand, f float64) time.Duration {
	return scale(u.Min+time.Duration(r.Float64()*float64(u.Max-u.Min)), f)
}
func (u Uniform) Mean() time.Duration { return (u.Min + u.Max) / 2 }

// Exponential pauses for an exponentially distributed duration with the
// given mean (a Poisson process per user), capped at Max.
type Exponential struct{ MeanD, Max time.Duration }

func (e Exponential) Factor(*rand.Rand) float64 { return 1 }
func (e Exponential) Next(r *rand.Rand, f float64) time.Duration {
	d := durationOf(r.ExpFloat64() * float64(e.MeanD))
	return scale(min(d, e.Max), f)
}

// Mean returns the mean of the capped distribution.
func (e Exponential) Mean() time.Duration {
	m := float64(e.MeanD)
	return time.Duration(m * (1 - math.Exp(-float64(e.Max)/m)))
}

// Rate is one entry of a rates distribution: a factor and its share of users.
type Rate struct{ Rate, Share float64 }

// Reference is the Mattermost load-test tool's simulative think time: a
// pause drawn uniformly from [Min, 2·Avg − Min), times a rate factor drawn
// once per user from Rates (by share).
type Reference struct {
	Min, Avg time.Duration
	Rates    []Rate
}

func (t Reference) Factor(r *rand.Rand) float64 {
	top := t.topShare()
	total := 0.0
	for _, x := range t.Rates {
		total += x.Share / top
	}
	u := r.Float64() * total
	for _, x := range t.Rates {
		if u < x.Share/top {
			return x.Rate
		}
		u -= x.Share / top
	}
	return t.Rates[len(t.Rates)-1].Rate
}

// topShare is the largest share. Shares are relative: dividing them by it
// keeps their sum finite.
func (t Reference) topShare() float64 {
	top := 0.0
	for _, x := range t.Rates {
		top = max(top, x.Share)
	}
	return top
}

func (t Reference) Next(r *rand.Rand, f float64) time.Duration {
	span := 2*t.Avg - 2*t.Min
	return scale(t.Min+time.Duration(r.Float64()*float64(span)), f)
}

func (t Reference) Mean() time.Duration {
	top := t.topShare()
	total, sum := 0.0, 0.0
	for _, x := range t.Rates {
		total += x.Share / top
		sum += x.Share / top * x.Rate
	}
	return scale(t.Avg, sum/total)
}

// scale multiplies d by a rate factor f > 0, saturating at the longest
// duration.
func scale(d time.Duration, f float64) time.Duration {
	if f == 1 {
		return d
	}
	return durationOf(math.Round(float64(d) * f))
}

// durationOf converts nanoseconds >= 0 to a Duration, saturating where a
// conversion would wrap around (to a negative pause, on amd64).
func durationOf(ns float64) time.Duration {
	if ns >= float64(maxDuration) || math.IsNaN(ns) {
		return maxDuration
	}
	return time.Duration(ns)
}

func validRange(lo, hi time.Duration, what string) error {
	if lo < 0 || hi < lo {
		return &argError{fmt.Sprintf("%s: need 0 <= min <= max, got %v and %v", what, lo, hi),
			`durations are strings like "500ms" or "2s", or numbers of seconds`}
	}
	return nil
}
