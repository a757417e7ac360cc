package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/health"
	"github.com/headroom-dev/headroom/prom"
	"github.com/headroom-dev/headroom/runner"
	"github.com/headroom-dev/headroom/scenario"
	"github.com/headroom-dev/headroom/serverstats"
)

// checkSet is the checks of a ceiling run, with where each of the user's
// was written (the defaults are not in from).
type checkSet struct {
	checks []health.Check
	from   map[string]scenario.CheckSpec // by check name
}

// checksFor picks the checks: the defaults, or the scenario's
// checks = [...] (which replace them), with --checks FILE's added (one
// named as an earlier one replaces it, in its place); or --only-checks
// FILE's alone. $window in a user's query becomes --window. It validates
// their PromQL, naming the file and line. has is for the defaults (see
// health.Defaults).
func checksFor(f ceilingFlags, sc *scenario.Scenario, has func(string) bool) (checkSet, error) {
	set := checkSet{from: map[string]scenario.CheckSpec{}}
	var extra []scenario.CheckSpec
	switch {
	case f.onlyChecks != "":
		specs, err := scenario.LoadChecksFile(context.Background(), f.onlyChecks, scenario.Limits{})
		if err != nil {
			return set, err
		}
		extra = specs
	case sc.Checks != nil:
		extra = sc.Checks
	case f.open:
		set.checks = health.OpenDefaults(f.window, has)
	default:
		set.checks = health.Defaults(f.window, has)
	}
	if f.checks != "" {
		specs, err := scenario.LoadChecksFile(context.Background(), f.checks, scenario.Limits{})
		if err != nil {
			return set, err
		}
		extra = append(extra, specs...)
	}
	for _, s := range extra {
		if !finite(s.Threshold) {
			return set, fmt.Errorf("%s:%d: check %q: threshold %g is not a number\n  hint: give a number such as 0.5", s.Path, s.Line, s.Name, s.Threshold)
		}
		c := health.Check{Name: s.Name, Query: health.ExpandWindow(s.Query, f.window), Threshold: s.Threshold, Below: s.Below}
		if err := c.Validate(); err != nil {
			return set, fmt.Errorf("%s:%d: %v\n  hint: test the query in Prometheus's expression browser, or see docs/HEALTH.md", s.Path, s.Line, err)
		}
		set.from[c.Name] = s
		if i := indexOfCheck(set.checks, c.Name); i >= 0 {
			set.checks[i] = c
		} else {
			set.checks = append(set.checks, c)
		}
	}
	return set, nil
}

func indexOfCheck(cs []health.Check, name string) int {
	for i, c := range cs {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// checkMetrics refuses, before any traffic, a user's check that names a
// metric no scraped endpoint exposes (exposed: prom.Scraper.Exposed),
// with the nearest names they do expose. Headroom's own metrics
// (health.Synthetic) pass, and so do the samples of the latency families
// headroom reads (families): a target may show those only once it has
// served a request. The defaults are not checked: one whose metric is
// missing is inactive.
func (set checkSet) checkMetrics(exposed map[string]bool, families []serverstats.Family, scrape []string) error {
	late := map[string]bool{}
	for _, f := range families {
		for _, n := range f.Names() {
			late[n] = true
		}
	}
	var names []string
	for n := range exposed {
		names = append(names, n)
	}
	sort.Strings(names)
	var errs []error
	for _, c := range set.checks {
		s, ok := set.from[c.Name]
		if !ok {
			continue
		}
		for _, m := range c.Metrics() {
			if exposed[m] || late[m] || health.Synthetic(m) {
				continue
			}
			msg := fmt.Sprintf("%s:%d: check %q: no scraped endpoint exposes %s", s.Path, s.Line, c.Name, m)
			switch near := health.Nearest(m, names, 3); len(near) {
			case 0:
				msg += fmt.Sprintf("\n  no metric they expose has a name close to it (%d names; `curl %s` lists them)", len(names), runner.Redact(scrape[0]))
			case 1:
				msg += "\n  did you mean " + near[0] + "?"
			default:
				msg += "\n  did you mean " + strings.Join(near[:len(near)-1], ", ") + " or " + near[len(near)-1] + "?"
			}
			errs = append(errs, errors.New(msg))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w\n  hint: the metrics scraped before the run, from %s, are all a check can see; a labelled metric the target "+
		"shows only after its first request or error can be made to appear by sending one before the run", errors.Join(errs...),
		strings.Join(runner.RedactAll(scrape), ", "))
}

// printChecks lists the checks of a run as it starts.
func printChecks(w io.Writer, checks []health.Check) {
	for _, ch := range checks {
		op := ">"
		if ch.Below {
			op = "<"
		}
		when := ""
		if len(ch.Requires) > 0 {
			when = " (once a target exposes " + strings.Join(ch.Requires, " or ") + ")"
		}
		fmt.Fprintf(w, "  %-28s fires when %s %g%s\n", ch.Name, op, ch.Threshold, when)
	}
}

// exposedBeforeTraffic scrapes every --scrape endpoint once and returns
// the metric names they expose, or nil (with a warning) when one does not
// answer: then nothing can be said of the names.
func exposedBeforeTraffic(ctx context.Context, env Env, sc *prom.Scraper) map[string]bool {
	ctx, cancel := context.WithTimeout(ctx, prom.ScrapeTimeout+time.Second)
	defer cancel()
	exposed, err := sc.Exposed(ctx)
	if err != nil {
		fmt.Fprintf(env.Stderr, "warning: %s\n  checks on its metrics will fail closed until it answers\n", runner.Redact(err.Error()))
		return nil
	}
	return exposed
}
