package result

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
}

// RateStage is one stage of a RateConfig.
type RateStage struct {
	TargetPerSecond float64 `json:"target_per_second"`
	DurationS       float64 `json:"duration_s"`
}
