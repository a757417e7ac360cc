package result

import (
	"time"

	"github.com/headroom-dev/headroom/metrics"
)

// The open model's parts of a result (issue 14, docs/OPEN.md): what was
// asked (RateConfig), what the schedule did (Arrivals), and each request's
// service time beside its latency from the intended start (ServiceTimes).

// Models of load (Config.Model).
const (
	ModelClosed = "closed" // a number of users, each waiting for its responses
	ModelOpen   = "open"   // arrivals at a rate, whatever the target does
)

// Open reports whether c is a run of the open model. A result without a
// model (written before there was one) is of the closed model.
func (c Config) Open() bool { return c.Model == ModelOpen }

// RateConfig is the open model's schedule and pool of users.
type RateConfig struct {
	// PerSecond is the rate at the start, in arrivals per second; each
	// stage then moves it linearly to its target over its duration (a
	// constant --rate is one stage at the same rate).
	PerSecond float64     `json:"per_second"`
	Stages    []RateStage `json:"stages"`
	// PeakPerSecond is the highest rate of the schedule.
	PeakPerSecond float64 `json:"peak_per_second"`
	Arrivals      string  `json:"arrivals"`  // "even" or "poisson"
	MaxUsers      int     `json:"max_users"` // the pool's bound
	PreUsers      int     `json:"pre_users"` // set up before the window
	// MaxWaitS is how long an arrival may wait for a user of the pool
	// before it is dropped, in seconds; 0: dropped at once.
	MaxWaitS float64 `json:"max_wait_s"`
	// Connections is how many keep-alive connections the pool's users
	// shared (--connections); 0: each user had its own.
	Connections int `json:"connections,omitempty"`
}

// RateStage is one stage of a RateConfig.
type RateStage struct {
	TargetPerSecond float64 `json:"target_per_second"`
	DurationS       float64 `json:"duration_s"`
}

// Arrivals is what the open model's schedule asked for over a window and
// what came of it. Every arrival is started, dropped or canceled.
type Arrivals struct {
	// Intended is how many arrivals the schedule handed out in the
	// window: Started + Dropped + Canceled.
	Intended int64 `json:"intended"`
	Started  int64 `json:"started"`
	// Dropped arrivals never started: no user of the pool came free
	// within the max wait (k6's dropped_iterations).
	Dropped int64 `json:"dropped"`
	// Canceled arrivals were waiting for a user when the run stopped.
	Canceled int64 `json:"canceled,omitempty"`
	// Late arrivals started more than LateAfterMs after their intended
	// time (the generator's CPU, or a wait for a user); their lateness is
	// in their latency from the intended start.
	Late        int64   `json:"late"`
	LateAfterMs float64 `json:"late_after_ms"`
	// IntendedRPS is the schedule's mean rate over the window, arrivals
	// per second; StartedRPS the rate at which arrivals started.
	IntendedRPS float64 `json:"intended_rps"`
	StartedRPS  float64 `json:"started_rps"`
	// DroppedPct is Dropped as a percent (0-100) of Intended.
	DroppedPct float64 `json:"dropped_pct"`
	// Lateness is how late the started arrivals started, milliseconds.
	Lateness Lateness `json:"lateness"`
}

// Lateness is a distribution of lateness in milliseconds: of the open
// model's arrivals (Arrivals), or of every start the generator scheduled
// (Generator, LatenessOf), which also says how many and the 99.9th
// percentile.
type Lateness struct {
	Starts int64   `json:"starts,omitempty"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms,omitempty"`
	MaxMs  float64 `json:"max_ms"`
}

// ArrivalsOf sums up the arrivals of snap over a window of the given
// length, in which the schedule asked for intendedRPS on average; nil
// when snap holds none (the closed model).
func ArrivalsOf(snap *metrics.Snapshot, window time.Duration, intendedRPS float64) *Arrivals {
	if len(snap.Arrivals) == 0 {
		return nil
	}
	st := snap.Total(metrics.Arrival, metrics.NewStat())
	s := st.Summarize("arrivals", window)
	a := &Arrivals{Started: st.Count, Dropped: st.Dropped, Canceled: st.Canceled, Late: st.Above(metrics.LateArrival),
		LateAfterMs: float64(metrics.LateArrival) / float64(time.Millisecond), IntendedRPS: intendedRPS, StartedRPS: s.RPS,
		Lateness: Lateness{MeanMs: s.MeanMs, P50Ms: s.P50Ms, P99Ms: s.P99Ms, MaxMs: s.MaxMs}}
	a.Intended = a.Started + a.Dropped + a.Canceled
	if a.Intended > 0 {
		a.DroppedPct = 100 * float64(a.Dropped) / float64(a.Intended)
	}
	return a
}

// ServiceTimes are the open model's requests and actions timed from their
// actual send (their actual start), not from the arrival's intended start:
// what the target took, beside what the schedule's clients saw.
type ServiceTimes struct {
	Totals   metrics.Summary   `json:"totals"`
	Requests []metrics.Summary `json:"requests"`
	Actions  []metrics.Summary `json:"actions"`
}

// ServiceTimesOf sums up snap's service times over a window of the given
// length; nil when it holds none (the closed model).
func ServiceTimesOf(snap *metrics.Snapshot, window time.Duration) *ServiceTimes {
	sv := snap.Service
	if sv == nil {
		return nil
	}
	return &ServiceTimes{Totals: sv.Total(metrics.Request, metrics.NewStat()).Summarize("all requests", window),
		Requests: sv.Summaries(metrics.Request, window), Actions: sv.Summaries(metrics.Action, window)}
}
