package engine

import "time"

// catchUp is a closed-model user's pause before its next action: the think
// time d less what the user still owes its own schedule (debt: how late its
// earlier wake-ups fired, not yet made up), and the debt left after it.
//
// A stall of the generator (the collector, the scheduler, a neighbour on
// the machine) wakes every user whose pause ended during it at the same
// moment, the stall's end. With a constant think time those users would
// then act together for good, and each stall would add to the bunch: the
// target receives bursts the scenario never asked for. Shortening the next
// pause by the lateness puts each user back on its own phase, whatever its
// neighbours did, so a bunch lasts one cycle.
//
// Two bounds keep a stall from turning into a burst of its own: a pause
// makes up at most half of d (a user never acts twice in quick
// succession: the rest is made up over the next pauses), and whole think
// times of lateness are forgiven (debt is taken modulo d): a user that
// slept through a whole cycle keeps its phase, not its count of actions.
// d <= 0 (no think time) has no phase to keep: the debt is dropped.
func catchUp(d, debt time.Duration) (pause, left time.Duration) {
	if d <= 0 || debt <= 0 {
		return max(d, 0), 0
	}
	debt %= d
	c := min(debt, d/2)
	return d - c, debt - c
}
