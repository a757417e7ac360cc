package engine

import "time"

// replayAfter is how late a pause may end before its user waits as long
// again (vu.think): a stall of the generator woke it, with every user whose
// pause ended during the stall. Waiting its lateness again starts each of
// them at the stall's end plus how long before the end it was due: the
// stall's starts replayed, mirrored, over as long as the stall lasted,
// rather than all at once. Under it (a busy core's scheduling delays; a
// bunch finer than the 10 ms burstiness is measured in), a user starts at
// once: a second timer for every late wake cost 2-3% of a chat request's
// CPU with 4,000 users on one core. The open model's dispatcher replays
// the arrivals a stall made late by the same rule (openModel.due).
const replayAfter = 10 * time.Millisecond

// phaseJitter is how far a think time may move either way, as a share of
// it, for each pause its own (catchUp's jitter, from the user's seed).
const phaseJitter = 0.01

// catchUp is a closed-model user's pause before its next action: the think
// time d, moved by jitter (in [-1, 1], the pause's own: phaseJitter of d
// either way), less what the user still owes its own schedule (debt: how
// late its earlier pauses ended, not yet made up), and the debt left
// after it.
//
// A stall of the generator (the collector, the scheduler, a neighbour on
// the machine) wakes every user whose pause ended during it at the same
// moment, the stall's end. With a constant think time those users would
// then act together for good, and each stall would add to the bunch: the
// target receives bursts the scenario never asked for. Shortening the next
// pause by the lateness puts each user back on its own phase, whatever its
// neighbours did, so a bunch lasts one cycle.
//
// Users whose requests were in flight during a stall also end their
// actions together, and nothing says how long those actions would have
// taken: the jitter parts them again within a few cycles (1% of a 1 s
// think time is up to 10 ms either way, where such a stall on a busy
// machine joins users within a few ms), and leaves the mean think time as
// the scenario wrote it.
//
// Two bounds keep a stall from turning into a burst of its own: a pause
// makes up at most half of d (a user never acts twice in quick
// succession: the rest is made up over the next pauses), and whole think
// times of lateness are forgiven (debt is taken modulo d): a user that
// slept through a whole cycle keeps its phase, not its count of actions.
// d <= 0 (no think time) has no phase to keep: the debt is dropped.
func catchUp(d, debt time.Duration, jitter float64) (pause, left time.Duration) {
	if d > 0 {
		d += time.Duration(float64(d) * phaseJitter * jitter)
	}
	if d <= 0 || debt <= 0 {
		return max(d, 0), 0
	}
	debt %= d
	c := min(debt, d/2)
	return d - c, debt - c
}
