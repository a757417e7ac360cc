package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/health"
	"github.com/headroom-dev/headroom/prom"
	"github.com/headroom-dev/headroom/scenario"
	"github.com/headroom-dev/headroom/serverstats"
)

// CheckSource says which checks a ceiling judges and where they are
// evaluated. NewEvaluation wires them; headroom ceiling and the tests
// build a ceiling's checks the same way with it.
type CheckSource struct {
	// Prometheus is a real Prometheus server's base URL: it evaluates the
	// checks, and scrapes headroom and the targets itself. "": the
	// embedded engine, over a store fed every tick with headroom's own
	// metrics and with Scrape.
	Prometheus string
	// Scrape are the targets' Prometheus endpoints (Common.Scrape).
	Scrape []string
	// Client scrapes them; nil: a plain http.Client.
	Client *http.Client
	// ServerLatency are the latency families read besides
	// serverstats.Known: their samples may appear only with a target's
	// first request, so a check may name them before traffic.
	ServerLatency []serverstats.Family

	// Given, if set, are the checks, as they are: no defaults, no file.
	Given []health.Check
	// Window is the defaults' range window, and what $window stands for
	// in a user's check.
	Window time.Duration
	// Open takes the open model's defaults (health.OpenDefaults).
	Open bool
	// Scenario's checks = [...], if any, replace the defaults.
	Scenario []scenario.CheckSpec
	// Add is a file of checks added to the defaults (or to Scenario's),
	// one named as an earlier one replacing it in its place; Only a file
	// whose checks are the only ones. "": none.
	Add, Only string
	// Warn is told of a scrape target that did not answer before any
	// traffic; nil: not told.
	Warn func(string)
}

// Evaluation is a ceiling's checks, wired: which they are, what evaluates
// them and what they can see.
type Evaluation struct {
	Checks []health.Check
	// Evaluator runs the checks' queries: a prom.Embedded over Store, or
	// a prom.Remote (a real Prometheus, which scrapes by itself).
	Evaluator     health.Evaluator
	EvaluatorName string
	Store         *prom.Store // embedded mode: fed with headroom's own metrics every tick
	// Has tells whether a metric exists, for checks that require one
	// (health.Check.Requires); nil means every check is active.
	Has func(metric string) bool
	// Scraper, embedded mode with Common.Scrape: the run's one scraper of
	// the targets, into Store and the result's server figures, every tick.
	Scraper *prom.Scraper
}

// EvaluationError is NewEvaluation's error. Of names what was given
// wrong: "prometheus" (the URL), "scrape" (a URL), "checks" (a check, its
// file and line named); "" when the Prometheus server did not answer.
type EvaluationError struct {
	Of  string
	Err error
}

func (e *EvaluationError) Error() string { return e.Err.Error() }
func (e *EvaluationError) Unwrap() error { return e.Err }

// NewEvaluation wires a ceiling's checks from src, before any traffic:
// where they run (a real Prometheus, pinged; or the embedded engine over
// a new store, with the scraper of src.Scrape), which they are (see
// CheckSource; a user's check validated, naming its file and line), and,
// with src.Scrape, refuses a user's check naming a metric no endpoint
// exposes. Every error is an *EvaluationError.
func NewEvaluation(ctx context.Context, src CheckSource) (*Evaluation, error) {
	e, exposed, defaultsHas, err := evaluator(ctx, src)
	if err != nil {
		return nil, err
	}
	set, err := checksOf(src, defaultsHas)
	if err == nil && exposed != nil {
		err = set.checkMetrics(exposed, serverstats.WithFamilies(src.ServerLatency), src.Scrape)
	}
	if err != nil {
		return nil, &EvaluationError{Of: "checks", Err: err}
	}
	e.Checks = set.checks
	return e, nil
}

// evaluator is where the checks run and what they can see (Has).
// exposed is what the scrape's targets exposed before any traffic (nil:
// not known). defaultsHas is for the default checks: with nothing scraped
// nor queried no server metric exists, and only the client checks apply;
// else nil, and the server's apply once a target exposes their metric (a
// labelled histogram appears only at its first request).
func evaluator(ctx context.Context, src CheckSource) (e *Evaluation, exposed map[string]bool, defaultsHas func(string) bool, err error) {
	if src.Prometheus != "" {
		remote, err := prom.NewRemote(src.Prometheus)
		if err != nil {
			return nil, nil, nil, &EvaluationError{Of: "prometheus", Err: err}
		}
		if err := remote.Ping(ctx); err != nil {
			return nil, nil, nil, &EvaluationError{Err: err}
		}
		has := func(m string) bool {
			_, err := remote.Query(ctx, "count("+m+")", time.Now())
			return err == nil
		}
		return &Evaluation{Evaluator: remote, EvaluatorName: "prometheus " + Redact(src.Prometheus), Has: has}, nil, nil, nil
	}
	store := prom.NewStore(15 * time.Minute)
	emb := prom.NewEmbedded(store)
	emb.Timeout = time.Second // one tick: a query slower than that fails closed instead of holding the run's clock
	e = &Evaluation{Evaluator: emb, EvaluatorName: "embedded", Store: store}
	if len(src.Scrape) == 0 {
		e.Has = func(string) bool { return false }
		return e, nil, e.Has, nil
	}
	if e.Scraper, err = prom.NewScraper(store, src.Scrape, src.Client); err != nil {
		return nil, nil, nil, &EvaluationError{Of: "scrape", Err: err}
	}
	e.Has = store.Has
	return e, exposedBeforeTraffic(ctx, e.Scraper, src.Warn), nil, nil
}

// exposedBeforeTraffic scrapes every endpoint of sc once and returns the
// metric names they expose, or nil (warn told) when one does not answer:
// then nothing can be said of the names.
func exposedBeforeTraffic(ctx context.Context, sc *prom.Scraper, warn func(string)) map[string]bool {
	ctx, cancel := context.WithTimeout(ctx, prom.ScrapeTimeout+time.Second)
	defer cancel()
	exposed, err := sc.Exposed(ctx)
	if err != nil {
		if warn != nil {
			warn(Redact(err.Error()) + "\n  checks on its metrics will fail closed until it answers")
		}
		return nil
	}
	return exposed
}

// checkSet is the checks of a ceiling run, with where each of the user's
// was written (the defaults are not in from).
type checkSet struct {
	checks []health.Check
	from   map[string]scenario.CheckSpec // by check name
}

// checksOf picks the checks: src.Given; or the defaults, or the
// scenario's checks = [...] (which replace them), with src.Add's added
// (one named as an earlier one replaces it, in its place); or src.Only's
// alone. $window in a user's query becomes src.Window. It validates
// their PromQL, naming the file and line. has is for the defaults (see
// health.Defaults).
func checksOf(src CheckSource, has func(string) bool) (checkSet, error) {
	set := checkSet{from: map[string]scenario.CheckSpec{}}
	var extra []scenario.CheckSpec
	switch {
	case src.Given != nil:
		set.checks = append(set.checks, src.Given...)
		return set, nil
	case src.Only != "":
		specs, err := scenario.LoadChecksFile(context.Background(), src.Only, scenario.Limits{})
		if err != nil {
			return set, err
		}
		extra = specs
	case src.Scenario != nil:
		extra = src.Scenario
	case src.Open:
		set.checks = health.OpenDefaults(src.Window, has)
	default:
		set.checks = health.Defaults(src.Window, has)
	}
	if src.Add != "" {
		specs, err := scenario.LoadChecksFile(context.Background(), src.Add, scenario.Limits{})
		if err != nil {
			return set, err
		}
		extra = append(extra, specs...)
	}
	for _, s := range extra {
		if err := set.add(s, src.Window); err != nil {
			return set, err
		}
	}
	return set, nil
}

// add adds the user's check s, validated, $window expanded: in the place
// of one of the same name, else last.
func (set *checkSet) add(s scenario.CheckSpec, window time.Duration) error {
	if math.IsNaN(s.Threshold) || math.IsInf(s.Threshold, 0) {
		return fmt.Errorf("%s:%d: check %q: threshold %g is not a number\n  hint: give a number such as 0.5", s.Path, s.Line, s.Name, s.Threshold)
	}
	c := health.Check{Name: s.Name, Query: health.ExpandWindow(s.Query, window), Threshold: s.Threshold, Below: s.Below}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("%s:%d: %v\n  hint: test the query in Prometheus's expression browser, or see docs/HEALTH.md", s.Path, s.Line, err)
	}
	set.from[c.Name] = s
	for i := range set.checks {
		if set.checks[i].Name == c.Name {
			set.checks[i] = c
			return nil
		}
	}
	set.checks = append(set.checks, c)
	return nil
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
	names := slices.Sorted(maps.Keys(exposed))
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
			errs = append(errs, unexposed(s, c.Name, m, names, scrape[0]))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w\n  hint: the metrics scraped before the run, from %s, are all a check can see; a labelled metric the target "+
		"shows only after its first request or error can be made to appear by sending one before the run", errors.Join(errs...),
		strings.Join(RedactAll(scrape), ", "))
}

// unexposed says that check name, written at s, reads metric m, which no
// scraped endpoint exposes (names: what they do, the first at first),
// with the names closest to it.
func unexposed(s scenario.CheckSpec, name, m string, names []string, first string) error {
	msg := fmt.Sprintf("%s:%d: check %q: no scraped endpoint exposes %s", s.Path, s.Line, name, m)
	switch near := health.Nearest(m, names, 3); len(near) {
	case 0:
		msg += fmt.Sprintf("\n  no metric they expose has a name close to it (%d names; `curl %s` lists them)", len(names), Redact(first))
	case 1:
		msg += "\n  did you mean " + near[0] + "?"
	default:
		msg += "\n  did you mean " + strings.Join(near[:len(near)-1], ", ") + " or " + near[len(near)-1] + "?"
	}
	return errors.New(msg)
}
