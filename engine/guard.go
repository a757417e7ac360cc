package engine

import (
	"time"

	"github.com/headroom-dev/headroom/internal/wakeup"
)

// The open model's dispatcher sleeps until its next arrival on a Go timer,
// and has the kernel end that sleep on time where Go's idle poller would
// not (internal/wakeup): which waits it guards, and why only those.

// guardedGaps is the shortest gap between arrivals (a moving mean) at which
// the dispatcher has the kernel end its waits on time (internal/wakeup).
// When the process goes idle with the next arrival under a millisecond away,
// Go's poller sleeps a whole millisecond, and that millisecond's arrivals
// leave late and together: at 2,000/s on one core, late by p50 0.55 ms and
// p99 1.10 ms; guarded, 0.04 and 0.06. A guarded wake-up costs ~35 µs of
// CPU on the VM measured (its timer interrupt and the wake from idle: at
// 10,000/s, 17% of a core became 54%), so at higher rates the waits are
// left to the runtime and its millisecond: at most ~10,000 guarded
// wake-ups a second, ~35% of a core there, however many cores the process
// has (the wake-ups are all the dispatcher's, on the core it runs on). The
// mean, not each gap: a Poisson schedule at 5,000/s has 39% of its gaps
// under 100 µs, and left them late by p99 1.1 ms when each gap decided
// (2026-11-30, bench/arrival-precision.sh, docs/BENCHMARKS.md).
const guardedGaps = 100 * time.Microsecond

// guarded is the dispatcher's guard and when it arms it: for each wait
// while the gaps between waits are from or more on average.
type guarded struct {
	w           waker
	from        time.Duration // guardedGaps
	last, armed time.Time     // the last wait's end, and the guard's
	gap         time.Duration // between waits' ends (arrivals', when on time), a moving mean: it bounds the wake-ups a second
}

// wait is a wait from now until next: the guard is armed for it unless the
// waits come closer than from, or it is armed for next already (a user
// came free meanwhile, and the wait is the same again).
func (g *guarded) wait(now, next time.Time) {
	switch {
	case g.last.IsZero() || next.Equal(g.last):
	case g.gap == 0:
		g.gap = next.Sub(g.last)
	default:
		g.gap += (next.Sub(g.last) - g.gap) / 16
	}
	g.last = next
	if (g.gap == 0 || g.gap >= g.from) && !next.Equal(g.armed) {
		g.w.Arm(next.Sub(now))
		g.armed = next
	}
}

// waker is what the dispatcher needs of a wakeup.Guard.
type waker interface {
	Arm(time.Duration)
	Close()
}

// newGuard is the dispatcher's wake-up guard (tests record its arms).
var newGuard = func() waker { return wakeup.New() }
