package result

import (
	"fmt"
	"time"

	"github.com/headroom-dev/headroom/metrics"
)

// Phases are where the window's requests spent their time, by phase
// (metrics.PhaseNames: "dns", "connect", "tls", "wait", "receive",
// "unread"): dns, connect and tls of the requests that made a connection
// (dns when their host is a name, tls over https), wait (the time to first
// byte) and receive of those that got a response, and unread, of those the
// kernel stamped, how long the response's end waited for headroom to read
// it (a part of the wait and receive: the generator's own delay). A phase
// no request went through is absent; nil when none was timed (a result of
// an older headroom).
type Phases map[string]*PhaseTable

// PhaseTable is one phase's times, over all requests and by request name.
type PhaseTable struct {
	Totals   metrics.Summary   `json:"totals"`
	Requests []metrics.Summary `json:"requests"`
}

// PhasesOf sums up snap's requests' phases over a window of the given
// length.
func PhasesOf(snap *metrics.Snapshot, window time.Duration) Phases {
	var out Phases
	for p, ph := range snap.Phases {
		if ph == nil {
			continue
		}
		t := ph.Total(metrics.Request, metrics.NewStat())
		if t.Count == 0 {
			continue
		}
		if out == nil {
			out = Phases{}
		}
		out[metrics.PhaseNames[p]] = &PhaseTable{Totals: t.Summarize("all requests", window), Requests: ph.Summaries(metrics.Request, window)}
	}
	return out
}

// checkPhases refuses a phase headroom does not know, or figures that
// could not have been recorded.
func checkPhases(at string, ps Phases) error {
	for name, t := range ps {
		known := false
		for _, n := range metrics.PhaseNames {
			known = known || n == name
		}
		if !known || t == nil {
			return fmt.Errorf("%s: %q is not a phase (want one of %v)", at, name, metrics.PhaseNames)
		}
		at := at + "." + name
		if err := checkSummaries(at+".totals", at+".requests", at+".actions", t.Totals, t.Requests, nil); err != nil {
			return err
		}
	}
	return nil
}
