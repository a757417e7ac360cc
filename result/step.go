package result

import (
	"sort"

	"github.com/headroom-dev/headroom/metrics"
)

// Step is the part of result.json that only step runs have (kind "step").
//
// A step run holds each planned user count in turn. A level's figures
// cover its held window only: from the end of its settle time (which
// starts once every user of the level has finished setup) until the next
// level's users are asked for. Setup and settling are excluded from every
// figure of the level, and from the run's top-level requests, actions and
// totals, which merge the held windows of every level (ramp_totals has
// what was excluded).
type Step struct {
	// Unit is what the levels count: UnitUsers (the closed model) or
	// UnitRate (step --rates: Planned and each level's Users are whole
	// arrivals per second).
	Unit     string  `json:"unit,omitempty"`
	Planned  []int   `json:"planned"`   // user counts (or rates) asked for, increasing
	HoldS    float64 `json:"hold_s"`    // seconds each level is held, after settling
	SettleS  float64 `json:"settle_s"`  // seconds each level settles once every user is set up; excluded
	RampRate float64 `json:"ramp_rate"` // users added per second at most; 0: all at once
	// Levels has every level that held for at least one tick, in order. A
	// level cut short by an interrupt has Complete false and figures over
	// what was held.
	Levels []StepLevel `json:"levels"`
	Knee   Knee        `json:"knee"`
	// Stopped says why the run ended before its last level, when it did
	// for a reason other than an interrupt (users that could not set up).
	Stopped string `json:"stopped,omitempty"`
}

// StepLevel is one held level. Times are seconds since the run started.
type StepLevel struct {
	Users    int  `json:"users"`
	Complete bool `json:"complete"` // held for the whole hold time
	// StartS is when the level's users were first asked for; SettleS when
	// every one of them had finished setup (the settle time starts);
	// Window the held window its figures cover.
	StartS  float64 `json:"start_s"`
	SettleS float64 `json:"settle_start_s"`
	Window  Window  `json:"window"`
	// Totals, Requests and Actions cover the held window; rates are per
	// second of it.
	Totals   metrics.Summary   `json:"totals"`
	Requests []metrics.Summary `json:"requests"`
	Actions  []metrics.Summary `json:"actions"`
	Connected
	// Omission is what the level's actions say of stalls that held its
	// users up (coordinated omission); nil without think time.
	Omission *Omission `json:"coordinated_omission,omitempty"`
	// GeneratorCPUPercent is headroom's CPU over the held window, in
	// percent of one core (the machine has result.Generator.GOMAXPROCS).
	GeneratorCPUPercent float64 `json:"generator_cpu_percent"`
	// Setup is what the setups of the users this level added did, from
	// StartS to SettleS (its Started is how many it added); nil when they
	// did not all finish.
	Setup *Setup `json:"setup,omitempty"`
	// Server, with --scrape: each scraped endpoint over the held window,
	// in the order of the result's server.targets.
	Server []ServerWindow `json:"server,omitempty"`
	// Arrivals and ServiceTimes, of an open-model level (step --rates):
	// the arrivals over the held window, and the service times beside
	// Totals' latencies from the intended start.
	Arrivals     *Arrivals     `json:"arrivals,omitempty"`
	ServiceTimes *ServiceTimes `json:"service_time,omitempty"`
	// The generator's figures over the held window; Untrue says why the
	// load it applied was not what it meant to send (analysis.Untrue), and such a
	// level is left out of the knee.
	Lateness   *Lateness   `json:"lateness,omitempty"`
	Burstiness *Burstiness `json:"burstiness,omitempty"`
	Untrue     string      `json:"untrue,omitempty"`
}

// ErrorPct returns the share of the level's requests that failed or timed
// out, in percent [0, 100]; 0 when there were none.
func (l *StepLevel) ErrorPct() float64 {
	return errorPct(l.Totals)
}

func errorPct(s metrics.Summary) float64 {
	if s.Count == 0 {
		return 0
	}
	return 100 * float64(s.Errors+s.Timeouts) / float64(s.Count)
}

// LevelHistograms is one level's part of histograms.json: request and
// action name -> base64 HDR V2 compressed histogram, microseconds.
type LevelHistograms struct {
	Requests map[string]string `json:"requests"`
	Actions  map[string]string `json:"actions"`
}

// WriteStep writes a step run's result into dir, as Write does, and adds
// to histograms.json the exact histograms of each level's held window
// under "levels", keyed by the level's user count ("48"). See
// Writer.WriteStep.
func WriteStep(dir string, r *Result, snap *metrics.Snapshot, levels map[int]*metrics.Snapshot) error {
	return Writer{}.WriteStep(dir, r, snap, levels)
}

// LevelUsers returns the user counts of levels, sorted.
func LevelUsers(levels map[int]*metrics.Snapshot) []int {
	out := make([]int, 0, len(levels))
	for u := range levels {
		out = append(out, u)
	}
	sort.Ints(out)
	return out
}
