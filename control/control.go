// Package control holds the controllers of a ceiling run: pure decisions
// from observations to a target user count. They read no clock and do no
// I/O: time arrives in each Observation, so a controller is tested by
// feeding it a sequence of observations.
package control

import (
	"fmt"
	"time"
)

// Observation is what a controller sees at each evaluation (about once a
// second).
type Observation struct {
	Elapsed time.Duration // since the run started
	Users   int           // users running now and past their setup
	Started int           // users running now, setting up or past setup (0: as many as Users)
	Fired   []string      // health checks that fired now (failed closed included); empty = healthy
	// Unknown names the checks that could not be evaluated now for a
	// reason that says nothing of the target's health (its scrape timed
	// out on a busy machine): neither fired nor passed.
	Unknown []string
	// Pressure is the worst check's value relative to its threshold: 0.5
	// is half way, 1 at the threshold. 0 when unknown.
	Pressure float64
}

// Healthy reports whether no check fired.
func (o Observation) Healthy() bool { return len(o.Fired) == 0 }

// Decision is what to do next.
type Decision struct {
	Users  int    // target user count
	Done   bool   // the controller has its answer (or gave up)
	Reason string // set when something changed: why
	// Judged is true when this observation counted towards a verdict (a
	// level's judging period for search; every step for linear). Only
	// judged observations make the bottleneck.
	Judged bool
	// Hold: users past setup wait instead of acting (a warm-up: set up,
	// and no load from them yet); false lets them act.
	Hold bool
}

// Estimate is the supported users as known so far. Value, Low and High
// are users; Found is false while the answer is not yet within the
// controller's precision (or never can be: Why says).
type Estimate struct {
	Value  float64 `json:"value"`
	Low    float64 `json:"low"`
	High   float64 `json:"high"`
	Method string  `json:"method"`
	Found  bool    `json:"found"`
	Why    string  `json:"why,omitempty"`
	// Drift, when decided verdicts contradicted each other, is the user
	// counts of the two levels that did: one healthy above one unhealthy.
	// Why says so; whether the target or the generator moved is for
	// whoever knows the generator's figures (the runner) to add.
	Drift []int `json:"drift,omitempty"`
}

// Controller decides the user count of a ceiling run. Not safe for
// concurrent use.
type Controller interface {
	Decide(o Observation) Decision
	Estimate() Estimate
	// Levels returns the load levels tried, for the result.
	Levels() []Level
}

// Holder is a Controller that takes the judgment of the hold at its
// answer: the runner holds the supported users again to measure them,
// judges that hold like a level, and hands it over. An unhealthy hold
// takes the answer back (the decision moves on); a healthy one confirms
// it (Done).
type Holder interface {
	Held(h Level, o Observation) Decision
}

// Level is one load level a controller held and judged.
type Level struct {
	Users       int            `json:"users"`
	Start       float64        `json:"start_s"` // when the level was reached, seconds since start
	JudgeStart  float64        `json:"judge_start_s,omitempty"`
	End         float64        `json:"end_s"`
	Evaluations int            `json:"evaluations"` // judged evaluations
	Unhealthy   int            `json:"unhealthy"`   // of which some check fired
	Fired       map[string]int `json:"fired,omitempty"`
	Pressure    float64        `json:"pressure"` // mean over the judged evaluations (see Observation)
	Verdict     string         `json:"verdict"`  // "healthy", "unhealthy", or "" while held
	// SetUp is the fewest users past setup in any judged evaluation (all
	// of them, unless the level could not set them all up: see Why).
	SetUp int `json:"set_up"`
	// Undecided: the share of unhealthy evaluations was still not
	// decided at the search's confidence when the judging time ran out;
	// the verdict is the majority's, and the interval is widened past
	// the level (see Search).
	Undecided bool `json:"undecided,omitempty"`
	// Hold: the level was held again to measure the answer, and judged
	// again (a confirmation of a healthy verdict).
	Hold bool   `json:"hold,omitempty"`
	Why  string `json:"why,omitempty"` // a verdict not reached by the checks alone, in words
	// Unknown counts the judged evaluations that were healthy only for
	// want of knowing: no check fired, and some could not be evaluated
	// (Observation.Unknown). Past half of them, the level is Undecided.
	Unknown int `json:"unknown,omitempty"`
	// SetupPerS is how fast the target set users up while the level was
	// asked for (users past setup gained, a second, from the move to the
	// level until it was reached or gave up); 0 when it was reached by
	// removing users. SetupBound: the level was unhealthy because its users could not all
	// be set up within the setup timeout, not because a check fired;
	// SetupPerS is how fast the target set users up meanwhile (users past
	// setup gained, over the seconds since the level was asked for).
	SetupBound bool    `json:"setup_bound,omitempty"`
	SetupPerS  float64 `json:"setup_per_s,omitempty"`
}

// Count counts one judged evaluation o of the level: when judging began,
// how many were unhealthy and which checks fired, the fewest users set up.
func (l *Level) Count(o Observation) {
	if l.Evaluations == 0 {
		l.JudgeStart = o.Elapsed.Seconds()
	}
	l.Evaluations++
	l.SetUp = min(l.SetUp, o.Users)
	if o.Healthy() && len(o.Unknown) > 0 {
		l.Unknown++
	}
	if !o.Healthy() {
		l.Unhealthy++
		for _, f := range o.Fired {
			l.Fired[f]++
		}
	}
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }
