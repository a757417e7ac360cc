package compare

import (
	"slices"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// PhaseRow compares where one request name's time went in one phase
// (result.Phases: dns, connect, tls, wait, receive): the phase's mean and
// p99 over each run's window, a Metric each, judged over the runs as the
// headline figures are (each side's figure the mean of its runs').
type PhaseRow struct {
	Phase string `json:"phase"`
	Name  string `json:"name"` // a request name, or "all requests"
	Mean  Metric `json:"mean_ms"`
	P99   Metric `json:"p99_ms"`
}

// comparePhases compares each phase of every request name that all runs
// of both sides timed in it, and of all requests together; nil when no
// run has phases (results of an older headroom).
func comparePhases(base, new *Side, o Options) []PhaseRow {
	runs := append(append([]*Run(nil), base.Runs...), new.Runs...)
	var out []PhaseRow
	for _, p := range metrics.PhaseNames {
		for _, name := range commonNames(runs, p) {
			row := PhaseRow{Phase: p, Name: name, Mean: Metric{Name: p + " mean, " + name, Unit: "ms"}, P99: Metric{Name: p + " p99, " + name, Unit: "ms"}}
			fill := func(s *Side, mean, p99 *[]float64) {
				for _, r := range s.Runs {
					sum := phaseSummary(r.Result, p, name)
					*mean, *p99 = append(*mean, sum.MeanMs), append(*p99, sum.P99Ms)
				}
			}
			fill(base, &row.Mean.BaseRuns, &row.P99.BaseRuns)
			fill(new, &row.Mean.NewRuns, &row.P99.NewRuns)
			for _, m := range []*Metric{&row.Mean, &row.P99} {
				m.Base, m.New = meanOr(m.BaseRuns), meanOr(m.NewRuns)
				m.judge(o)
			}
			out = append(out, row)
		}
	}
	return out
}

// commonNames are the request names every run timed in phase p, sorted,
// then "all requests"; none when a run timed nothing in it.
func commonNames(runs []*Run, p string) []string {
	var names []string
	for i, r := range runs {
		t := r.Result.Phases[p]
		if t == nil {
			return nil
		}
		var here []string
		for _, s := range t.Requests {
			if i == 0 || slices.Contains(names, s.Name) {
				here = append(here, s.Name)
			}
		}
		names = here
	}
	slices.Sort(names)
	return append(names, "all requests")
}

// phaseSummary is run r's summary of phase p for name ("all requests":
// the phase's totals); commonNames says it has one.
func phaseSummary(r *result.Result, p, name string) metrics.Summary {
	t := r.Phases[p]
	if name == "all requests" {
		return t.Totals
	}
	for _, s := range t.Requests {
		if s.Name == name {
			return s
		}
	}
	return metrics.Summary{}
}
