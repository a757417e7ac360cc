package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/analysis"
	"github.com/headroom-dev/headroom/control"
	"github.com/headroom-dev/headroom/health"
	"github.com/headroom-dev/headroom/internal/rusage"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/serverstats"
	"github.com/prometheus/prometheus/model/labels"
)

// Ceiling configures a ceiling run: a controller sets the user count from
// the health checks, evaluated every tick, until it can state the
// supported users or MaxDuration runs out.
type Ceiling struct {
	Common
	// Evaluation is the checks and what evaluates them (NewEvaluation).
	// Its Scraper, if any, is the run's one scraper of Common.Scrape.
	Evaluation
	Controller  control.Controller
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
	Open *OpenLevels
}

// Run runs the search and returns the result (also written to Out).
func (c *Ceiling) Run(ctx context.Context) (*result.Result, error) {
	if c.Controller == nil || c.Evaluator == nil || len(c.Checks) == 0 {
		return nil, fmt.Errorf("ceiling: a controller, an evaluator and at least one check are needed")
	}
	if c.Prom == nil {
		c.Prom = metrics.NewProm()
	}
	c.scraper = c.Scraper // the store's scrape is the result's too
	s, err := c.open(ctx, "ceiling")
	if err != nil {
		return nil, err
	}
	ld, stopKnob, err := knobOf(s, c.Open)
	if err != nil {
		return nil, err
	}
	defer stopKnob()
	return s.drive(newCeilingRun(c, s, ld), c.Tick)
}

func (r *ceilingRun) onTick(now time.Time) bool { return r.tick(r.s.ctx, now) }

func (r *ceilingRun) stopping(_ time.Time, status string) string { return status }

// finish closes the search: its answer, levels, hold and truth.
func (r *ceilingRun) finish(status string) ending {
	s, res := r.s, r.s.res
	snap := r.finishSearch(status)
	return ending{
		phases: s.levelPhases(res),
		failed: func() string {
			if status != result.Completed {
				return ""
			}
			return s.nothingMeasured(s.all, "in the whole search")
		},
		server: func() { s.server(r.from, s.mark(time.Now())) },
		write:  func(w result.Writer, dir string) error { return w.Write(dir, res, withSetup(snap, s.all)) },
	}
}

// ceilingRun is one ceiling search in progress: what its ticks share.
type ceilingRun struct {
	c  *Ceiling
	s  *session
	ld knob // users, or the open model's rate
	ci *result.Ceiling
	tr *truth

	levels       map[int]*levelFigures // requests per steady user count, after Settle
	heldSince    time.Time             // since when lastUsers have held, steady
	lastUsers    int                   // -1: not steady
	target       int                   // what the controller last asked for
	trafficAt    time.Duration         // when a request first ended (elapsed); -1: none yet
	scrapeFailed bool                  // a scrape of the target timed out this second: its checks are unknown, not fired
	warned       map[string]bool
	nextSave     time.Time

	measuring bool           // the search is done; holding the supported users for Measure
	holding   bool           // the users past setup wait (a warm-up: control.Decision.Hold)
	hold      *control.Level // the measuring hold's judgment so far
	// from is where the server's figures begin: the measuring hold's
	// start once it has one (marked), else the search's.
	from   *serverstats.Mark
	marked bool

	cpuMark time.Duration // the generator's CPU at cpuAt, for its self-check
	cpuAt   time.Time
}

func newCeilingRun(c *Ceiling, s *session, ld knob) *ceilingRun {
	ci := &result.Ceiling{Unit: ld.unit(), Evaluator: Redact(c.EvaluatorName), Scrape: RedactAll(c.Scrape), Trustworthy: true}
	s.res.Ceiling = ci
	for _, ch := range c.Checks {
		ci.Checks = append(ci.Checks, result.CheckDef{Name: ch.Name, Query: ch.Query, Threshold: ch.Threshold, Below: ch.Below, Requires: ch.Requires})
		ci.Bottleneck = append(ci.Bottleneck, result.Bottleneck{Check: ch.Name, FirstAt: -1})
	}
	tr := newTruth(s.think, checksWindow(c.Checks))
	tr.latency = latencyChecks(c.Checks)
	return &ceilingRun{c: c, s: s, ld: ld, ci: ci, tr: tr, trafficAt: -1,
		levels: map[int]*levelFigures{}, heldSince: s.start, lastUsers: -1, warned: map[string]bool{}, nextSave: s.start.Add(c.Save),
		from: s.mark(s.start), cpuMark: rusage.CPU(), cpuAt: time.Now()}
}

// tick is one second of the search: count it, evaluate the checks, let
// the controller decide, check the generator, report; false ends it.
func (r *ceilingRun) tick(ctx context.Context, now time.Time) bool {
	el := now.Sub(r.s.start)
	users := r.ld.applied() // users past setup (or the rate): the load really applied
	t := r.s.collect()
	p := t.Last
	r.tr.second(now, r.s.interval.Wakes, r.s.interval.Phases[metrics.PhaseUnread])
	steady := r.account(now, users, p)
	warning := r.feed(ctx, now)
	results := r.evaluate(ctx, now, el, users, p)
	obs := control.Observation{Elapsed: el, Users: users, Started: r.ld.started(), Fired: named(results, func(r health.Result) bool { return r.Fired }),
		Unknown:  named(results, func(r health.Result) bool { return r.Unknown }),
		Pressure: pressure(r.c.Checks, results)}
	d := r.measure(el, r.decide(now, obs, steady, p.Degraded))
	if d.Judged {
		bottleneck(r.ci.Bottleneck, results, el)
	}
	if d.Reason != "" {
		r.ci.Decisions = append(r.ci.Decisions, result.Decision{T: el.Seconds(), Users: users, Target: d.Users, Reason: d.Reason})
	}
	r.target = d.Users
	if d.Hold != r.holding {
		r.holding = d.Hold
		r.s.eng.Hold(d.Hold)
	}
	r.ld.set(d.Users)
	r.selfCheck(now, users)
	if r.c.OnTick != nil {
		r.fillLevels() // the live page shows them
		t.Elapsed, t.Want, t.Users = el, r.target, r.s.eng.Users()
		t.Ceiling = &CeilingTick{Applied: users, Started: obs.Started, Results: results, Decision: d.Reason, Estimate: r.c.Controller.Estimate(), Warning: warning}
		r.s.publish(t)
	}
	if r.c.Scraper == nil {
		r.s.scrape(ctx, now) // with a real Prometheus: for the result only, in the background
	}
	r.checkpoint(now)
	switch {
	case d.Done:
		return false
	case r.c.MaxDuration > 0 && el >= r.c.MaxDuration:
		r.ci.Decisions = append(r.ci.Decisions, result.Decision{T: el.Seconds(), Users: users, Target: users,
			Reason: fmt.Sprintf("--max-duration %v reached", r.c.MaxDuration)})
		return false
	}
	return true
}

// account adds the second's requests to its level's figures when it is
// steady: every user started is set up (no logins in flight), no agent
// is lost (a degraded second's figures and checks are kept out of the
// search), and the count has held for the settle time. It says whether
// the second was steady.
func (r *ceilingRun) account(now time.Time, users int, p metrics.Point) bool {
	steady := users == r.ld.started() && !p.Degraded
	switch {
	case !steady:
		r.heldSince, r.lastUsers = now, -1
	case users != r.lastUsers:
		r.heldSince, r.lastUsers = now, users
	case now.Sub(r.heldSince) >= r.c.Settle+r.c.Tick:
		h := r.levels[users]
		if h == nil {
			h = &levelFigures{snap: metrics.NewSnapshot()}
			r.levels[users] = h
		}
		h.snap.Merge(r.s.interval)
		h.time += r.s.interval.End.Sub(r.s.interval.Start)
		if r.measuring && users == r.target && !r.marked {
			r.from, r.marked = r.s.mark(r.s.interval.Start), true
		}
	}
	return steady
}

// feed gives the embedded store headroom's own metrics and the scrape of
// the system under test; it returns a warning for a scrape that failed
// in a way not seen before.
func (r *ceilingRun) feed(ctx context.Context, now time.Time) (warning string) {
	c := r.c
	if c.Store == nil {
		return ""
	}
	if mfs, err := c.Prom.Gather(); err == nil {
		c.Store.AppendGathered(mfs, now, self)
	}
	if c.Scraper == nil {
		return ""
	}
	errs := r.s.scraper.Scrape(ctx, now) // c.Scraper: into the store, and the result's server figures

	r.scrapeFailed = slices.ContainsFunc(errs, timedOut)
	r.s.attempted(errs)
	for _, err := range errs {
		msg := Redact(err.Error())
		r.ci.ScrapeErrors = setErr(r.ci.ScrapeErrors, msg)
		if !r.warned[msg] {
			r.warned[msg] = true
			warning = "scrape failed: " + msg + " (checks on its metrics are unknown while its scrapes time out, fire while it refuses them)"
		}
	}
	return warning
}

// self labels headroom's own series in the embedded store.
var self = labels.FromStrings("job", "headroom", "instance", "headroom")

// evaluate evaluates the checks and adds them to the check timeline.
// Before any request has ended, no data is no news, not a firing; nor is
// it, for a check on headroom's own series, while the first requests are
// younger than the check's window and a second (rate() needs two samples
// in its window; the store takes one a second). Later, no data fires:
// requests that stopped ending are news, and so is a target's metrics
// missing (a scrape refused fails closed; one timed out is unknown).
func (r *ceilingRun) evaluate(ctx context.Context, now time.Time, el time.Duration, users int, p metrics.Point) []health.Result {
	results := r.c.evaluate(ctx, now)
	if r.trafficAt < 0 && p.Requests > 0 {
		r.trafficAt = el
	}
	for i := range results {
		res := &results[i]
		switch {
		case !res.Fired || !math.IsNaN(res.Value): // evaluated
		case r.trafficAt < 0:
			res.Fired, res.Err = false, "no data yet: no request has ended"
		case !onTarget(r.c.Checks[i]) && el-r.trafficAt <= r.c.Checks[i].Window()+time.Second:
			res.Fired = false
			res.Err = fmt.Sprintf("no data yet: the first requests ended %v ago, within the check's window (%v) and a second (%s)",
				(el - r.trafficAt).Round(time.Second), r.c.Checks[i].Window(), res.Err)
		case r.scrapeFailed && onTarget(r.c.Checks[i]):
			// A busy target whose scrape timed out: its metrics are
			// missing, not its health. The level's verdict counts it
			// as unknown (control.Level.Unknown).
			res.Fired, res.Unknown = false, true
			res.Err = "unknown: the target's scrape timed out this second (" + res.Err + ")"
		}
	}
	pt := result.CheckPoint{T: el.Seconds(), Users: users}
	for _, res := range results {
		var v *float64
		if !math.IsNaN(res.Value) {
			x := res.Value
			v = &x
		}
		pt.Values, pt.Fired = append(pt.Values, v), append(pt.Fired, res.Fired)
	}
	r.ci.CheckTimeline = append(r.ci.CheckTimeline, pt)
	return results
}

// timedOut reports whether a scrape failed by timing out, as a busy
// target's does, rather than being refused or answered badly.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// onTarget reports whether c reads a scraped target's metrics, not only
// headroom's own.
func onTarget(c health.Check) bool {
	return slices.ContainsFunc(c.Metrics(), func(m string) bool { return !health.Synthetic(m) })
}

// named names the checks whose results are such: fired, or unknown (not
// evaluated for want of the target's metrics).
func named(results []health.Result, such func(health.Result) bool) []string {
	var out []string
	for _, res := range results {
		if such(res) {
			out = append(out, res.Name)
		}
	}
	return out
}

// decide is the second's decision: the measuring hold's judgment while
// it runs; none (the target kept) for a second kept out (an agent lost,
// or the generator's load untrue); else the controller's.
func (r *ceilingRun) decide(now time.Time, obs control.Observation, steady, degraded bool) control.Decision {
	switch fired := obs.Fired; {
	case r.measuring:
		d := control.Decision{Users: r.target}
		h := r.levels[r.target]
		if h == nil || h.time <= 0 || obs.Users != r.target || !steady || !r.tr.counts(now, obs.Users, fired) {
			return d
		}
		// Past settling: the hold is judged as a level is.
		r.hold.Count(obs)
		r.hold.End = obs.Elapsed.Seconds()
		d.Judged = true
		if h.time >= r.c.Measure {
			d = r.judgeHold(obs, r.tr.level(*r.hold, h))
			r.measuring = false // done, or the search goes on
		}
		return d
	case degraded || !r.tr.counts(now, obs.Users, fired):
		return control.Decision{Users: r.target}
	}
	return r.c.Controller.Decide(obs)
}

// measure turns a search's answer into the measuring hold, when there is
// one to make: the answer held long enough for a per-request table worth
// reading, and judged again meanwhile.
func (r *ceilingRun) measure(el time.Duration, d control.Decision) control.Decision {
	est := r.c.Controller.Estimate()
	if !d.Done || !est.Found || r.c.Measure <= 0 || r.measuring || (r.hold != nil && r.hold.Users == int(est.Value)) {
		return d
	}
	r.measuring, d.Done = true, false
	d.Users = int(est.Value)
	r.hold = &control.Level{Users: d.Users, Start: el.Seconds(), Fired: map[string]int{}, SetUp: d.Users}
	delete(r.levels, d.Users) // its figures are the hold's
	d.Reason += fmt.Sprintf("; hold %s for %v to measure them (judged again)", result.Amount(float64(d.Users), r.ci.Unit), r.c.Measure)
	return d
}

// selfCheck looks at the generator's CPU over the last ten seconds. Its
// lateness and bunching are judged every second (truth).
func (r *ceilingRun) selfCheck(now time.Time, users int) {
	if now.Sub(r.cpuAt) < 10*time.Second {
		return
	}
	cpu := rusage.CPU()
	share := (cpu - r.cpuMark).Seconds() / now.Sub(r.cpuAt).Seconds()
	if procs := r.s.res.Generator.GOMAXPROCS; share > 0.9*float64(procs) {
		r.tr.cpu = fmt.Sprintf("at %s headroom used %.0f%% of %d cores: the generator, not the target, may have been the limit",
			result.Amount(float64(users), r.ci.Unit), 100*share, procs)
	}
	r.cpuMark, r.cpuAt = cpu, now
}

// checkpoint writes the result so far every Save.
func (r *ceilingRun) checkpoint(now time.Time) {
	if now.Before(r.nextSave) {
		return
	}
	r.finishSearch(result.Running)
	r.s.server(r.from, r.s.mark(now))
	r.s.checkpoint(func(w result.Writer, dir string) error { return w.Write(dir, r.s.res, nil) })
	r.nextSave = r.nextSave.Add(r.c.Save)
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

// fillLevels fills the result's levels from the controller's so far, with their
// verdicts: at the end, at each checkpoint, and every tick while a live
// view (Common.OnTick) shows them.
func (r *ceilingRun) fillLevels() {
	r.ci.Levels = r.ci.Levels[:0]
	for _, l := range r.c.Controller.Levels() {
		r.ci.Levels = append(r.ci.Levels, r.tr.level(l, r.levels[l.Users]))
	}
}

// finishSearch fills the result: the estimate, the figures at the
// supported user count, the levels. It returns the snapshot the figures
// came from.
func (r *ceilingRun) finishSearch(status string) *metrics.Snapshot {
	c, s, levels, tr := r.c, r.s, r.levels, r.tr
	res, ci := s.res, s.res.Ceiling
	res.Status, res.EndedAt = status, time.Now()
	est := c.Controller.Estimate()
	ci.SupportedUsers = est
	ci.Controller = est.Method
	ci.SearchSeconds = res.EndedAt.Sub(res.StartedAt).Seconds()
	r.fillLevels()
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
	res.Phases = result.PhasesOf(snap, win)
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
		res.Omission = analysis.OmissionOf(snap, meanThink(s.c.Scenario))
		res.Config.Users = int(est.Value)
	}
	res.Notes = s.notes()
	if note := s.generator(snap); note != "" {
		res.Notes = append(res.Notes, note)
	}
	if note := unreadShare(res.Phases, res.Totals); note != "" {
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

// judgeHold closes the measuring hold with its verdict (a majority, as a
// level's), lv its figures: the controller takes it if it can
// (control.Holder); else an unhealthy hold is only said in the result.
func (r *ceilingRun) judgeHold(o control.Observation, lv result.Level) control.Decision {
	h, ci := r.hold, r.ci
	h.Verdict = "healthy"
	if 2*h.Unhealthy > h.Evaluations {
		h.Verdict = "unhealthy"
	}
	lv.Verdict = h.Verdict
	ci.Hold = &lv
	if hc, ok := r.c.Controller.(control.Holder); ok {
		return hc.Held(*h, o)
	}
	reason := fmt.Sprintf("the hold at %s was %s (%d of %d evaluations unhealthy)", result.Amount(float64(h.Users), ci.Unit), h.Verdict, h.Unhealthy, h.Evaluations)
	return control.Decision{Users: h.Users, Done: true, Reason: reason}
}

// levelFigures is what was recorded while one user count was held.
type levelFigures struct {
	snap *metrics.Snapshot
	time time.Duration
}
