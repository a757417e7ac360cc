package result

// Agents is what a run spread over agents (docs/AGENTS.md) adds to its
// result: each agent's share and figures, the faults the coordinator
// survived, and the seconds they left out of the figures.
type Agents struct {
	Agents []Agent `json:"agents"`
	Faults []Fault `json:"faults,omitempty"`
	// DegradedS is how many seconds of the timeline are marked degraded
	// (an agent lost, its users not yet set up again elsewhere); their
	// figures are kept out of the window's, the levels' and the ceiling's
	// and counted in DegradedTotals instead, so nothing is lost.
	DegradedS float64 `json:"degraded_s"`
	// LateSeconds counts the seconds degraded because an agent's second
	// came after the coordinator stopped waiting for it (its samples
	// counted with a later second; no agent lost): a busy agent's.
	LateSeconds int `json:"late_seconds,omitempty"`
	// Coverage is the share of the run's agent-seconds that agents were
	// there for: 1 when no agent was lost.
	Coverage float64 `json:"coverage"`
}

// Agent is one agent of the run (an agent that took a lost one's place
// has an entry of its own, with the same Index).
type Agent struct {
	Index    int     `json:"index"`
	Name     string  `json:"name"`
	Cores    int     `json:"cores"`
	JoinedS  float64 `json:"joined_s"`         // seconds from the run's start; <= 0 for the agents it began with
	LeftS    float64 `json:"left_s,omitempty"` // when it was lost (0: it stayed to the end)
	Lost     string  `json:"lost,omitempty"`   // why the coordinator gave up on it
	Coverage float64 `json:"coverage"`         // share of the run's seconds it was there for
	Users    int     `json:"users"`            // at the end, or when lost
	Peak     int     `json:"peak_users"`       // most users it ran at once
	Requests int64   `json:"requests"`         // over the whole run, setup's apart
	Errors   int64   `json:"errors"`           //
	// The open model: its arrivals that started, and those dropped (no
	// user of its share of the pool free), over the run.
	Arrivals int64   `json:"arrivals,omitempty"`
	Dropped  int64   `json:"dropped_arrivals,omitempty"`
	RPS      float64 `json:"rps"`          // requests over the seconds it was there
	P50Ms    float64 `json:"p50_ms"`       //
	P99Ms    float64 `json:"p99_ms"`       //
	CPUS     float64 `json:"cpu_seconds"`  // its process's user+system CPU
	CPUPct   float64 `json:"cpu_percent"`  // of its cores, mean over the seconds it was there
	RSSMB    float64 `json:"peak_rss_mb"`  //
	Late     int64   `json:"late_wakeups"` // think times that ended > 50 ms late
	// Its generator's lateness over the run and burstiness in its worst
	// second (Generator's); absent in results of before.
	Lateness   *Lateness   `json:"lateness,omitempty"`
	Burstiness *Burstiness `json:"burstiness,omitempty"`
	Outlier    string      `json:"outlier,omitempty"`    // why its latency departs from the other agents': the generator may be slow, not the target
	Overload   bool        `json:"overloaded,omitempty"` // its CPU near saturation or many late wake-ups
}

// Fault is an agent the coordinator lost during the run, and what it did.
type Fault struct {
	T          float64 `json:"t"` // seconds from the run's start
	Index      int     `json:"index"`
	Name       string  `json:"name"`
	Reason     string  `json:"reason"`
	Users      int     `json:"users"`                 // the users it held: moved to the others
	To         int     `json:"to"`                    // how many agents took them
	RecoveredT float64 `json:"recovered_t,omitempty"` // when they were all set up again (0: not within the run)
}
