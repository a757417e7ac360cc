package compare

import (
	"fmt"
	"strings"

	"github.com/headroom-dev/headroom/metrics"
)

// compareSetup compares the users' setups of the two sides over their
// whole runs (result.Setup: a login, a sign-up, loading the first page),
// which every other span leaves out: the regression of a release that
// made logins slower shows here and nowhere else. Its requests and its
// two actions, "(setup)" (each attempt) and "(time to set up)" (from a
// user's first attempt to ready), are compared as a window's are. nil
// with a note when a run lacks the setup histograms (a result of a
// headroom before them); nil without one when no run has a setup.
func compareSetup(base, new *Side, o Options) (*Span, string) {
	bw, bmiss, bany := setupWindows(base)
	nw, nmiss, nany := setupWindows(new)
	switch {
	case !bany && !nany:
		return nil, ""
	case len(bmiss)+len(nmiss) > 0:
		return nil, fmt.Sprintf("setups not compared: no setup histograms in %s (results of a headroom before they were kept, or runs whose users had no setup)",
			strings.Join(append(bmiss, nmiss...), ", "))
	}
	sp := compareSpan(bw, nw, o)
	sp.Throughput.Name = "setup requests/s"
	sp.MixMean.Name = "setup: mean latency, common mix"
	sp.MixP99.Name = "setup: p99 latency, common mix"
	sp.MixErrors.Name = "setup: errors, common mix"
	return &sp, ""
}

// setupWindows is each run's setups as a window, the runs that have none
// (missing), and whether any run of s had setups.
func setupWindows(s *Side) (ws []window, missing []string, any bool) {
	for _, r := range s.Runs {
		st := r.Result.Setup
		if st == nil {
			missing = append(missing, r.Dir)
			continue
		}
		any = true
		if r.Hists == nil || r.Hists.Setup == nil {
			missing = append(missing, r.Dir)
			continue
		}
		ws = append(ws, newWindow(st.Requests, []metrics.Summary{st.Attempts, st.TimeToSetUp}, r.Hists.Setup))
	}
	if !any {
		return nil, nil, false
	}
	return ws, missing, true
}

// setupRate compares how fast the runs set their users up, each run one
// value (result.Setup.PerS); nil unless every run of both sides has one.
func setupRate(base, new *Side, o Options) *Metric {
	m := &Metric{Name: "users set up a second", Unit: "/s", HigherIsBetter: true}
	for _, side := range []struct {
		s    *Side
		runs *[]float64
		avg  *float64
	}{{base, &m.BaseRuns, &m.Base}, {new, &m.NewRuns, &m.New}} {
		for _, r := range side.s.Runs {
			st := r.Result.Setup
			if st == nil || st.PerS <= 0 {
				return nil
			}
			*side.runs = append(*side.runs, st.PerS)
		}
		*side.avg = meanOr(*side.runs)
	}
	m.judge(o)
	return m
}
