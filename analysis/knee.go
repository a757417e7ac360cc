// Package analysis says what a run's figures mean, the figures result
// holds: where a step run's throughput stopped growing with the load
// (FindKnee), whether the load the generator applied was the load it meant
// (Untrue), and what a closed-model run's stalls hid from its latencies
// (OmissionOf: coordinated omission), each with the words reports print.
// Every function is pure. The runner calls them as it fills a result;
// result knows nothing of this package, so reading or writing a result
// never judges it.
package analysis

import (
	"fmt"
	"strings"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// DefaultKneeRule is the rule step runs use: half the proportional gain,
// latency up 20%, errors up 1 point.
func DefaultKneeRule() result.KneeRule {
	return result.KneeRule{Efficiency: 0.5, LatencyRisePct: 20, ErrorRisePoints: 1}
}

// FindKnee finds the knee of a step run: the first level L such that,
// from L to the next level, throughput (successful requests per second)
// grew by less than rule.Efficiency times the users' relative increase,
// while latency (p95 or mean) rose by more than rule.LatencyRisePct or
// the error share by more than rule.ErrorRisePoints. Both must hold:
// throughput that flattens while latency and errors hold points at the
// generator or the scenario, not the target, and the summary says so.
//
// levels must be in increasing order of users. Levels that are not
// Complete or have no requests are skipped. FindKnee is pure.
func FindKnee(levels []result.StepLevel, rule result.KneeRule) result.Knee {
	return FindKneeIn(levels, rule, result.UnitUsers)
}

// FindKneeIn is FindKnee for levels counted in unit (UnitRate: arrivals
// per second, step --rates): the same rule, the load's gain against the
// throughput's, and the summary in the unit's words.
func FindKneeIn(levels []result.StepLevel, rule result.KneeRule, unit string) result.Knee {
	var use []result.StepLevel
	for _, l := range levels {
		if l.Complete && l.Totals.Count > 0 && l.Users > 0 && l.Untrue == "" {
			use = append(use, l)
		}
	}
	k := result.Knee{Rule: rule}
	if len(use) < 2 {
		k.Summary = fmt.Sprintf("no knee: finding one takes at least two completed levels with requests, got %d", len(use))
		return k
	}
	span := fmt.Sprintf("%d–%s", use[0].Users, result.Amount(float64(use[len(use)-1].Users), unit))
	var weakest, flatOnly *step
	for i := 0; i+1 < len(use); i++ {
		s := stepOf(use[i], use[i+1])
		s.unit = unit
		if s.xFrom <= 0 {
			continue // nothing succeeded at the lower level: no growth to judge
		}
		flat := s.tputGain < rule.Efficiency*s.usersGain
		latency := 100*s.p95Rise > rule.LatencyRisePct || 100*s.meanRise > rule.LatencyRisePct
		errs := s.errTo-s.errFrom > rule.ErrorRisePoints
		if flat && (latency || errs) {
			k.Found = true
			k.Users, k.Next = s.from.Users, s.to.Users
			k.UsersGainPct, k.ThroughputGainPct = 100*s.usersGain, 100*s.tputGain
			k.ThroughputRPS = [2]float64{s.xFrom, s.xTo}
			k.P95Ms = [2]float64{s.from.Totals.P95Ms, s.to.Totals.P95Ms}
			k.MeanMs = [2]float64{s.from.Totals.MeanMs, s.to.Totals.MeanMs}
			k.ErrorPct = [2]float64{s.errFrom, s.errTo}
			var why []string
			switch {
			case 100*s.p95Rise > rule.LatencyRisePct:
				why = append(why, fmt.Sprintf("p95 rose %.0f%% (%s → %s)", 100*s.p95Rise, msText(s.from.Totals.P95Ms), msText(s.to.Totals.P95Ms)))
			case latency:
				why = append(why, fmt.Sprintf("mean latency rose %.0f%% (%s → %s)", 100*s.meanRise, msText(s.from.Totals.MeanMs), msText(s.to.Totals.MeanMs)))
			}
			if errs {
				why = append(why, fmt.Sprintf("errors and timeouts rose from %.1f%% to %.1f%% of requests", s.errFrom, s.errTo))
			}
			k.Summary = fmt.Sprintf("knee at %s: %s while %s", result.Amount(float64(s.from.Users), unit), s.words(), strings.Join(why, " and "))
			return k
		}
		if flat && flatOnly == nil {
			flatOnly = &s
		}
		if weakest == nil || s.efficiency() < weakest.efficiency() {
			weakest = &s
		}
	}
	switch {
	case flatOnly != nil:
		k.Summary = fmt.Sprintf("no knee within %s: %s, but latency and errors held; "+
			"the limit may be the load generator or the scenario, not the target", span, flatOnly.words())
	case weakest != nil:
		k.Summary = fmt.Sprintf("no knee within %s: throughput grew at least %.0f%% as fast as the %s at every step (the least: %s)",
			span, 100*rule.Efficiency, loadWord(unit), weakest.words())
	default:
		k.Summary = fmt.Sprintf("no knee within %s: no request succeeded at the lower level of any step", span)
	}
	return k
}

// loadWord names what a unit's levels grow: the users, the arrival rate.
func loadWord(unit string) string {
	if result.UnitOf(unit) == result.UnitRate {
		return "arrival rate"
	}
	return "users"
}

// step is the change from one level to the next.
type step struct {
	from, to          result.StepLevel
	xFrom, xTo        float64 // successful requests per second
	usersGain         float64 // relative: 0.5 is +50%
	tputGain          float64
	p95Rise, meanRise float64
	errFrom, errTo    float64 // percent
	unit              string  // of Users
}

func stepOf(a, b result.StepLevel) step {
	s := step{from: a, to: b, xFrom: goodput(a.Totals), xTo: goodput(b.Totals),
		errFrom: a.ErrorPct(), errTo: b.ErrorPct()}
	s.usersGain = float64(b.Users)/float64(a.Users) - 1
	if s.xFrom > 0 {
		s.tputGain = s.xTo/s.xFrom - 1
	}
	s.p95Rise = rise(a.Totals.P95Ms, b.Totals.P95Ms)
	s.meanRise = rise(a.Totals.MeanMs, b.Totals.MeanMs)
	return s
}

// efficiency is the throughput gain over the users' gain: 1 is linear.
func (s *step) efficiency() float64 {
	if s.usersGain <= 0 {
		return 1
	}
	return s.tputGain / s.usersGain
}

// words: "from 162 to 240 users (+48%) throughput grew 3% (31.0 → 32.0 req/s)".
func (s *step) words() string {
	verb := "grew"
	if s.tputGain < 0 {
		verb = "fell"
	}
	g := 100 * s.tputGain
	if g < 0 {
		g = -g
	}
	return fmt.Sprintf("from %d to %s (+%.0f%%) throughput %s %.0f%% (%.1f → %.1f req/s)",
		s.from.Users, result.Amount(float64(s.to.Users), s.unit), 100*s.usersGain, verb, g, s.xFrom, s.xTo)
}

// goodput is successful requests per second.
func goodput(s metrics.Summary) float64 {
	if s.Count == 0 {
		return 0
	}
	return s.RPS * float64(s.Count-s.Errors-s.Timeouts) / float64(s.Count)
}

func rise(from, to float64) float64 {
	if from <= 0 {
		return 0
	}
	return to/from - 1
}

func msText(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.2f s", v/1000)
	case v >= 10:
		return fmt.Sprintf("%.0f ms", v)
	}
	return fmt.Sprintf("%.1f ms", v)
}
