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
// either way), less what the user owes its own schedule (debt: how late
// its last pause ended, and the part of its last action a stall of the
// generator took: vu.think).
//
// A stall of the generator (the collector, the scheduler, a neighbour on
// the machine) wakes every user whose pause ended during it at the same
// moment, the stall's end, and ends every action in flight then. With a
// constant think time those users would then act together for good, and
// each stall would add to the bunch: the target receives bursts the
// scenario never asked for. Shortening the next pause by the debt puts
// each user back on its own phase, whatever its neighbours did, so a
// bunch lasts one cycle.
//
// Users whose requests the target answered together (its own pause) also
// end their actions together: that is the target's doing, not made up;
// the jitter parts them again within a few cycles (1% of a 1 s think time
// is up to 10 ms either way), and leaves the mean think time as the
// scenario wrote it.
//
// A user's cycle is its think time and its action (took: how long its
// last action took, less what a stall added). A pause is never shorter
// than half of d (a user never acts twice in quick succession): a user
// that owes more than half a pause, and more than replayAfter past it,
// waits to its phase in the cycle after (one action fewer, its phase
// kept); a smaller rest (left) is made up over the next pauses, as is any
// rest when d itself is under twice replayAfter (phases finer than the
// 10 ms the schedule is judged in, where an action lost would matter more
// than a phase). Whole cycles of lateness are forgiven (debt is taken
// modulo the cycle): a user that slept through a whole cycle keeps its
// phase, not its count of actions. Making up half a pause and carrying a
// larger rest would not do: after a stall longer than a quarter of d, the
// users replayed last (they owe twice their lateness) would start, at
// half a pause, on the phases of those replayed first: twice the fair
// share for a cycle. d <= 0 (no think time) has no phase to keep: the
// debt is dropped.
func catchUp(d, took, debt time.Duration, jitter float64) (pause, left time.Duration) {
	if d > 0 {
		d += time.Duration(float64(d) * phaseJitter * jitter)
	}
	if d <= 0 || debt <= 0 {
		return max(d, 0), 0
	}
	took = max(took, 0)
	debt %= d + took
	if c := min(debt, d/2); debt-c <= replayAfter || d <= 2*replayAfter {
		return d - c, debt - c
	}
	return 2*d + took - debt, 0
}
