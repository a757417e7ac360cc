package result

// Omission is what a closed-model window's actions say of stalls
// (analysis.OmissionOf: coordinated omission).
type Omission struct {
	// ThinkMs is the users' mean think time and IntervalMs their usual
	// interval between action starts (think + the median action), ms.
	ThinkMs    float64 `json:"think_ms"`
	IntervalMs float64 `json:"interval_ms"`
	// Actions is how many actions sent requests in the window.
	Actions int64 `json:"actions"`
	// Stalled actions took two intervals or more; MaxMs is the longest.
	Stalled int64   `json:"stalled"`
	MaxMs   float64 `json:"max_ms"`
	// Hidden is how many more actions users would have started at their
	// usual pace while stalled, and HiddenPct that as a percent [0, 100+]
	// of Actions.
	Hidden    int64   `json:"hidden"`
	HiddenPct float64 `json:"hidden_pct"`
	// Warn: HiddenPct reached analysis.OmissionWarnPct.
	Warn bool `json:"warn"`
}
