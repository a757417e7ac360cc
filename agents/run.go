package agents

import (
	"fmt"
	"github.com/headroom-dev/headroom/result"
	"time"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/internal/memlimit"
	"github.com/headroom-dev/headroom/scenario"
	"github.com/headroom-dev/headroom/transport"
)

// The run, after the handshake:
//
//	coordinator → agent   start {the scenario and its files, the run's options}
//	agent → coordinator   status {users, ready, ...}, once a second and once started
//	coordinator → agent   flush {n}, at each tick of the run's clock
//	agent → coordinator   snapshot #seq (wire.AppendSnapshot), metrics (if Start.Metrics), status {flushed: n}
//	coordinator → agent   ack #seq; users {n} whenever the agent's share changes
//	coordinator → agent   open {its share of the pool}, in the open model: once, then again when it grows
//	coordinator → agent   pacer {the schedule, its share of the arrivals}, in the open model: at each
//	                      schedule the runner sets, and again whenever the running agents change
//	coordinator → agent   stop
//	agent → coordinator   its last snapshot, then done {users by type} (numbered after it,
//	                      and acknowledged, when the welcome gave a session)
//
// When the stream breaks, the agent dials again and resumes (auth.go's
// handshake, naming its session) within the lease the welcome gave: it
// sends again every snapshot (and its done) not acknowledged, in order,
// then a status; the coordinator sends again its share of users, the last
// tick's flush if not answered, its share of the open model's pool and of
// the arrivals (from the arrival due then), and stop if the run is
// stopping. Each is
// taken once (by number) or says a state, so nothing is lost or counted
// twice. Past the lease, the resume is refused and the agent joins anew.
const (
	KindStart   Kind = iota + 32 // coordinator → agent (Start)
	KindUsers                    // coordinator → agent (Users)
	KindStatus                   // agent → coordinator (Status)
	KindStop                     // coordinator → agent: stop every user, send the rest, end
	KindDone                     // agent → coordinator (Done), after its last snapshot
	KindMetrics                  // agent → coordinator: its Prometheus families, with each snapshot (Start.Metrics)
	KindFlush                    // coordinator → agent (Flush): send the samples recorded since the last
	KindOpen                     // coordinator → agent (Open): its share of the open model's pool; Hello.Proto >= protoOpen
	KindPacer                    // coordinator → agent (Pacer): its share of the open model's arrivals; Hello.Proto >= protoOpen
)

// protoOpen is the Hello.Proto of an agent that runs the open model
// (KindOpen, KindPacer). An agent of before says 0: a coordinator does
// not start the open model on it, nor take it into an open run's lost
// place, and says why (an agent of before would end its stream at the
// first frame it does not know).
const protoOpen = 1

// protoSealed is the Hello.Proto of an agent that seals its frames after
// the handshake (seal.go).
const protoSealed = 2

// protoBound is the Hello.Proto (and Challenge.Proto) of a side whose
// handshake proofs cover every field of the hello and welcome (auth.go),
// and that seals its frames, as every coordinator and agent now requires:
// a side of before is refused at its first frame, told which to upgrade.
const protoBound = 3

// Open is an agent's share of the open model's pool (engine.OpenModel):
// sent when the runner starts the open model, and again, larger, when the
// agent takes on a lost agent's share. Each says the share whole: the
// agent's pool grows to it and never shrinks (engine.GrowOpen).
type Open struct {
	PreAllocated int           `json:"pre_allocated"`
	MaxUsers     int           `json:"max_users"`
	MaxWait      time.Duration `json:"max_wait,omitempty"`
	Name         string        `json:"name,omitempty"`
	Connections  int           `json:"connections,omitempty"`
}

func openOf(m engine.OpenModel) Open {
	return Open{PreAllocated: m.PreAllocated, MaxUsers: m.MaxUsers, MaxWait: m.MaxWait, Name: m.Name, Connections: m.Connections}
}

func (o Open) model() engine.OpenModel {
	return engine.OpenModel{PreAllocated: o.PreAllocated, MaxUsers: o.MaxUsers, MaxWait: o.MaxWait, Name: o.Name, Connections: o.Connections}
}

// Pacer is an agent's share of the run's schedule of arrivals: the
// schedule (its rate, spacing and seed, so every agent makes the same
// engine.Schedule), and which of its arrivals are the agent's
// (engine.Stride): numbering them from Anchor, the Positions of every
// Cycle, from arrival From on, its elapsed time counted from Offset into
// the schedule. Stop: no arrivals until the next pacer.
type Pacer struct {
	Stop      bool          `json:"stop,omitempty"`
	Start     float64       `json:"start"`
	Stages    []PacerStage  `json:"stages"`
	Spacing   string        `json:"spacing"` // engine.Spacing's String: even, poisson
	Seed      uint64        `json:"seed"`
	Anchor    int64         `json:"anchor"`
	Cycle     int64         `json:"cycle"`
	Positions []int64       `json:"positions"`
	From      int64         `json:"from"`
	Offset    time.Duration `json:"offset"`
}

// PacerStage is an engine.Stage on the wire.
type PacerStage struct {
	Target   float64       `json:"target"`
	Duration time.Duration `json:"duration"` // engine.Forever: held until the next pacer
}

// schedulePacer is sc's description, with no share yet.
func schedulePacer(sc *engine.Schedule) Pacer {
	r := sc.Rate()
	p := Pacer{Start: r.Start, Spacing: sc.Spacing().String(), Seed: sc.Seed(), Stages: []PacerStage{}}
	for _, st := range r.Stages {
		p.Stages = append(p.Stages, PacerStage{Target: st.Target, Duration: st.Duration})
	}
	return p
}

// schedule is the schedule p describes.
func (p Pacer) schedule() (*engine.Schedule, error) {
	var sp engine.Spacing
	switch p.Spacing {
	case engine.Even.String():
		sp = engine.Even
	case engine.Poisson.String():
		sp = engine.Poisson
	default:
		return nil, fmt.Errorf("arrivals spaced %q: want even or poisson", p.Spacing)
	}
	r := engine.Rate{Start: p.Start}
	for _, st := range p.Stages {
		r.Stages = append(r.Stages, engine.Stage{Target: st.Target, Duration: st.Duration})
	}
	return engine.NewSchedule(r, sp, p.Seed)
}

// pacer is the agent's engine.Pacer of p: nil for Stop.
func (p Pacer) pacer() (engine.Pacer, error) {
	if p.Stop {
		return nil, nil
	}
	sc, err := p.schedule()
	if err != nil {
		return nil, err
	}
	return engine.NewStride(sc, p.Anchor, p.Cycle, p.Positions, p.From, p.Offset)
}

// Flush asks an agent for its samples at the coordinator's tick N, so that
// every agent's second is the coordinator's: one clock for the run's
// seconds, windows and levels.
type Flush struct {
	N uint64 `json:"n"`
}

// Start is what an agent runs: the scenario as the coordinator loaded it
// (checked by its hash after loading), and the run's options.
type Start struct {
	Path        string              `json:"path"` // the scenario's, for messages
	Source      []byte              `json:"source"`
	Files       []scenario.DataFile `json:"files"`
	Hash        string              `json:"hash"`
	Vars        map[string]string   `json:"vars,omitempty"`
	MaxSteps    uint64              `json:"max_steps,omitempty"`
	LoadTimeout time.Duration       `json:"load_timeout,omitempty"`
	MaxData     int64               `json:"max_data,omitempty"`
	// Shared is what the scenario's init returned on the coordinator, as
	// JSON; empty without an init.
	Shared []byte `json:"shared,omitempty"`

	Target  string           `json:"target"` // with its credentials, if it has any
	Seed    uint64           `json:"seed"`
	Timeout time.Duration    `json:"timeout"`
	Grace   time.Duration    `json:"grace"`
	Client  transport.Config `json:"client"` // TLS, compression
	// FreshSessions: every user's user.session starts empty (engine.Config).
	FreshSessions bool `json:"fresh_sessions,omitempty"`
	// SetupOnly: users set up and run no action (engine.Config).
	SetupOnly bool `json:"setup_only,omitempty"`
	// SetupRetries: a user's retries of a failed setup before it gives up
	// (engine.Config: 0 the default, negative never).
	SetupRetries int      `json:"setup_retries,omitempty"`
	MaxBody      int      `json:"max_body,omitempty"`
	SourceAddrs  []string `json:"source_addrs,omitempty"` // --source-addr: user i connects from [(i-1) % len]
	Agents       int      `json:"agents"`                 // how many agents: user ids interleave
	// From is where this agent's users' ids begin in its place's
	// sequence: 0 for the run's first agents, past any id a lost agent
	// could have given for one that took its place.
	From int `json:"from,omitempty"`
	// Weights are the cores of each place at the run's start: the rows of
	// a pick="unique" dataset are split by them, a block to each place.
	Weights []int `json:"weights,omitempty"`
	// Metrics asks for the agent's Prometheus families every second: the
	// coordinator serves them (--metrics-listen) or checks them (ceiling).
	Metrics bool `json:"metrics,omitempty"`
}

// Users is an agent's share of the run's users.
type Users struct {
	N int `json:"n"`
}

// Status is an agent's state, sent once a second.
type Status struct {
	Users int            `json:"users"`
	Ready int            `json:"ready"`
	Began int64          `json:"began"`
	SetUp int64          `json:"set_up"`
	Late  int64          `json:"late"`
	Doing map[string]int `json:"doing,omitempty"`
	// Overflowed: its request names passed metrics.MaxNames.
	Overflowed bool `json:"overflowed,omitempty"`
	// Flushed is the last Flush answered: the snapshot before this status
	// holds the samples up to it.
	Flushed uint64 `json:"flushed,omitempty"`
	// Its requests over the whole run (setups' apart), and their
	// latency, for its line in the result: the coordinator merges the
	// snapshots into the run's figures without keeping them by agent.
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	// The open model: its arrivals over the run that started, and that
	// found no user of its pool free (dropped).
	Arrivals int64 `json:"arrivals,omitempty"`
	Dropped  int64 `json:"dropped,omitempty"`
	// The generator's lateness and burstiness on this agent over the run
	// (its worst second): the merged figures say what the target
	// received, these which agent stalled.
	Lateness   *result.Lateness   `json:"lateness,omitempty"`
	Burstiness *result.Burstiness `json:"burstiness,omitempty"`

	CPUSeconds float64 `json:"cpu_seconds"`
	PeakRSSMB  float64 `json:"peak_rss_mb"`
	// Memory, once set, is why the agent cancelled its users: its memory
	// passed its --max-memory. The coordinator stops the run with it.
	Memory *memlimit.Error `json:"memory,omitempty"`
	// Error, when set, is why the agent cannot run (its scenario did not
	// load, or loaded to another hash); it ends the stream after it.
	Error string `json:"error,omitempty"`
}

// Done is an agent's last word.
type Done struct {
	UsersByType map[string]int `json:"users_by_type"`
	// Leaving: the agent leaves during the run (it was told to stop, as
	// SIGTERM does), not because the coordinator stopped it; its users
	// are to move to the other agents.
	Leaving bool `json:"leaving,omitempty"`
}

// ids is the id of agent index's nth user among agents: they interleave
// (index+1, index+1+agents, ...), so no two agents' users share an id;
// the agent that takes a lost one's place goes on from its place's nth
// id after from.
func ids(index, agents, from int) func(n int) int {
	return func(n int) int { return index + 1 + (from+n-1)*agents }
}

// placeIDs is how many ids each agent to hold a place may give: the
// gen-th takes them from gen·placeIDs on.
const placeIDs = 1 << 24
