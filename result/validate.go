package result

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/headroom-dev/headroom/metrics"
)

// Kinds of result.
const (
	KindRun     = "run"
	KindStep    = "step"
	KindCeiling = "ceiling"
)

// validate refuses what no run writes and readers would trip on: an
// unknown kind, a step or ceiling result without its part, negative
// counts, latencies or rates (the client's, the server's, the supported
// users), more errors and timeouts than requests, a check timeline that
// does not match the checks. JSON itself cannot hold
// NaN or infinities, so every number here is finite.
func (r *Result) validate() error {
	for _, check := range []func() error{r.checkKind, r.checkClient, r.checkStep, r.checkCeiling, r.checkServer} {
		if err := check(); err != nil {
			return err
		}
	}
	if ps := r.Profiles; ps != nil {
		return checkProfiles(ps)
	}
	return nil
}

// checkKind refuses an unknown kind, and a step or ceiling result
// without its part.
func (r *Result) checkKind() error {
	switch r.Kind {
	case KindRun, KindStep, KindCeiling:
	default:
		return fmt.Errorf("kind %q, want %q, %q or %q", r.Kind, KindRun, KindStep, KindCeiling)
	}
	if r.Kind == KindStep && r.Step == nil {
		return fmt.Errorf("a step result without \"step\"")
	}
	if r.Kind == KindCeiling && r.Ceiling == nil {
		return fmt.Errorf("a ceiling result without \"ceiling\"")
	}
	return nil
}

// checkClient refuses the client's negative figures: the window, users,
// summaries, phases and timeline.
func (r *Result) checkClient() error {
	if err := checkWindow("window", r.Window); err != nil {
		return err
	}
	if r.Config.Users < 0 {
		return fmt.Errorf("config.users is %d", r.Config.Users)
	}
	if err := checkSummaries("totals", "requests", "actions", r.Totals, r.Requests, r.Actions); err != nil {
		return err
	}
	if err := checkSummary("ramp_totals", r.RampTotals); err != nil {
		return err
	}
	if err := checkPhases("phases", r.Phases); err != nil {
		return err
	}
	if r.Setup != nil {
		if err := checkPhases("setup.phases", r.Setup.Phases); err != nil {
			return err
		}
	}
	for i, p := range r.Timeline {
		if p.Users < 0 || p.Requests < 0 || p.Errors < 0 || p.Timeouts < 0 || p.Actions < 0 || p.ActionErrors < 0 ||
			p.RPS < 0 || p.MeanMs < 0 || p.P50Ms < 0 || p.P95Ms < 0 || p.P99Ms < 0 {
			return fmt.Errorf("timeline[%d] (t %g s) has a negative figure", i, p.T)
		}
	}
	return nil
}

// checkStep refuses a step level's negative figures.
func (r *Result) checkStep() error {
	if r.Step == nil {
		return nil
	}
	for i, l := range r.Step.Levels {
		at := fmt.Sprintf("step.levels[%d]", i)
		if l.Users < 0 {
			return fmt.Errorf("%s: users is %d", at, l.Users)
		}
		if err := checkWindow(at+".window", l.Window); err != nil {
			return err
		}
		if err := checkSummaries(at+".totals", at+".requests", at+".actions", l.Totals, l.Requests, l.Actions); err != nil {
			return err
		}
	}
	return nil
}

// checkCeiling refuses supported users below zero and a check timeline
// that does not match the checks.
func (r *Result) checkCeiling() error {
	ci := r.Ceiling
	if ci == nil {
		return nil
	}
	if su := ci.SupportedUsers; su.Value < 0 || su.Low < 0 || su.High < 0 || ci.ThroughputRPS < 0 {
		return fmt.Errorf("ceiling: supported users %g in [%g, %g) at %g requests/s, below zero", su.Value, su.Low, su.High, ci.ThroughputRPS)
	}
	for i, p := range ci.CheckTimeline {
		if len(p.Values) != len(ci.Checks) || len(p.Fired) != len(ci.Checks) {
			return fmt.Errorf("ceiling.check_timeline[%d] has %d values and %d fired flags for %d checks", i, len(p.Values), len(p.Fired), len(ci.Checks))
		}
	}
	return nil
}

// checkServer refuses a scraped server's negative figures.
func (r *Result) checkServer() error {
	if r.Server == nil {
		return nil
	}
	for i, t := range r.Server.Targets {
		if err := checkServerWindow(fmt.Sprintf("server.targets[%d].window", i), t.Window); err != nil {
			return err
		}
		if t.Setup != nil {
			if err := checkServerWindow(fmt.Sprintf("server.targets[%d].setup", i), *t.Setup); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkProfiles refuses profiles that name a target there is none of, a
// phase twice for one target, or a file outside the result directory (a
// result directory may be someone else's: a CI artifact).
func checkProfiles(ps *Profiles) error {
	file := func(at, f string) error {
		if f != "" && !filepath.IsLocal(f) {
			return fmt.Errorf("%s: %q is not a path inside the result directory", at, f)
		}
		return nil
	}
	for i, sl := range ps.Slices {
		at := fmt.Sprintf("profiles.slices[%d]", i)
		if sl.Target < 0 || sl.Target >= len(ps.Targets) {
			return fmt.Errorf("%s: target %d of %d", at, sl.Target, len(ps.Targets))
		}
		if err := errors.Join(file(at+".file", sl.File), file(at+".heap", sl.Heap)); err != nil {
			return err
		}
	}
	type key struct {
		target int
		phase  string
	}
	seen := map[key]bool{}
	for i, ph := range ps.Phases {
		at := fmt.Sprintf("profiles.phases[%d]", i)
		if ph.Target < 0 || ph.Target >= len(ps.Targets) {
			return fmt.Errorf("%s: target %d of %d", at, ph.Target, len(ps.Targets))
		}
		if k := (key{ph.Target, ph.Phase}); seen[k] {
			return fmt.Errorf("%s: the %s phase of target %d a second time", at, ph.Phase, ph.Target+1)
		} else {
			seen[k] = true
		}
		if err := file(at+".file", ph.File); err != nil {
			return err
		}
		if ph.Heap != nil {
			if err := file(at+".heap.file", ph.Heap.File); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkServerWindow refuses negative server figures.
func checkServerWindow(at string, w ServerWindow) error {
	if w.Seconds < 0 || w.CPUCoresMean < 0 || w.CPUCoresMax < 0 || w.MemoryMBMean < 0 || w.MemoryMBMax < 0 || w.GoroutinesMean < 0 || w.GoroutinesMax < 0 {
		return fmt.Errorf("%s has a negative figure", at)
	}
	if d := w.Database; d != nil && (d.Queries < 0 || d.Transactions < 0 || d.RowsRead < 0) {
		return fmt.Errorf("%s: the database has a negative figure", at)
	}
	for _, g := range w.Timings {
		for _, it := range g.Items {
			if it.Count < 0 || it.RPS < 0 || it.MeanMs < 0 || it.P99Ms < 0 {
				return fmt.Errorf("%s: %s %q has a negative figure", at, g.Metric, it.Name)
			}
		}
	}
	return nil
}

func checkWindow(at string, w Window) error {
	if w.Seconds < 0 {
		return fmt.Errorf("%s.seconds is %g", at, w.Seconds)
	}
	return nil
}

func checkSummaries(totalsAt, requestsAt, actionsAt string, totals metrics.Summary, requests, actions []metrics.Summary) error {
	if err := checkSummary(totalsAt, totals); err != nil {
		return err
	}
	for _, t := range []struct {
		at   string
		list []metrics.Summary
	}{{requestsAt, requests}, {actionsAt, actions}} {
		for i, s := range t.list {
			if err := checkSummary(fmt.Sprintf("%s[%d] (%q)", t.at, i, s.Name), s); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkSummary refuses negative figures and more failures than requests.
func checkSummary(at string, s metrics.Summary) error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"count", s.Count}, {"errors", s.Errors}, {"timeouts", s.Timeouts}, {"canceled", s.Canceled}, {"bytes_in", s.BytesIn}, {"bytes_out", s.BytesOut}, {"body_bytes_in", s.BodyIn}, {"http2", s.HTTP2}, {"no_request", s.NoRequest}} {
		if f.v < 0 {
			return fmt.Errorf("%s: %s is %d, below zero", at, f.name, f.v)
		}
	}
	if s.Errors > s.Count || s.Timeouts > s.Count-s.Errors {
		return fmt.Errorf("%s: %d errors and %d timeouts out of %d requests", at, s.Errors, s.Timeouts, s.Count)
	}
	if s.HTTP2 > s.Count {
		return fmt.Errorf("%s: %d responses over HTTP/2 out of %d requests", at, s.HTTP2, s.Count)
	}
	if s.NoRequest > s.Count {
		return fmt.Errorf("%s: %d actions sent no request out of %d", at, s.NoRequest, s.Count)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"mean_ms", s.MeanMs}, {"p50_ms", s.P50Ms}, {"p90_ms", s.P90Ms}, {"p95_ms", s.P95Ms}, {"p99_ms", s.P99Ms}, {"max_ms", s.MaxMs}, {"rps", s.RPS}} {
		if f.v < 0 {
			return fmt.Errorf("%s: %s is %g, below zero", at, f.name, f.v)
		}
	}
	for k, v := range s.Status {
		if v < 0 {
			return fmt.Errorf("%s: status %q counts %d, below zero", at, k, v)
		}
	}
	for k, v := range s.Messages {
		if v < 0 {
			return fmt.Errorf("%s: message %q counts %d, below zero", at, k, v)
		}
	}
	return nil
}
