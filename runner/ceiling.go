package runner

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/control"
	"github.com/headroom-dev/headroom/health"
	"github.com/headroom-dev/headroom/internal/rusage"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
	"github.com/prometheus/prometheus/model/labels"
)

// Ceiling configures a ceiling run: a controller sets the user count from
// the health checks, evaluated every tick, until it can state the
// supported users or MaxDuration runs out.
type Ceiling struct {
	Common
	Checks     []health.Check
	Controller control.Controller
	// Evaluator runs the checks' queries: a health.Embedded over Store, or
	// a health.Remote (a real Prometheus, which scrapes by itself).
	Evaluator     health.Evaluator
	EvaluatorName string
	Store         *health.Store // embedded mode: fed with headroom's own metrics every tick
	// Has tells whether a metric exists, for checks that require one
	// (health.Check.Requires); nil means every check is active.
	Has         func(metric string) bool
	Scraper     *health.Scraper // embedded mode, optional: scrapes Common.Scrape into Store
	MaxDuration time.Duration
	// Settle is how long a user count must hold before its requests count
	// towards the figures at a level (the search's settle time).
	Settle time.Duration
	// Measure, if positive, holds the supported users this long (after
	// settling) once the search has found them, for the figures there.
	// The hold is judged too: an unhealthy hold is said in the result, and
	// a controller that can (control.Holder) takes its answer back.
	Measure time.Duration
	// Open, if set, makes it ceiling --open: the controller's levels are
	// arrival rates on one pool of users (the Controller counts in
	// arrivals per second), and the answer is the supported rate.
	Open     *OpenLevels
	Progress func(CeilingProgress)
}

// CeilingProgress is what a ceiling run reports every tick.
type CeilingProgress struct {
	Elapsed  time.Duration
	Users    int // past setup (the open model: the rate running)
	Started  int // running, setting up or past setup (the open model: the rate asked for)
	Target   int
	Pool     int // the open model: users in the pool
	Results  []health.Result
	Decision string // non-empty when the controller changed course
	Last     metrics.Point
	Estimate control.Estimate
	Warning  string
}

// Run runs the search and returns the result (also written to Out).
func (c *Ceiling) Run(ctx context.Context) (*result.Result, error) {
	if c.Controller == nil || c.Evaluator == nil || len(c.Checks) == 0 {
		return nil, fmt.Errorf("ceiling: a controller, an evaluator and at least one check are needed")
	}
	if c.Prom == nil {
		c.Prom = metrics.NewProm()
	}
	s, err := c.open(ctx, "ceiling")
	if err != nil {
		return nil, err
	}
	res := s.res
	var ld knob = users{s}
	if c.Open != nil {
		r, err := openRates(s, c.Open)
		if err != nil {
			s.stop()
			return nil, err
		}
		ld = r
		defer r.stop()
	}
	ci := &result.Ceiling{Unit: ld.unit(), Evaluator: Redact(c.EvaluatorName), Scrape: RedactAll(c.Scrape), Trustworthy: true}
	res.Ceiling = ci
	for _, ch := range c.Checks {
		ci.Checks = append(ci.Checks, result.CheckDef{Name: ch.Name, Query: ch.Query, Threshold: ch.Threshold, Below: ch.Below, Requires: ch.Requires})
		ci.Bottleneck = append(ci.Bottleneck, result.Bottleneck{Check: ch.Name, FirstAt: -1})
	}
	tr := newTruth(s.think, checksWindow(c.Checks))
	levels := map[int]*held{} // requests per steady user count, after Settle
	heldSince, lastUsers := s.start, -1
	nextSave := s.start.Add(c.Save)
	warned := map[string]bool{}
	self := labels.FromStrings("job", "headroom", "instance", "headroom")
	target := 0
	measuring := false      // the search is done; holding the supported users for Measure
	var hold *control.Level // the measuring hold's judgment so far
	traffic := false        // a request has ended
	cpuMark, cpuAt := rusage.CPU(), time.Now()
	// The server's figures cover the measure hold when there is one, else
	// the whole search.
	from, measureMarked := s.mark(s.start), false
	if c.Scraper != nil && s.watch != nil {
		c.Scraper.Gathered = s.watch.Gathered
		s.scraper = nil // c.Scraper scrapes for both
	}

	ctx = s.ctx // ends with the caller's, or when headroom aborts the run
	ticks(ctx, c.Tick, func(now time.Time) bool {
		el := now.Sub(s.start)
		users := ld.applied() // users past setup (or the rate): the load really applied
		p := s.collect()
		tr.second(now, s.interval.Wakes)
		// A second counts towards a level's figures only when every user
		// started is set up (no logins in flight) and the count has held
		// for the settle time.
		// A degraded second (agents: one lost, its users not yet set up
		// again elsewhere) is neither: its figures and checks are kept
		// out of the search.
		steady := users == ld.started() && !p.Degraded
		if users != lastUsers || !steady {
			heldSince, lastUsers = now, users
			if !steady {
				lastUsers = -1
			}
		} else if now.Sub(heldSince) >= c.Settle+c.Tick {
			h := levels[users]
			if h == nil {
				h = &held{snap: metrics.NewSnapshot()}
				levels[users] = h
			}
			h.snap.Merge(s.interval)
			h.time += s.interval.End.Sub(s.interval.Start)
			if measuring && users == target && !measureMarked {
				from, measureMarked = s.mark(s.interval.Start), true
			}
		}

		// Feed the embedded store, then evaluate.
		var warning string
		if c.Store != nil {
			if mfs, err := c.Prom.Gather(); err == nil {
				c.Store.AppendGathered(mfs, now, self)
			}
			if c.Scraper != nil {
				errs := c.Scraper.Scrape(ctx, now)
				if s.watch != nil {
					s.watch.Attempted(errs)
				}
				for _, err := range errs {
					msg := Redact(err.Error())
					ci.ScrapeErrors = setErr(ci.ScrapeErrors, msg)
					if !warned[msg] {
						warned[msg] = true
						warning = "scrape failed: " + msg + " (checks on its metrics fail closed)"
					}
				}
			}
		}
		results := c.evaluate(ctx, now)
		traffic = traffic || p.Requests > 0
		if !traffic {
			// No request has ended yet: no data is no news, not a firing.
			for i := range results {
				if r := &results[i]; r.Fired && math.IsNaN(r.Value) {
					r.Fired, r.Err = false, "no data yet: no request has ended"
				}
			}
		}
		var fired []string
		pt := result.CheckPoint{T: el.Seconds(), Users: users}
		for _, r := range results {
			var v *float64
			if !math.IsNaN(r.Value) {
				x := r.Value
				v = &x
			}
			pt.Values, pt.Fired = append(pt.Values, v), append(pt.Fired, r.Fired)
			if r.Fired {
				fired = append(fired, r.Name)
			}
		}
		ci.CheckTimeline = append(ci.CheckTimeline, pt)

		var d control.Decision
		obs := control.Observation{Elapsed: el, Users: users, Started: ld.started(), Fired: fired, Pressure: pressure(c.Checks, results)}
		if measuring {
			d = control.Decision{Users: target}
			if h := levels[target]; h != nil && h.time > 0 && users == target && steady && tr.counts(now, users, len(fired) > 0) {
				// Past settling: the hold is judged as a level is.
				hold.Count(obs)
				hold.End = el.Seconds()
				d.Judged = true
				if h.time >= c.Measure {
					d = c.held(ci, hold, obs, tr.level(*hold, h))
					measuring = false // done, or the search goes on
				}
			}
		} else if p.Degraded || !tr.counts(now, users, len(fired) > 0) {
			d = control.Decision{Users: target} // kept out: an agent lost, or the generator's load untrue
		} else {
			d = c.Controller.Decide(obs)
		}
		if est := c.Controller.Estimate(); d.Done && est.Found && c.Measure > 0 && !measuring && (hold == nil || hold.Users != int(est.Value)) {
			// Hold the answer long enough for a per-request table worth
			// reading, and judge it again meanwhile.
			measuring, d.Done = true, false
			d.Users = int(est.Value)
			hold = &control.Level{Users: d.Users, Start: el.Seconds(), Fired: map[string]int{}, SetUp: d.Users}
			delete(levels, d.Users) // its figures are the hold's
			d.Reason += fmt.Sprintf("; hold %s for %v to measure them (judged again)", result.Amount(float64(d.Users), ci.Unit), c.Measure)
		}
		if d.Judged {
			bottleneck(ci.Bottleneck, results, el)
		}
		if d.Reason != "" {
			ci.Decisions = append(ci.Decisions, result.Decision{T: el.Seconds(), Users: users, Target: d.Users, Reason: d.Reason})
		}
		target = d.Users
		ld.set(d.Users)

		// Generator self-check over the last ten seconds: its CPU. Its
		// lateness and bunching are judged every second (truth).
		if now.Sub(cpuAt) >= 10*time.Second {
			cpu := rusage.CPU()
			share := (cpu - cpuMark).Seconds() / now.Sub(cpuAt).Seconds()
			if share > 0.9*float64(res.Generator.GOMAXPROCS) {
				tr.cpu = fmt.Sprintf("at %s headroom used %.0f%% of %d cores: the generator, not the target, may have been the limit",
					result.Amount(float64(users), ci.Unit), 100*share, res.Generator.GOMAXPROCS)
			}
			cpuMark, cpuAt = cpu, now
		}

		if c.Progress != nil {
			c.Progress(CeilingProgress{Elapsed: el, Users: users, Started: obs.Started, Target: target, Pool: s.eng.Users(), Results: results, Decision: d.Reason,
				Last: p, Estimate: c.Controller.Estimate(), Warning: warning})
		}
		if c.Scraper == nil {
			s.scrape(ctx, now) // with --prometheus: for the result only
		}
		if !now.Before(nextSave) {
			c.finish(s, levels, tr, result.Running)
			s.server(from, s.mark(now))
			s.checkpoint(func(w result.Writer, dir string) error { return w.Write(dir, res, nil) })
			nextSave = nextSave.Add(c.Save)
		}
		if d.Done {
			return false
		}
		if c.MaxDuration > 0 && el >= c.MaxDuration {
			ci.Decisions = append(ci.Decisions, result.Decision{T: el.Seconds(), Users: users, Target: users,
				Reason: fmt.Sprintf("--max-duration %v reached", c.MaxDuration)})
			return false
		}
		return true
	})
	status, cause := s.outcome()
	s.stop()
	snap := c.finish(s, levels, tr, status)
	s.noteStop(cause)
	if status == result.Completed {
		if why := s.nothingMeasured(s.all, "in the whole search"); why != "" {
			s.markFailed(why)
		}
	}
	s.server(from, s.mark(time.Now()))
	return res, s.done(cause, s.save(func(w result.Writer, dir string) error { return w.Write(dir, res, withSetup(snap, s.all)) }))
}

// evaluate evaluates the active checks; a check whose required metric no
// target exposes yet is inactive: not firing, with the reason.
func (c *Ceiling) evaluate(ctx context.Context, now time.Time) []health.Result {
	return health.EvaluateActive(ctx, c.Evaluator, c.Checks, c.Has, now)
}

// pressure is the worst check's value relative to its threshold (1 = at
// the threshold), over the checks that have a value; 0 when none has.
func pressure(checks []health.Check, results []health.Result) float64 {
	worst := 0.0
	for i, r := range results {
		v, t := r.Value, checks[i].Threshold
		if math.IsNaN(v) || t == 0 {
			continue
		}
		p := v / t
		if checks[i].Below {
			if v <= 0 {
				continue
			}
			p = t / v
		}
		worst = max(worst, p)
	}
	return worst
}

// bottleneck counts one judged evaluation: which checks fired, and which first.
func bottleneck(bs []result.Bottleneck, results []health.Result, el time.Duration) {
	first := true
	for _, b := range bs {
		if b.FirstAt >= 0 {
			first = false
		}
	}
	for i, r := range results {
		b := &bs[i]
		b.Evaluations++
		if r.Inactive {
			b.Inactive++
		}
		if !r.Fired {
			continue
		}
		b.Fired++
		if r.Err != "" {
			b.Failed++
			b.LastError = r.Err
		}
		if b.FirstAt < 0 {
			b.FirstAt, b.First = el.Seconds(), first
		}
	}
}

func setErr(m map[string]string, msg string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	key := msg
	for _, f := range strings.Fields(msg) {
		if strings.HasPrefix(f, "http://") || strings.HasPrefix(f, "https://") {
			key = strings.TrimSuffix(f, ":")
			break
		}
	}
	m[key] = msg
	return m
}

// finish fills the result: the estimate, the figures at the supported
// user count, the levels. It returns the snapshot the figures came from.
func (c *Ceiling) finish(s *session, levels map[int]*held, tr *truth, status string) *metrics.Snapshot {
	res, ci := s.res, s.res.Ceiling
	res.Status, res.EndedAt = status, time.Now()
	est := c.Controller.Estimate()
	ci.SupportedUsers = result.Supported{Value: est.Value, Low: est.Low, High: est.High, Method: est.Method, Found: est.Found, Why: est.Why, Drift: est.Drift}
	ci.Controller = est.Method
	ci.SearchSeconds = res.EndedAt.Sub(res.StartedAt).Seconds()
	ci.Levels = ci.Levels[:0]
	for _, l := range c.Controller.Levels() {
		ci.Levels = append(ci.Levels, tr.level(l, levels[l.Users]))
	}
	tr.drift(ci)
	ci.Untrusted = strings.Join(slices.DeleteFunc([]string{tr.cpu, tr.untrusted(ci)}, func(s string) bool { return s == "" }), "; ")
	ci.Trustworthy = ci.Untrusted == ""

	// Figures at the supported users: that level only, as held (after
	// settling) during the search or the measuring hold.
	lo, hi := int(math.Round(est.Value)), int(math.Round(est.Value))
	snap := metrics.NewSnapshot()
	var keys []int
	var win time.Duration
	for users, h := range levels {
		if users >= lo && users <= hi && users > 0 {
			snap.Merge(h.snap)
			win += h.time
			keys = append(keys, users)
		}
	}
	sort.Ints(keys)
	if len(keys) > 0 {
		ci.StatsWindow = fmt.Sprintf("requests made while %s %s were held (after settling), %.0f s in all",
			strings.Trim(fmt.Sprint(keys), "[]"), ci.UnitName(), win.Seconds())
	} else {
		ci.StatsWindow = fmt.Sprintf("no steady level at the supported %s: figures are empty", ci.UnitName())
	}
	scratch := metrics.NewStat()
	res.Totals = snap.Total(metrics.Request, scratch).Summarize("all requests", win)
	res.Requests = snap.Summaries(metrics.Request, win)
	res.Actions = snap.Summaries(metrics.Action, win)
	res.Connected = result.ConnectedOf(snap, win)
	ci.ThroughputRPS = res.Totals.RPS
	if o := c.Open; o != nil {
		peak := 0
		for _, l := range ci.Levels {
			peak = max(peak, l.Users)
		}
		res.Config.Rate = o.config(est.Value, float64(peak))
		res.Arrivals = result.ArrivalsOf(snap, win, est.Value)
		res.ServiceTimes = result.ServiceTimesOf(snap, win)
	} else {
		res.Omission = result.OmissionOf(snap, meanThink(s.c.Scenario))
		res.Config.Users = int(est.Value)
	}
	res.Notes = nil
	if note := s.generator(snap); note != "" {
		res.Notes = append(res.Notes, note)
	}
	if note := s.namesNote(); note != "" {
		res.Notes = append(res.Notes, note)
	}
	if !ci.Trustworthy {
		res.Notes = append(res.Notes, "the ceiling is not trustworthy: "+ci.Untrusted)
	}
	if h := ci.Hold; h != nil && h.Verdict == "unhealthy" && h.Users == int(est.Value) {
		res.Notes = append(res.Notes, fmt.Sprintf("the measuring hold at the supported %s was unhealthy (%d of %d evaluations): the answer did not hold up; read it as an upper bound",
			result.Amount(float64(h.Users), ci.Unit), h.Unhealthy, h.Evaluations))
	}
	res.Setup = setupOf(s.all, s.eng.Began(), res.EndedAt.Sub(res.StartedAt))
	return snap
}

// held closes the measuring hold with its verdict (a majority, as a
// level's): the controller takes it if it can (control.Holder); else an
// unhealthy hold is only said in the result.
func (c *Ceiling) held(ci *result.Ceiling, h *control.Level, o control.Observation, r result.Level) control.Decision {
	h.Verdict = "healthy"
	if 2*h.Unhealthy > h.Evaluations {
		h.Verdict = "unhealthy"
	}
	r.Verdict = h.Verdict
	ci.Hold = &r
	if hc, ok := c.Controller.(control.Holder); ok {
		return hc.Held(*h, o)
	}
	reason := fmt.Sprintf("the hold at %s was %s (%d of %d evaluations unhealthy)", result.Amount(float64(h.Users), ci.Unit), h.Verdict, h.Unhealthy, h.Evaluations)
	return control.Decision{Users: h.Users, Done: true, Reason: reason}
}

// held is what was recorded while one user count was held.
type held struct {
	snap *metrics.Snapshot
	time time.Duration
}
