package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/runner"
	"github.com/headroom-dev/headroom/scenario"
)

// RepeatsFile is what ceiling --repeat writes beside its searches' dirs.
const RepeatsFile = "repeats.json"

// repeats is ceiling --repeat's account of its searches: each one's answer
// and the range they span together, with the drift from first to last.
type repeats struct {
	Unit     string             `json:"unit"`
	Searches []result.Supported `json:"searches"`
	Dirs     []string           `json:"dirs"`
	// Value is the median of the answers found; [Low, High) spans every
	// search's interval (High 0: one search found no unhealthy level).
	Value float64 `json:"value"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
	// Drift is the last answer over the first, less one.
	Drift float64 `json:"drift"`
	Why   string  `json:"why,omitempty"`
}

// repeatSearch runs the ceiling search f.repeat times, one after another on
// the same target, each into its own directory under out (repeat-1, ...),
// and says what the searches claim together: a server whose ceiling moves
// between searches (state its users leave, caches, a fresh server warming)
// gets the range it moved in, not one search's interval.
func (f *ceilingFlags) repeatSearch(ctx context.Context, env Env, args []string, sc *scenario.Scenario, target *url.URL, out *outDir, open *runner.OpenLevels) int {
	defer out.undo()
	code := ExitOK
	rp := repeats{Unit: result.UnitUsers}
	if open != nil {
		rp.Unit = result.UnitRate
	}
	for k := 1; k <= f.repeat && ctx.Err() == nil; k++ {
		dir := filepath.Join(out.path, fmt.Sprintf("repeat-%d", k))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fail(env, ExitError, "cannot create %s: %v", dir, err)
		}
		fmt.Fprintf(env.Stderr, "\nsearch %d of %d (--repeat), into %s\n", k, f.repeat, dir)
		c := f.run(ctx, env, args, sc, target, &outDir{path: dir, undo: func() {}}, open)
		code = max(code, c)
		res, err := result.Read(dir)
		if err != nil || res.Ceiling == nil {
			fmt.Fprintf(env.Stderr, "headroom: search %d left no result to repeat on (%v): stopping the repeats\n", k, err)
			break
		}
		rp.Searches, rp.Dirs = append(rp.Searches, res.Ceiling.SupportedUsers), append(rp.Dirs, dir)
	}
	if len(rp.Searches) == 0 {
		return max(code, ExitError)
	}
	rp.combine()
	fmt.Fprintf(env.Stdout, "\n%s\n", rp.text())
	b, _ := json.MarshalIndent(rp, "", "  ")
	if err := os.WriteFile(filepath.Join(out.path, RepeatsFile), append(b, '\n'), 0o644); err != nil {
		return fail(env, ExitError, "cannot write %s: %v", RepeatsFile, err)
	}
	fmt.Fprintf(env.Stdout, "repeats: %s\n", filepath.Join(out.path, RepeatsFile))
	return code
}

// combine works out the median, the span and the drift of the searches.
func (rp *repeats) combine() {
	var found []float64
	rp.Low, rp.High = math.Inf(1), 0
	open := false // a search found no unhealthy level: no upper bound
	for _, s := range rp.Searches {
		if s.Found {
			found = append(found, s.Value)
		}
		rp.Low = math.Min(rp.Low, s.Low)
		if s.High == 0 {
			open = true
		}
		rp.High = math.Max(rp.High, s.High)
	}
	if open {
		rp.High = 0
	}
	if len(found) == 0 {
		rp.Low, rp.Why = 0, "no search found its ceiling"
		return
	}
	slices.Sort(found)
	rp.Value = (found[(len(found)-1)/2] + found[len(found)/2]) / 2
	first, last := rp.Searches[0], rp.Searches[len(rp.Searches)-1]
	if first.Value > 0 {
		rp.Drift = last.Value/first.Value - 1
	}
	var outside []string
	for i, s := range rp.Searches[1:] {
		p := rp.Searches[i]
		if s.Found && p.Found && (s.Value < p.Low || (p.High > 0 && s.Value >= p.High)) {
			outside = append(outside, fmt.Sprintf("search %d's answer %g lies outside search %d's [%g, %g)", i+2, s.Value, i+1, p.Low, p.High))
		}
	}
	if len(outside) > 0 {
		rp.Why = strings.Join(outside, "; ") + ": the target's capacity moved between searches (state the searches' users left, caches, a fresh server warming up: --warm-up sets users up before a search); the range spans them"
	}
}

// text is the repeats in words, e.g. "Repeats: 220 [209, 262), 286 [271,
// 295): 253 users, in [209, 295) together; the answer moved +30.0% from
// the first search to the last".
func (rp *repeats) text() string {
	var each []string
	for _, s := range rp.Searches {
		t := fmt.Sprintf("%g [%g, %s)", s.Value, s.Low, bound(s.High))
		if !s.Found {
			t += " (not found)"
		}
		each = append(each, t)
	}
	s := fmt.Sprintf("Repeats: %s: %s, in [%g, %s) together", strings.Join(each, ", "), result.Amount(rp.Value, rp.Unit), rp.Low, bound(rp.High))
	if len(rp.Searches) > 1 {
		s += fmt.Sprintf("; the answer moved %+.1f%% from the first search to the last", 100*rp.Drift)
	}
	if rp.Why != "" {
		s += "; " + rp.Why
	}
	return s
}

func bound(h float64) string {
	if h == 0 {
		return "?"
	}
	return fmt.Sprintf("%g", h)
}
