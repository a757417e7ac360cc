package runner

import (
	"fmt"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/scenario"
)

// nothingMeasured says why a run measured nothing, or "" when it measured
// something. A run measured nothing when no user ever finished setup, or
// when not one request in measured (the run's measured part, named by
// where) succeeded; for a scenario whose actions send no request, when
// not one of its actions succeeded.
func (s *session) nothingMeasured(measured *metrics.Snapshot, where string) string {
	if why := s.noneSetUp(); why != "" {
		return why
	}
	scratch := metrics.NewStat()
	req := measured.Total(metrics.Request, scratch)
	if req.Count > 0 {
		if succeeded(req) > 0 {
			return ""
		}
		return fmt.Sprintf("all %d requests %s failed or timed out%s", req.Count, where, commonest(req))
	}
	acts := metrics.NewStat()
	for name, st := range measured.Actions {
		if name != scenario.SetupAction && name != scenario.TeardownAction {
			acts.Merge(st)
		}
	}
	switch {
	case acts.Count == 0:
		return "no request or action ended " + where
	case succeeded(acts) == 0:
		return fmt.Sprintf("all %d actions %s failed or timed out%s", acts.Count, where, commonest(acts))
	}
	return ""
}

// markFailed gives a run that measured nothing the status failed, with
// the reason in its notes.
func (s *session) markFailed(why string) {
	s.res.Status = result.Failed
	s.res.Notes = append(s.res.Notes, "the run measured nothing: "+why)
}

func succeeded(st *metrics.Stat) int64 { return st.Count - st.Errors - st.Timeouts }

// commonest is ` (most often: "<message>", N times)` for the commonest
// error message of st, or "".
func commonest(st *metrics.Stat) string {
	msg, n := "", int64(0)
	for m, c := range st.MessageCounts() {
		if c > n || (c == n && m < msg) {
			msg, n = m, c
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (most often: %q, %d times)", msg, n)
}

// noneSetUp says why no user finished setup, with the commonest failure
// of its attempts and of their requests; "" when one did.
func (s *session) noneSetUp() string {
	if s.eng.SetUp() > 0 {
		return ""
	}
	all := s.all.Setup
	if all == nil || all.Actions[scenario.SetupAction] == nil || all.Actions[scenario.SetupAction].Count == 0 {
		return "no user finished setup"
	}
	setup := all.Actions[scenario.SetupAction]
	why := fmt.Sprintf("no user finished setup: all %d attempts failed%s", setup.Count, commonest(setup))
	// The action's message is often the scenario's own ("login: status
	// 0"); the requests' says why (a TLS or connection error).
	if req := all.Total(metrics.Request, metrics.NewStat()); req.Errors+req.Timeouts > 0 {
		why += fmt.Sprintf("; its %d failed requests%s", req.Errors+req.Timeouts, commonest(req))
	}
	return why
}
