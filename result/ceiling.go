package result

import "github.com/headroom-dev/headroom/control"

// Ceiling is the part of result.json that only ceiling runs have.
type Ceiling struct {
	// Unit is what the search counts: UnitUsers, or UnitRate for
	// ceiling --open (SupportedUsers, the levels, decisions and the check
	// timeline's users are then whole arrivals per second).
	Unit string `json:"unit,omitempty"`
	// SupportedUsers is the answer: Value users, in [Low, High) for a
	// search (High 0: no unhealthy level found), or the mean with its 5-95%
	// band for the linear controller. Found is false when the run could not
	// state it within its precision; Why says why.
	SupportedUsers Supported `json:"supported_users"`
	// Throughput at the supported users: requests per second.
	ThroughputRPS float64           `json:"throughput_rps"`
	Controller    string            `json:"controller"`
	Evaluator     string            `json:"evaluator"` // "embedded" or "prometheus <url>"
	Scrape        []string          `json:"scrape,omitempty"`
	ScrapeErrors  map[string]string `json:"scrape_errors,omitempty"` // URL -> last error
	SearchSeconds float64           `json:"search_seconds"`
	// Trustworthy is false when headroom itself may have been the
	// bottleneck (CPU saturated, users late on their schedule).
	Trustworthy bool   `json:"trustworthy"`
	Untrusted   string `json:"untrusted,omitempty"`

	Checks     []CheckDef   `json:"checks"`
	Bottleneck []Bottleneck `json:"bottleneck"`
	Levels     []Level      `json:"levels,omitempty"`
	// Hold is the measuring hold at the supported users (--measure),
	// judged as a level is: an unhealthy hold means the answer did not
	// hold up (the search took it back, or a note says so).
	Hold      *Level     `json:"hold,omitempty"`
	Decisions []Decision `json:"decisions"`
	// CheckTimeline has one point per evaluation (about one a second).
	CheckTimeline []CheckPoint `json:"check_timeline"`
	// StatsWindow says which part of the run requests and actions cover.
	StatsWindow string `json:"stats_window"`
}

// Supported is the supported-users estimate: the controller's, as it
// stands when the run ends (control.Estimate): Value users, in [Low, High)
// for a search (High 0: no unhealthy level found), or the mean with its
// 5-95% band for the linear controller; Found false when the run could not
// state it within its precision (Why says why); Drift the two levels whose
// verdicts contradicted each other, when two did.
type Supported = control.Estimate

// CheckDef is one health check as evaluated.
type CheckDef struct {
	Name      string  `json:"name"`
	Query     string  `json:"query"`
	Threshold float64 `json:"threshold"`
	Below     bool    `json:"below,omitempty"`
	// Requires lists metrics the check waits for, any one of which will
	// do: until a scraped target exposes one, it is inactive.
	Requires []string `json:"requires,omitempty"`
}

// Bottleneck tells how often a check fired.
type Bottleneck struct {
	Check       string  `json:"check"`
	Fired       int     `json:"fired"`            // evaluations in which it fired
	Evaluations int     `json:"evaluations"`      // evaluations in all
	FirstAt     float64 `json:"first_at_s"`       // seconds since start of its first firing; -1 never
	First       bool    `json:"first"`            // it fired first (ties: all of them)
	Failed      int     `json:"failed,omitempty"` // of Fired, how often it could not be evaluated (fail closed)
	// Inactive counts the evaluations in which it was not evaluated, no
	// target exposing a metric it requires (CheckDef.Requires): equal to
	// Evaluations, it had no data source the whole run.
	Inactive  int    `json:"inactive,omitempty"`
	LastError string `json:"last_error,omitempty"`
}

// NoSource reports whether check i had no data source the whole run: no
// scraped target ever exposed a metric it requires, so it was never
// evaluated. Results written before Bottleneck.Inactive was counted say
// so in their timeline: an inactive evaluation is the only kind with
// neither a value nor a firing.
func (c *Ceiling) NoSource(i int) bool {
	if i < len(c.Bottleneck) && c.Bottleneck[i].Inactive > 0 {
		return c.Bottleneck[i].Inactive == c.Bottleneck[i].Evaluations
	}
	if len(c.CheckTimeline) == 0 {
		return false
	}
	for _, p := range c.CheckTimeline {
		if i >= len(p.Values) || i >= len(p.Fired) || p.Values[i] != nil || p.Fired[i] {
			return false
		}
	}
	return true
}

// Level is one load level a search held.
type Level struct {
	Users       int            `json:"users"`
	Start       float64        `json:"start_s"`
	JudgeStart  float64        `json:"judge_start_s,omitempty"`
	End         float64        `json:"end_s"`
	Evaluations int            `json:"evaluations"`
	Unhealthy   int            `json:"unhealthy"`
	Fired       map[string]int `json:"fired,omitempty"`
	Pressure    float64        `json:"pressure"` // worst check's value over its threshold, mean over the judged evaluations
	Verdict     string         `json:"verdict"`
	SetUp       int            `json:"set_up"`              // fewest users past setup while judged
	Undecided   bool           `json:"undecided,omitempty"` // not decided at the search's confidence in its judging time
	Hold        bool           `json:"hold,omitempty"`      // the measuring hold at the answer, judged again
	Why         string         `json:"why,omitempty"`       // a verdict not reached by the checks alone
	// SetupPerS is how fast the target set up the users added to reach
	// the level (users past setup gained a second, from the move to the
	// level until reached; absent when reached by removing users).
	// SetupBound: unhealthy because its users could not all be set up
	// within the setup timeout, not because a check fired.
	SetupBound bool    `json:"setup_bound,omitempty"`
	SetupPerS  float64 `json:"setup_per_s,omitempty"`
	// Unknown: judged evaluations healthy only because some checks could
	// not be evaluated (the target's scrape failed); past half, Undecided.
	Unknown int `json:"unknown,omitempty"`
	// The generator's figures over the seconds held at this user count
	// (after settling), absent in results of before.
	Lateness   *Lateness   `json:"lateness,omitempty"`
	Burstiness *Burstiness `json:"burstiness,omitempty"`
	// KeptOut counts the evaluations that fired while the checks' windows
	// saw load the generator did not mean to send (its starts late or
	// bunched: analysis.Untrue says how): kept out of the verdict, not blamed on
	// the target.
	KeptOut int    `json:"kept_out,omitempty"`
	Untrue  string `json:"untrue,omitempty"`
}

// Decision is one change the controller made, and why.
type Decision struct {
	T      float64 `json:"t"`
	Users  int     `json:"users"`  // users running when it decided
	Target int     `json:"target"` // users it asked for
	Reason string  `json:"reason"`
}

// CheckPoint is one evaluation of every check. Values[i] is nil when check
// i could not be evaluated.
type CheckPoint struct {
	T      float64    `json:"t"`
	Users  int        `json:"users"`
	Values []*float64 `json:"values"`
	Fired  []bool     `json:"fired"`
}
