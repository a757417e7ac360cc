package runner

import (
	"context"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// Fleet is the users a run drives, wherever they run: this process's
// engine (localFleet), or agents' (issue 13: the coordinator's fleet
// satisfies the same interface, so the runners do not care which). Counts
// are the whole fleet's; Drain merges what every part recorded since the
// last Drain, exactly.
type Fleet interface {
	// Init runs the scenario's init, once, before any user.
	Init(ctx context.Context) error
	// SetUsersBy moves the user count towards n, adding at most maxAdd
	// users; it returns the users running after it.
	SetUsersBy(n, maxAdd int) int
	Users() int                  // users running (not those stopping)
	Ready() int                  // users running past their setup
	Began() int64                // users that began setup, ever
	SetUp() int64                // users that finished setup, ever
	Late() int64                 // think-time wake-ups more than 50 ms late, ever
	Doing() map[string]int       // what running users do now, by action (or setup)
	UsersByType() map[string]int // users started, by type
	Abort(reason string)         // no more users: headroom is stopping the run
	// Hold, on, has users past setup wait instead of acting, until
	// Hold(false) (engine.Engine.Hold: a search's warm-up). Agents do
	// not yet: the command line refuses --warm-up with them.
	Hold(on bool)
	// StartOpen turns the fleet into the open model's pool of users
	// (engine.Engine.StartOpen): it adds m.PreAllocated users, which
	// begin their setup; no arrival comes before SetPacer. A fleet that
	// cannot run the open model says so (agents of a headroom before it).
	StartOpen(m engine.OpenModel) error
	// SetPacer starts p's schedule now, in place of any other
	// (engine.Engine.SetPacer); nil stops the arrivals. Agents take an
	// *engine.Schedule only, and share its arrivals between them.
	SetPacer(p engine.Pacer) error
	Stop()                        // removes every user and waits until all are done
	Drain(into *metrics.Snapshot) // merges the samples recorded since the last Drain into into
	Overflowed() bool             // request names passed metrics.MaxNames
	// Degraded says why what was drained since the last call is not the
	// whole fleet's (an agent lost, its users not yet set up again
	// elsewhere), or "": the runners keep such seconds out of their
	// figures. Called once after each Drain.
	Degraded() string
	// Stopped is why part of the fleet stopped its users on its own, for
	// the run to stop with (an agent's memory passed its --max-memory: a
	// *MemoryError), or nil. Called once a tick.
	Stopped() error
}

// agentsFleet is a Fleet of agents: it reports each, for the result.
type agentsFleet interface {
	Agents(degradedS float64) *result.Agents
}

// localFleet is the users of this process: an engine and its recorder.
type localFleet struct {
	*engine.Engine
	rec *metrics.Recorder
}

func (f localFleet) Drain(into *metrics.Snapshot) { f.rec.Drain(into) }
func (f localFleet) Overflowed() bool             { return f.rec.Overflowed() }
func (f localFleet) Degraded() string             { return "" }
func (f localFleet) Stopped() error               { return nil } // this process's watch aborts the run itself
