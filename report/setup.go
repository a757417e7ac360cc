package report

import (
	"fmt"

	"github.com/headroom-dev/headroom/result"
)

// Users' setups in a run's report: their own section, the answer of a
// --setup-only run, and a ceiling bound by setup rather than a check.

// setupBlocks sum up users' setups, which no other figure holds.
func setupBlocks(r *result.Result) []Block {
	st := r.Setup
	if st == nil {
		return nil
	}
	txt := setupText(st)
	if st.PerS > 0 {
		txt += fmt.Sprintf(" Set up at %s users a second, from the start to the last one ready", num(st.PerS))
		if c := r.Config; c.RampS > 0 && c.Users > 0 {
			txt += fmt.Sprintf(" (the ramp asked for %s a second", num(float64(c.Users)/c.RampS))
			if st.PerS < 0.9*float64(c.Users)/c.RampS {
				txt += ": the server set them up slower than that"
			}
			txt += ")"
		}
		txt += "."
	}
	out := []Block{&Heading{Level: 2, Text: "Users' setup"}, &Para{Text: txt}}
	if len(st.Requests) > 0 {
		out = append(out, summaryTable("setup request", append(st.Requests, st.Totals)))
	}
	return append(out, phaseBlocks(st.Phases, true)...)
}

// setupBound says, when the level that bounds the answer (its interval's
// high end) was unhealthy because its users could not be set up rather
// than because a check fired, that setup is the bound and how fast the
// target set users up; "" otherwise.
func setupBound(r *result.Result) string {
	c := r.Ceiling
	su := c.SupportedUsers
	for i := len(c.Levels) - 1; i >= 0; i-- {
		l := c.Levels[i]
		if float64(l.Users) != su.High || l.Verdict != "unhealthy" {
			continue
		}
		if !l.SetupBound {
			return ""
		}
		s := fmt.Sprintf("Bound by users' setup, not by a check: at %d %s, %s.", l.Users, c.UnitName(), l.Why)
		if st := r.Setup; st != nil && st.Attempts.Errors+st.Attempts.Timeouts > 0 {
			s += fmt.Sprintf(" Setups failed %s times in the run (%s timed out)", count(st.Attempts.Errors+st.Attempts.Timeouts), count(st.Attempts.Timeouts))
			if st.GaveUp > 0 {
				s += fmt.Sprintf("; %s users gave up", count(st.GaveUp))
			}
			if ms := ByCount(st.Attempts.Messages); len(ms) > 0 {
				s += fmt.Sprintf(", most often (%s): %s", count(st.Attempts.Messages[ms[0]]), ms[0])
			}
			s += "."
		}
		return s + " The target's setup capacity (logins, sign-ups) set this answer; docs/CEILING.md says how to measure it apart from the steady capacity."
	}
	return ""
}

// setupOnlyAnswer is a --setup-only run's answer: how fast the target set
// its users up, how long one took, and how often one failed.
func setupOnlyAnswer(r *result.Result) string {
	st := r.Setup
	if st == nil {
		return "Setup only: no user began its setup."
	}
	t := st.TimeToSetUp
	s := fmt.Sprintf("Setup only: %d of %d users set up", st.Users, r.Config.Users)
	if st.PerS > 0 {
		s += fmt.Sprintf(", %s a second", num(st.PerS))
		if r.Config.RampS > 0 {
			s += fmt.Sprintf(" (the ramp asked for %s a second)", num(float64(r.Config.Users)/r.Config.RampS))
		}
	}
	s += fmt.Sprintf("; time to set up a user p50 %s ms, p99 %s ms", num(t.P50Ms), num(t.P99Ms))
	if failed := st.Attempts.Errors + st.Attempts.Timeouts; failed > 0 {
		s += fmt.Sprintf("; %s of %s attempts failed (%s timed out)", count(failed), count(st.Attempts.Count), count(st.Attempts.Timeouts))
		if ms := ByCount(st.Attempts.Messages); len(ms) > 0 {
			s += fmt.Sprintf(", most often (%s): %s", count(st.Attempts.Messages[ms[0]]), ms[0])
		}
	}
	return s + "."
}

// setupText sums up users' setups, which no other figure holds.
func setupText(st *result.Setup) string {
	t := st.TimeToSetUp
	more := ""
	if st.SessionsKept > 0 {
		more += fmt.Sprintf("; %s of them began with the session an earlier user of their account kept (user.session)", count(st.SessionsKept))
	}
	if st.GaveUp > 0 {
		more += fmt.Sprintf("; %s users gave up after their last retry (--setup-retries)", count(st.GaveUp))
	}
	return fmt.Sprintf("In no figure above: %d of %d users finished setup, in %d attempts (%d failed)%s. Time to set up a user, from its first attempt: p50 %s ms, p95 %s ms, p99 %s ms, max %s ms.",
		st.Users, st.Started, st.Attempts.Count, st.Attempts.Errors+st.Attempts.Timeouts, more, num(t.P50Ms), num(t.P95Ms), num(t.P99Ms), num(t.MaxMs))
}
