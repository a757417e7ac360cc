package result

import "github.com/headroom-dev/headroom/metrics"

// Setup is what users' setups did over the whole run, kept apart from
// every other figure: no window, level or total holds a setup request.
// A login-cost regression shows here, not in the acting figures.
type Setup struct {
	// Users is how many users finished setup (removed ones included);
	// Started how many began it.
	Users   int64 `json:"users"`
	Started int64 `json:"started"`
	// PerS is how fast they were set up: the users past setup when the
	// last of them got there (or the wait for them ended), a second since
	// the first began: a run's from its start to its window, a step
	// level's from its start to its settling. A ramp slower than the
	// server bounds it (Config.RampS); absent when unknown.
	PerS float64 `json:"per_s,omitempty"`
	// SessionsKept is how many setups succeeded having begun with a session
	// (user.session) an earlier user of the account kept: logins spared,
	// as the scenario wrote it.
	SessionsKept int64 `json:"sessions_kept,omitempty"`
	// GaveUp is how many users stopped retrying a failed setup
	// (--setup-retries) and stayed unset up until removed.
	GaveUp int64 `json:"gave_up,omitempty"`
	// TimeToSetUp is the time from a user's first setup attempt to being
	// ready, retries included: one sample per user that got there.
	TimeToSetUp metrics.Summary `json:"time_to_set_up"`
	// Attempts is every call of setup(user): its failures are Errors
	// (and Messages), its durations the latency.
	Attempts metrics.Summary   `json:"attempts"`
	Totals   metrics.Summary   `json:"totals"`   // every setup request
	Requests []metrics.Summary `json:"requests"` // setup's requests by name
	// Phases is where setup's requests spent their time (dns, connect,
	// tls, wait, receive), as the run's Phases: a login's handshakes.
	Phases Phases `json:"phases,omitempty"`
}
