// Package result reads and writes the result directory a run leaves:
//
//	result.json      what happened: configuration, per-request and per-action figures, the timeline
//	histograms.json  the merged latency histograms, exactly (HDR, base64 V2 compressed)
//
// The format is versioned (Format); docs/RESULTS.md describes every field.
package result

import (
	"fmt"
	"time"

	"github.com/headroom-dev/headroom/metrics"
)

// Format names this version of the result format.
const Format = "headroom-result/1"

// Statuses of a run.
const (
	Running     = "running"     // still going (a checkpoint), or the process died
	Completed   = "completed"   // ran its whole duration
	Interrupted = "interrupted" // stopped early (Ctrl-C); figures cover what ran
	Stopped     = "stopped"     // ended early by headroom itself (a step whose users never finished setup, --max-memory, an internal error); the notes say why
	// Failed: the run went its course but measured nothing: no user ever
	// finished setup, or not one request (for a scenario that sends none,
	// not one action) in what the run measures succeeded. The notes say
	// which, with the most frequent error.
	Failed = "failed"
)

// Result is result.json.
type Result struct {
	Format string `json:"format"`
	// Written names the write that made this file, and the histograms.json
	// written with it (the same value): a reader refuses histograms of
	// another write. Absent in results of before.
	Written   string    `json:"written,omitempty"`
	Kind      string    `json:"kind"` // "run" (bounded), "step", "ceiling"
	Headroom  string    `json:"headroom"`
	Status    string    `json:"status"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
	Config    Config    `json:"config"`

	// Window is the measured part of the run: after the ramp, until the
	// duration ended (or the interrupt came); Requests, Actions and Totals
	// cover it.
	Window   Window            `json:"window"`
	Totals   metrics.Summary   `json:"totals"`
	Requests []metrics.Summary `json:"requests"`
	Actions  []metrics.Summary `json:"actions"`
	// Connected is what long polls, WebSockets and deliveries did over
	// the window (empty for a scenario with none).
	Connected
	// Ramp figures, kept apart so they do not blur the table.
	RampTotals metrics.Summary `json:"ramp_totals"`
	// StoppingTotals, bounded runs: requests that ended after the window,
	// while users finished their actions (within the grace period), kept
	// apart so the stop does not stretch the window.
	StoppingTotals metrics.Summary `json:"stopping_totals,omitzero"`
	// DegradedTotals, runs on agents: requests that ended in seconds
	// marked degraded (Agents.DegradedS), kept out of every other figure.
	DegradedTotals metrics.Summary `json:"degraded_totals,omitzero"`
	// Arrivals, of the open model: what the schedule asked for over the
	// window and what came of it. In the open model Totals, Requests and
	// Actions time each request from its arrival's intended start, and
	// ServiceTimes from its actual send.
	Arrivals     *Arrivals     `json:"arrivals,omitempty"`
	ServiceTimes *ServiceTimes `json:"service_time,omitempty"`
	// Phases: where the window's requests spent their time (dns,
	// connect, tls, wait, receive), per request name.
	Phases Phases `json:"phases,omitempty"`
	// Omission, of the closed model: what the window's actions say of
	// stalls that held users up (coordinated omission, analysis.OmissionOf);
	// nil when the users have no think time. A ceiling's is at the
	// supported users.
	Omission *Omission `json:"coordinated_omission,omitempty"`
	// Setup is what users' setups did over the whole run (requests,
	// failures, time to set up), in no other figure; nil when no user
	// has a setup.
	Setup *Setup `json:"setup,omitempty"`

	// UsersByType, for a scenario of several user types: how many users
	// of each the run started (Config.UserTypes lists the types).
	UsersByType map[string]int `json:"users_by_type,omitempty"`

	Timeline  []metrics.Point `json:"timeline"`
	Ceiling   *Ceiling        `json:"ceiling,omitempty"`  // ceiling runs only
	Step      *Step           `json:"step,omitempty"`     // step runs only
	Server    *Server         `json:"server,omitempty"`   // when the run scraped the system under test
	Profiles  *Profiles       `json:"profiles,omitempty"` // when the run took the target's CPU profiles (--profile)
	Generator Generator       `json:"generator"`
	Agents    *Agents         `json:"agents,omitempty"` // runs spread over agents

	Notes []string `json:"notes,omitempty"`

	// FoldedNames is how many request and action names Read folded under
	// metrics.OtherName because a table held more than metrics.MaxNames
	// (fold.go); 0 for every result headroom writes. Not written.
	FoldedNames int `json:"-"`
}

// Connected is what users' long polls, WebSocket connections and stamped
// deliveries did over a window. Rates are per second of it.
type Connected struct {
	// Polls are long-poll requests by name: their latency is time
	// waited, so they are not in Requests or Totals.
	Polls []metrics.Summary `json:"polls,omitempty"`
	// Deliveries are delivery latencies by name: from delivery.stamp()
	// at the sender to delivery.record() at a receiver.
	Deliveries []metrics.Summary `json:"deliveries,omitempty"`
	// WebSockets are connections by name: opened, closed (abnormally),
	// reconnect attempts, messages in and out by type.
	WebSockets []metrics.SocketSummary `json:"websockets,omitempty"`
}

// ConnectedOf reduces a snapshot's connected figures over a window of the
// given length.
func ConnectedOf(s *metrics.Snapshot, window time.Duration) Connected {
	return Connected{
		Polls:      s.Summaries(metrics.Poll, window),
		Deliveries: s.Summaries(metrics.Delivery, window),
		WebSockets: s.SocketSummaries(window),
	}
}

// Window is a span of the run; Start and End are seconds since StartedAt.
type Window struct {
	Start   float64 `json:"start_s"`
	End     float64 `json:"end_s"`
	Seconds float64 `json:"seconds"`
}

// Config is everything needed to run it again.
type Config struct {
	Command      []string       `json:"command"`
	Scenario     string         `json:"scenario"`
	ScenarioHash string         `json:"scenario_hash"`
	Target       string         `json:"target"`
	Users        int            `json:"users"`
	RampS        float64        `json:"ramp_s"`
	DurationS    float64        `json:"duration_s"`
	Seed         uint64         `json:"seed"`
	TimeoutS     float64        `json:"timeout_s"`
	GraceS       float64        `json:"grace_s"`
	Think        string         `json:"think"`   // the one user type's; "" with UserTypes
	Actions      []ActionWeight `json:"actions"` // the one user type's; empty with UserTypes
	Connections  string         `json:"connections"`
	// UserTypes, for a scenario of several user types: each with its
	// weight, think time and actions.
	UserTypes []UserType `json:"user_types,omitempty"`
	// Label is the user's description of what ran (--label), e.g. the
	// build or the target's architecture; reports show it.
	Label string `json:"label,omitempty"`
	// Model is ModelClosed (users that wait for their responses: Users)
	// or ModelOpen (arrivals at a rate: Rate); "" in results written
	// before the open model, which are closed.
	Model string `json:"model,omitempty"`
	// Rate, of the open model: the arrival rate and the pool of users.
	Rate *RateConfig `json:"rate,omitempty"`
	// SetupOnly: the users ran their setup and no action (--setup-only):
	// the result is its Setup, how fast the target set users up.
	SetupOnly bool `json:"setup_only,omitempty"`
}

// UserType is one type of user of a scenario (scenario.UserType).
type UserType struct {
	Name    string         `json:"name"`
	Weight  float64        `json:"weight"` // relative to the other types
	Think   string         `json:"think"`
	Actions []ActionWeight `json:"actions"` // weights relative within the type
}

// ActionWeight is one action of the scenario and its weight.
type ActionWeight struct {
	Name   string  `json:"name"`
	Weight float64 `json:"weight"`
}

// Generator describes the machine that made the load, and whether it kept up.
type Generator struct {
	Host        string  `json:"host"`
	GOMAXPROCS  int     `json:"gomaxprocs"`
	CPUSeconds  float64 `json:"cpu_seconds"`  // user+system CPU of headroom over the run
	CPUPercent  float64 `json:"cpu_percent"`  // of one core, mean over the run
	LateWakeups int64   `json:"late_wakeups"` // think times that ended > 50 ms late
	PeakRSSMB   float64 `json:"peak_rss_mb"`  //
	Overloaded  bool    `json:"overloaded"`   // CPU near saturation or many late wake-ups: figures may be the generator's, not the target's
	// Lateness and Burstiness: how late and how bunched the starts the
	// generator scheduled were over the run (generator.go); absent in
	// results of before, and of runs that scheduled none.
	Lateness   *Lateness   `json:"lateness,omitempty"`
	Burstiness *Burstiness `json:"burstiness,omitempty"`
	// Untrue says why the load was not what headroom meant to send
	// (analysis.Untrue), when it was not.
	Untrue string `json:"untrue,omitempty"`
}

// Histograms is histograms.json: exact latency histograms, microseconds.
type Histograms struct {
	Format   string            `json:"format"`
	Written  string            `json:"written,omitempty"` // as Result.Written
	Unit     string            `json:"unit"`              // "us"
	Window   string            `json:"window"`
	Requests map[string]string `json:"requests"` // name -> base64 HDR V2 compressed
	Actions  map[string]string `json:"actions"`
	// Levels, step runs only: each level's held window, by user count
	// ("48"). Written by WriteStep, read by ReadLevelHistograms.
	Levels map[string]LevelHistograms `json:"levels,omitempty"`
	// Setup: the histograms of users' setups over the whole run (the
	// figures of result.json's setup): requests by name, and the actions
	// "(setup)" (each attempt) and "(time to set up)". Absent in results
	// of before, and of runs whose users have no setup.
	Setup *LevelHistograms `json:"setup,omitempty"`
}

// Names of the files in a result directory.
const (
	ResultFile     = "result.json"
	HistogramsFile = "histograms.json"
)

// Write writes r (and, if snap is not nil, its histograms) into dir,
// creating it, on the real file system (see Writer.Write).
func Write(dir string, r *Result, snap *metrics.Snapshot) error {
	return Writer{}.Write(dir, r, snap)
}

// encodeSetup is the setup section of histograms.json: snap.Setup's
// histograms, or nil when it has none.
func encodeSetup(snap *metrics.Snapshot) (*LevelHistograms, error) {
	if snap == nil || snap.Setup == nil {
		return nil, nil
	}
	lh, err := encodeSection(snap.Setup)
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	if len(lh.Requests) == 0 && len(lh.Actions) == 0 {
		return nil, nil
	}
	return &lh, nil
}

// encodeSection encodes snap as a section of histograms.json (a step
// level, the setups).
func encodeSection(snap *metrics.Snapshot) (LevelHistograms, error) {
	lh := LevelHistograms{Requests: map[string]string{}, Actions: map[string]string{}}
	return lh, encodeSnapshot(snap, lh.Requests, lh.Actions)
}

// encodeSnapshot encodes snap's request and action histograms into the
// given maps, skipping names with no samples.
func encodeSnapshot(snap *metrics.Snapshot, requests, actions map[string]string) error {
	for _, pair := range []struct {
		from map[string]*metrics.Stat
		to   map[string]string
	}{{snap.Requests, requests}, {snap.Actions, actions}} {
		for name, st := range pair.from {
			if st.Count == 0 {
				continue
			}
			b, err := encodeHist(st.Hist())
			if err != nil {
				return fmt.Errorf("encode histogram %q: %w", name, err)
			}
			pair.to[name] = b
		}
	}
	return nil
}
