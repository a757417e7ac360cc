// Package compare sets two sets of results side by side — a base build
// and a new one, each one or more repeats of the same kind of run — and
// says for each figure whether the difference is a regression, an
// improvement, or within the noise between repeats.
//
// Latencies come from the exact histograms of every repeat merged; the
// noise from the spread between repeats (Welch's t interval); a verdict
// also needs the change to pass a minimum effect. Requests made on one side
// only are listed apart and left out of every aggregate, and aggregates
// weigh both sides with one mix (docs/COMPARE.md).
package compare

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// Comparison is the whole comparison, as compare.json holds it.
type Comparison struct {
	Format  string   `json:"format"`
	Kind    string   `json:"kind"`
	Base    SideInfo `json:"base"`
	New     SideInfo `json:"new"`
	Options Options  `json:"options"`
	Notes   []string `json:"notes,omitempty"`

	// Unit is what a step's levels and a ceiling's answer count:
	// result.UnitUsers, or result.UnitRate for the open model's (step
	// --rates, ceiling --open; Users is then the supported rate).
	Unit string `json:"unit,omitempty"`
	// Ceiling results: the supported users, and the throughput there.
	Users      *Metric `json:"users,omitempty"`
	CeilingRPS *Metric `json:"ceiling_rps,omitempty"`
	// Window is the measured window: after the ramp (run), at the
	// supported users (ceiling), every held level (step).
	Window Span `json:"window"`
	// Service, of open-model runs and ceilings: each run's service time
	// (from the actual send), mean and p99 over its window, beside the
	// latencies from the intended start that Window compares; a mean of
	// the runs' figures on each side. nil for the closed model, and for
	// step runs (each level's is in its result).
	ServiceMean *Metric `json:"service_mean_ms,omitempty"`
	ServiceP99  *Metric `json:"service_p99_ms,omitempty"`
	// Levels are the step levels both sides held; Onsets, for each
	// request and action, the lowest of them where its latency changed.
	Levels []LevelSpan `json:"levels,omitempty"`
	Onsets []Onset     `json:"onsets,omitempty"`
	// LevelFigures is how many latency figures the levels' rows had judged
	// (a verdict of change or of none): at the confidence of Options,
	// about (1 − confidence) of them are judged a change by chance alone.
	LevelFigures int `json:"level_figures_judged,omitempty"`
	// Setup is the users' setups over the whole runs (compareSetup): left
	// out of every span above, compared here. nil when no run has setups.
	Setup *Span `json:"setup,omitempty"`
	// SetupRate is how fast each run set its users up (result.Setup.PerS,
	// users a second, from its start to the last one ready; of a bounded
	// run): the setup capacity where the ramp outran the server, the
	// ramp's pace where it did not. nil unless every run has it.
	SetupRate *Metric            `json:"setup_rate,omitempty"`
	Server    []ServerComparison `json:"server,omitempty"`
	// Profiles compare the server's CPU profiles phase by phase (--profile):
	// CPU per unit of work, and the functions whose share moved most.
	Profiles []ProfileComparison `json:"profiles,omitempty"`
	// Phases compare where the window's requests spent their time (dns,
	// connect, tls, wait, receive) per request name.
	Phases []PhaseRow `json:"phases,omitempty"`
}

// Format names the comparison format.
const Format = "headroom-compare/1"

// SideInfo describes one side.
type SideInfo struct {
	Label        string   `json:"label"`
	Dirs         []string `json:"dirs"`
	Headroom     string   `json:"headroom"`
	Scenario     string   `json:"scenario"`
	ScenarioHash string   `json:"scenario_hash"`
	Target       string   `json:"target"`
	Users        []int    `json:"users"`
	// Model is the runs' model of load: "closed" (users) or "open"
	// (arrivals at a rate); Rates, of the open model, each run's peak
	// rate in arrivals per second.
	Model   string           `json:"model,omitempty"`
	Rates   []float64        `json:"rates,omitempty"`
	Knee    []string         `json:"knee,omitempty"` // step runs: each repeat's knee
	Results []*result.Result `json:"-"`
}

// Compare compares new against base. It refuses sides of different kinds,
// and a run given twice on a side or on both (unless both sides are the
// same runs: docs/COMPARE.md, "One run, one repeat").
func Compare(base, new *Side, o Options) (*Comparison, error) {
	if len(base.Runs) == 0 || len(new.Runs) == 0 {
		return nil, fmt.Errorf("%d base and %d new runs: compare needs at least one on each side", len(base.Runs), len(new.Runs))
	}
	if base.Kind() != new.Kind() {
		return nil, fmt.Errorf("the base runs are %q results and the new runs %q results: compare needs results of the same kind (run, step or ceiling)",
			base.Kind(), new.Kind())
	}
	if err := sameModel(base, new); err != nil {
		return nil, err
	}
	itself, err := distinct(base, new)
	if err != nil {
		return nil, err
	}
	o.defaults()
	c := &Comparison{Format: Format, Kind: base.Kind(), Base: info(base), New: info(new), Options: o}
	if itself != "" {
		c.Notes = append(c.Notes, itself)
	}
	c.notes(base, new)
	c.Window = compareSpan(windows(base), windows(new), o)
	var note string
	if c.Setup, note = compareSetup(base, new, o); note != "" {
		c.Notes = append(c.Notes, note)
	}
	c.SetupRate = setupRate(base, new, o)
	c.Unit = unitOf(base)
	if modelOf(base.Runs[0].Result) == result.ModelOpen {
		c.open(base, new, o)
	}
	switch c.Kind {
	case "ceiling":
		c.Users = &Metric{Name: "supported users", Unit: "users", HigherIsBetter: true}
		c.CeilingRPS = &Metric{Name: "requests/s at the supported users", Unit: "/s", HigherIsBetter: true}
		if c.Unit == result.UnitRate {
			c.Users.Name, c.Users.Unit = "supported arrival rate", "arrivals/s"
			c.CeilingRPS.Name = "requests/s at the supported arrival rate"
		}
		for _, side := range []struct {
			s          *Side
			users, rps *[]float64
			pu, pr     *float64
		}{{base, &c.Users.BaseRuns, &c.CeilingRPS.BaseRuns, &c.Users.Base, &c.CeilingRPS.Base},
			{new, &c.Users.NewRuns, &c.CeilingRPS.NewRuns, &c.Users.New, &c.CeilingRPS.New}} {
			for _, r := range side.s.Runs {
				ci := r.Result.Ceiling
				if ci == nil || !ci.SupportedUsers.Found {
					continue
				}
				*side.users = append(*side.users, ci.SupportedUsers.Value)
				*side.rps = append(*side.rps, ci.ThroughputRPS)
			}
			*side.pu, *side.pr = meanOr(*side.users), meanOr(*side.rps)
		}
		c.Users.judge(o)
		lo, hi := ceilingResolution(base, new)
		c.Users.widen(lo, hi, o)
		c.CeilingRPS.judge(o)
	case "step":
		var apart []int
		c.Levels, apart = compareLevels(base, new, o)
		c.Onsets, c.LevelFigures = onsets(c.Levels)
		if len(apart) > 0 {
			c.Notes = append(c.Notes, fmt.Sprintf("levels %v were not held by every run of both sides: left out of the level-by-level comparison", apart))
		}
	}
	c.Server = compareServers(base, new, o, &c.Notes)
	c.Profiles = compareProfiles(base, new, o, &c.Notes)
	c.Phases = comparePhases(base, new, o)
	return c, nil
}

func meanOr(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return mean(xs)
}

func info(s *Side) SideInfo {
	r0 := s.Runs[0].Result
	in := SideInfo{Label: s.Label, Headroom: r0.Headroom, Scenario: r0.Config.Scenario, ScenarioHash: r0.Config.ScenarioHash, Target: r0.Config.Target,
		Model: modelOf(r0)}
	for _, r := range s.Runs {
		in.Dirs = append(in.Dirs, r.Dir)
		in.Users = append(in.Users, r.Result.Config.Users)
		if rc := r.Result.Config.Rate; rc != nil {
			in.Rates = append(in.Rates, rc.PeakPerSecond)
		}
		in.Results = append(in.Results, r.Result)
		if st := r.Result.Step; st != nil {
			in.Knee = append(in.Knee, st.Knee.Summary)
		}
	}
	return in
}

// notes says what makes the comparison weaker than it looks.
func (c *Comparison) notes(base, new *Side) {
	add := func(f string, a ...any) { c.Notes = append(c.Notes, fmt.Sprintf(f, a...)) }
	if len(base.Runs) < 2 || len(new.Runs) < 2 {
		add("%d run(s) of base and %d of new: with one run on a side there is no measure of the noise between runs, so no verdict is given; repeat each side (3 runs is a good start)",
			len(base.Runs), len(new.Runs))
	}
	for _, s := range []*Side{base, new} {
		for _, r := range s.Runs {
			if r.Result.Status != result.Completed {
				add("%s (%s) did not complete (status %q): its figures cover what ran", r.Dir, s.Label, r.Result.Status)
			}
			if r.Result.Generator.Overloaded {
				add("%s (%s): the load generator was overloaded; its latencies may be headroom's", r.Dir, s.Label)
			}
			if ci := r.Result.Ceiling; ci != nil && !ci.SupportedUsers.Found {
				add("%s (%s): no ceiling was found (%s); left out of the supported users", r.Dir, s.Label, ci.SupportedUsers.Why)
			}
			if r.mismatched != "" {
				add("%s (%s): %s", r.Dir, s.Label, r.mismatched)
			}
			if n := r.Result.FoldedNames; n > 0 {
				add("%s (%s) holds more than %d request or action names (a run keeps %d): %d were folded under %q when it was read",
					r.Dir, s.Label, metrics.MaxNames, metrics.MaxNames, n, metrics.OtherName)
			}
			if r.Result.Config.ScenarioHash != base.Runs[0].Result.Config.ScenarioHash {
				add("%s (%s) ran a different scenario than %s (hash differs): the two sides may not do the same work", r.Dir, s.Label, base.Runs[0].Dir)
			}
		}
	}
	if c.Kind == "run" {
		bu, nu := info(base).Users, info(new).Users
		if !slices.Equal(uniq(bu), uniq(nu)) {
			add("the sides ran different user counts (base %v, new %v)", uniq(bu), uniq(nu))
		}
		br, nr := uniqFloat(info(base).Rates), uniqFloat(info(new).Rates)
		if !slices.Equal(br, nr) {
			add("the sides ran different arrival rates (base %v/s, new %v/s)", br, nr)
		}
	}
	if modelOf(base.Runs[0].Result) == result.ModelOpen {
		add("open-model results: latencies are from each arrival's intended start (waits for a free user included), on both sides")
	}
}

func uniqFloat(xs []float64) []float64 {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

// modelOf is a result's model of load; a result written before there was
// one is of the closed model.
func modelOf(r *result.Result) string {
	if r.Config.Open() {
		return result.ModelOpen
	}
	return result.ModelClosed
}

// open labels the latencies of open-model runs as from the intended
// start, and compares their service times beside them.
func (c *Comparison) open(base, new *Side, o Options) {
	for _, m := range []*Metric{&c.Window.MixMean, &c.Window.MixP99} {
		m.Name = strings.Replace(m.Name, " latency", " latency from intended start", 1)
	}
	mean := &Metric{Name: "mean service time (from the send)", Unit: "ms"}
	p99 := &Metric{Name: "p99 service time (from the send)", Unit: "ms"}
	for _, side := range []struct {
		s       *Side
		ms, ps  *[]float64
		pm, ppp *float64
	}{{base, &mean.BaseRuns, &p99.BaseRuns, &mean.Base, &p99.Base}, {new, &mean.NewRuns, &p99.NewRuns, &mean.New, &p99.New}} {
		for _, r := range side.s.Runs {
			if sv := r.Result.ServiceTimes; sv != nil && sv.Totals.Count > 0 {
				*side.ms = append(*side.ms, sv.Totals.MeanMs)
				*side.ps = append(*side.ps, sv.Totals.P99Ms)
			}
		}
		*side.pm, *side.ppp = meanOr(*side.ms), meanOr(*side.ps)
	}
	if len(mean.BaseRuns) == 0 && len(mean.NewRuns) == 0 {
		return // step runs: per level only
	}
	mean.judge(o)
	p99.judge(o)
	c.ServiceMean, c.ServiceP99 = mean, p99
}

// ceilingResolution bounds the change in supported users when each
// side's ceiling may lie anywhere in its interval [low, high): from the
// new side's low against the base's high to its high against the base's
// low, each side's bounds averaged over its runs with a ceiling. NaN
// when a side has none, or one without a finite interval.
func ceilingResolution(base, new *Side) (lo, hi float64) {
	bounds := func(s *Side) (low, high float64) {
		var lows, highs []float64
		for _, r := range s.Runs {
			ci := r.Result.Ceiling
			if ci == nil || !ci.SupportedUsers.Found {
				continue
			}
			su := ci.SupportedUsers
			if !(su.Low > 0 && su.High > su.Low) || math.IsInf(su.High, 0) {
				return math.NaN(), math.NaN()
			}
			lows, highs = append(lows, su.Low), append(highs, su.High)
		}
		if len(lows) == 0 {
			return math.NaN(), math.NaN()
		}
		return mean(lows), mean(highs)
	}
	bl, bh := bounds(base)
	nl, nh := bounds(new)
	return nl/bh - 1, nh/bl - 1
}

// unitOf is what side's step levels or ceiling count: its first run's
// unit (sameModel holds every run to one model).
func unitOf(side *Side) string {
	for _, r := range side.Runs {
		switch res := r.Result; {
		case res.Step != nil:
			return res.Step.UnitName()
		case res.Ceiling != nil:
			return res.Ceiling.UnitName()
		}
	}
	return ""
}

// sameModel refuses runs of the open and the closed model side by side:
// the open model times a request from its arrival's intended start, the
// closed one from its send, so their latencies are not the same measure,
// and a closed run's throughput is the users', an open run's the rate's.
func sameModel(base, new *Side) error {
	first, firstDir := "", ""
	for _, s := range []*Side{base, new} {
		for _, r := range s.Runs {
			m := modelOf(r.Result)
			switch {
			case first == "":
				first, firstDir = m, r.Dir
			case m != first:
				return fmt.Errorf("%s is a result of the %s model and %s of the %s model: compare refuses to set them side by side, "+
					"as the open model (--rate) times requests from when they were due and the closed model (--users) from when they were sent; "+
					"compare open-model results with open-model ones, closed with closed", firstDir, first, r.Dir, m)
			}
		}
	}
	return nil
}

func uniq(xs []int) []int {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

// windows is each run's measured window.
func windows(s *Side) []window {
	var out []window
	for _, r := range s.Runs {
		out = append(out, newWindow(r.Result.Requests, r.Result.Actions, r.Hists))
	}
	return out
}
