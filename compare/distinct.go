package compare

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/headroom-dev/headroom/result"
)

// runID tells whether two result directories hold the same run. Runs
// not read from a directory (built in code) have none and are not
// checked.
type runID struct {
	path     string   // absolute, symbolic links resolved
	sum      [32]byte // of result.json
	started  time.Time
	host     string
	scenario string
}

// idOf identifies the run read from dir.
func idOf(dir string, r *result.Result) (runID, error) {
	id := runID{started: r.StartedAt, host: r.Generator.Host, scenario: r.Config.ScenarioHash}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return id, fmt.Errorf("%s: %w", dir, err)
	}
	if id.path, err = filepath.EvalSymlinks(abs); err != nil {
		return id, fmt.Errorf("%s: %w", dir, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, result.ResultFile))
	if err != nil {
		return id, err
	}
	id.sum = sha256.Sum256(b)
	return id, nil
}

// same says why two runs are one, or "" when they are not: the same
// directory, a copy of it (the same result.json), or the same run however
// its files differ (a checkpoint of it, or a copy rewritten): the same
// start, to the nanosecond, on the same host with the same scenario.
func same(a, b runID) string {
	switch {
	case a.path == "" || b.path == "":
		return ""
	case a.path == b.path:
		return "the same directory"
	case a.sum == b.sum:
		return "the same result.json"
	case !a.started.IsZero() && a.started.Equal(b.started) && a.host == b.host && a.scenario == b.scenario:
		return fmt.Sprintf("the run started at %s on %q", a.started.Format(time.RFC3339Nano), a.host)
	}
	return ""
}

// distinct refuses a run given twice on one side, or on both sides unless
// the two sides are the same runs: a repeat counted twice makes the
// spread between repeats look smaller than it is, and a run on both sides
// pulls them together. The same runs on both sides (A --vs A) are allowed,
// with a note: every change is zero by construction, which checks headroom
// rather than a build.
func distinct(base, new *Side) (note string, err error) {
	for _, s := range []*Side{base, new} {
		for i, a := range s.Runs {
			for _, b := range s.Runs[:i] {
				if why := same(b.id, a.id); why != "" {
					return "", fmt.Errorf("%s: %s and %s are one run (%s): counted twice it would pass for two repeats and narrow the interval; give each run once",
						s.Label, b.Dir, a.Dir, why)
				}
			}
		}
	}
	shared := 0
	var first error
	for _, a := range base.Runs {
		for _, b := range new.Runs {
			if why := same(a.id, b.id); why != "" {
				shared++
				if first == nil {
					first = fmt.Errorf("%s (%s) and %s (%s) are one run (%s): a run cannot stand for both builds; remove it from one side, or give the same runs on both sides to compare them with themselves",
						a.Dir, base.Label, b.Dir, new.Label, why)
				}
			}
		}
	}
	switch {
	case shared == 0:
		return "", nil
	case shared == len(base.Runs) && shared == len(new.Runs):
		return fmt.Sprintf("%s and %s are the same %d run(s): every change is zero by construction, so this checks headroom, not a build", base.Label, new.Label, shared), nil
	}
	return "", first
}
