package result

// KneeRule says when a step run has passed its knee; see analysis.FindKnee,
// and analysis.DefaultKneeRule for the rule step runs use.
type KneeRule struct {
	// Efficiency: throughput "stops growing" from one level to the next
	// when it grows by less than this fraction of the users' relative
	// increase (0.5: +50% users must give at least +25% throughput).
	// A fraction in (0, 1].
	Efficiency float64 `json:"efficiency"`
	// LatencyRisePct: latency "keeps rising" when p95 or mean grows by
	// more than this, in percent (20: up by a fifth).
	LatencyRisePct float64 `json:"latency_rise_pct"`
	// ErrorRisePoints: errors "keep rising" when the share of requests
	// that failed or timed out grows by more than this many percentage
	// points (1: from 0.5% to more than 1.5%).
	ErrorRisePoints float64 `json:"error_rise_points"`
}

// Knee is where a step run's throughput stopped growing with the users.
// When Found is false only Summary and Rule are set.
type Knee struct {
	Found bool `json:"found"`
	// Users is the knee: the last level at which throughput still grew
	// with the users. Next is the level after it, where it stopped.
	Users int `json:"users"`
	Next  int `json:"next"`
	// From Users to Next: the users' increase, the throughput's change,
	// all in percent. Throughput is successful requests per second (errors
	// and timeouts excluded). Pairs are [at Users, at Next].
	UsersGainPct      float64    `json:"users_gain_pct"`
	ThroughputGainPct float64    `json:"throughput_gain_pct"`
	ThroughputRPS     [2]float64 `json:"throughput_rps"`
	P95Ms             [2]float64 `json:"p95_ms"`
	MeanMs            [2]float64 `json:"mean_ms"`
	ErrorPct          [2]float64 `json:"error_pct"` // errors and timeouts, percent of requests [0, 100]
	// Summary says it in words, found or not.
	Summary string   `json:"summary"`
	Rule    KneeRule `json:"rule"`
}
