package compare

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// Run is one result directory, read.
type Run struct {
	Dir    string
	Result *result.Result
	Hists  *metrics.Snapshot         // the measured window's exact histograms
	Levels map[int]*metrics.Snapshot // step runs: each level's
	id     runID                     // which run it is (distinct.go)
	// mismatched says how histograms.json disagrees with result.json, or
	// is empty: see mismatch.
	mismatched string
}

// Side is the runs of one build: one or more repeats of the same kind.
type Side struct {
	Label string
	Runs  []*Run
}

// Kind is the kind of the side's results.
func (s *Side) Kind() string { return s.Runs[0].Result.Kind }

// Load reads the result directories of one side. Every directory must
// hold a result of the same kind; the error names the first one that
// does not, or that is missing or corrupt.
func Load(label string, dirs []string) (*Side, error) {
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%s: no result directories given", label)
	}
	s := &Side{Label: label}
	for _, dir := range dirs {
		r, err := ReadRun(dir)
		if err != nil {
			return nil, err
		}
		if len(s.Runs) > 0 && r.Result.Kind != s.Kind() {
			return nil, fmt.Errorf("%s: %s is a %q result but %s is a %q result: the repeats of one side must be of one kind",
				label, dir, r.Result.Kind, s.Runs[0].Dir, s.Kind())
		}
		s.Runs = append(s.Runs, r)
	}
	return s, nil
}

// ReadRun reads one result directory with its histograms.
func ReadRun(dir string) (*Run, error) {
	st, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: no such directory", dir)
	}
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s: not a directory (give the directory a run wrote, holding %s)", dir, result.ResultFile)
	}
	res, err := result.Read(dir)
	if err != nil {
		return nil, err
	}
	hists, err := result.ReadHistograms(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: no %s beside %s: the exact histograms are needed to compare percentiles", dir, result.HistogramsFile, result.ResultFile)
		}
		return nil, err
	}
	id, err := idOf(dir, res)
	if err != nil {
		return nil, err
	}
	run := &Run{Dir: filepath.Clean(dir), Result: res, Hists: hists, id: id}
	if res.Kind == result.KindStep {
		if run.Levels, err = result.ReadLevelHistograms(dir); err != nil {
			return nil, err
		}
	}
	run.mismatched = run.mismatch()
	return run, nil
}

// mismatch says which names result.json counts and histograms.json holds
// another number of values for (none: no histogram), in the measured
// window and in each step level, or "" when they agree. They disagree when
// one file was replaced, or a run died between writing the two: the
// percentiles then cover other requests than the counts.
func (r *Run) mismatch() string {
	var bad []string
	n := 0
	check := func(where string, reqs, acts []metrics.Summary, h *metrics.Snapshot) {
		for _, t := range []struct {
			sums  []metrics.Summary
			hists map[string]*metrics.Stat
		}{{reqs, h.Requests}, {acts, h.Actions}} {
			for _, s := range t.sums {
				var got int64
				if st := t.hists[s.Name]; st != nil {
					got = st.Count
				}
				if s.Count == got || s.Count == 0 {
					continue
				}
				n++
				if len(bad) < 3 {
					bad = append(bad, fmt.Sprintf("%s%q: %d in %s, %d in %s", where, s.Name, s.Count, result.ResultFile, got, result.HistogramsFile))
				}
			}
		}
	}
	check("", r.Result.Requests, r.Result.Actions, r.Hists)
	if st := r.Result.Setup; st != nil && r.Hists.Setup != nil {
		check("setup: ", st.Requests, []metrics.Summary{st.Attempts, st.TimeToSetUp}, r.Hists.Setup)
	}
	if st := r.Result.Step; st != nil {
		for _, l := range st.Levels {
			h := r.Levels[l.Users]
			if h == nil {
				h = metrics.NewSnapshot()
			}
			check(fmt.Sprintf("level %d: ", l.Users), l.Requests, l.Actions, h)
		}
	}
	if n == 0 {
		return ""
	}
	more := ""
	if n > len(bad) {
		more = fmt.Sprintf(" and %d more", n-len(bad))
	}
	return fmt.Sprintf("%s and %s disagree on how many requests were made (%s%s): percentiles and counts cover different requests; was one file replaced, or the run stopped between writing the two?",
		result.ResultFile, result.HistogramsFile, strings.Join(bad, "; "), more)
}
