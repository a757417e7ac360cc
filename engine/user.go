package engine

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario"
)

// State is where a user is in its life. The only transitions are:
//
//	Starting -> SettingUp -> Acting <-> Thinking   (closed model)
//	Starting -> SettingUp -> Idle <-> Acting       (open model: a pool user waits, idle, for an arrival)
//	Acting, Thinking, Idle -> Stopping  (removed: finish the action, or be cancelled after the grace period)
//	Starting, SettingUp -> Stopping     (removed: cancelled at once, Engine.retire)
//	Stopping -> TearingDown -> Done
//	Stopping -> Done                          (cancelled, or no teardown)
//
// Its background lanes (user.background, user.every) run beside it from
// the moment its code starts them until Stopping, which cuts them and
// waits for them to end; a failed setup stops those it started.
//
// A failed setup is retried after a pause that doubles with each retry
// (setupBackoff: from the think time, jittered, at most 30 s), from a new
// scenario.User and transport.Client (see vu.renew); the user stays in
// SettingUp meanwhile.
type State int32

const (
	Starting State = iota
	SettingUp
	Acting
	Thinking
	Stopping
	TearingDown
	Done
	Idle
)

func (s State) String() string {
	return [...]string{"starting", "setting-up", "acting", "thinking", "stopping", "tearing-down", "done", "idle"}[s]
}

// lateAfter is how late a think time may end before the wake-up counts as
// late: the generator's scheduler could not run the user on time.
const lateAfter = 50 * time.Millisecond

// vu is one virtual user: its scenario runtime, its connections, its state.
type vu struct {
	id int
	// fresh makes a new scenario runtime and client for this user.
	fresh func() (*scenario.User, scenario.HTTPClient)
	// user and client are written by the user's goroutine alone (renew)
	// and read by cancel from others: mu guards them against it.
	mu       sync.Mutex
	user     *scenario.User
	client   scenario.HTTPClient
	state    atomic.Int32
	stop     chan struct{} // closed when the user is asked to stop
	done     chan struct{} // closed when its goroutine has ended
	canceled atomic.Bool
	late     *atomic.Int64          // engine-wide count of wake-ups later than lateAfter
	slot     int                    // its place among the users running at once (Engine.slot): its account's
	setUp    *atomic.Int64          // engine-wide count of users past setup
	began    *atomic.Int64          // engine-wide count of users that began setup
	hold     *atomic.Bool           // the engine's Hold: wait past setup, acting on nothing
	doing    atomic.Pointer[string] // the action running (or setup); nil otherwise
	rec      *metrics.Shard         // where the time to set up is recorded
	spread   time.Duration          // Config.Spread, after its default
	retries  int                    // Config.SetupRetries, after its default: at most this many retries of a failed setup
	timer    *time.Timer            // pause's; the user's goroutine's alone
	debt     time.Duration          // how late its pauses ended, not yet made up (catchUp); the user's goroutine's alone
	pauses   uint64                 // think times taken: each one's jitter is its own (catchUp)
	arrive   chan arrival           // a pool user's (open model): the arrival it is handed; nil otherwise
	connect  bool                   // a pool user set up in advance: opens its connection at setup (preconnect)
	warm     *warm                  // the engine's: where its actions and handlers run
	stalled  func()                 // the engine's stalled: a test's stall of the process, or nil
	stalls   *stallLog              // the engine's: the generator's stalls its users saw
	acted    time.Time              // when its last action started (its pause's end); zero before the first; the user's goroutine's alone
	took     time.Duration          // how long its last action took, less what a stall of the generator added (think); the user's goroutine's alone
}

var setupName = scenario.SetupAction

func (v *vu) State() State { return State(v.state.Load()) }

func (v *vu) set(s State) { v.state.Store(int32(s)) }

// run is a closed-model user's goroutine. A panic leaves it Done, its
// connection closed and done closed, for the engine to recover.
func (v *vu) run(onAction func(user int, action string), setupOnly bool) {
	defer v.exit()
	if !v.begin(v.spread) {
		v.finish()
		return
	}
	if setupOnly {
		v.set(Thinking)
		for v.pause(time.Hour) {
		}
		v.finish()
		return
	}
	for v.hold != nil && v.hold.Load() {
		v.set(Thinking)
		if !v.pause(100 * time.Millisecond) {
			v.finish()
			return
		}
	}
	// The first action comes after a random part of one think time, so
	// users set up together are spread over the think cycle and stay so:
	// with a constant think time they would otherwise act in lockstep
	// forever.
	if v.spread >= 0 {
		v.set(Thinking)
		if !v.think(time.Duration(v.user.Spread(1) * float64(v.user.Think()))) {
			v.finish()
			return
		}
	}
	think := time.Duration(-1) // the pause before the action; none yet
	for {
		select {
		case <-v.stop:
			v.finish()
			return
		default:
		}
		a := v.user.Next()
		v.set(Acting)
		if onAction != nil {
			onAction(v.id, a.Name)
		}
		v.doing.Store(&a.Name)
		if think == 0 {
			// No pause since the last action (a think time of 0, as a throughput test has): the
			// collector had no quiet stack to shrink, so the user's own goroutine still has the
			// stack the last action grew, and the worker's hand-over (two goroutine switches,
			// ~0.3 µs) would be a few percent of a bare request.
			v.user.Run(a)
		} else {
			v.warm.do(func() { v.user.Run(a) })
		}
		v.doing.Store(nil)
		v.set(Thinking)
		think = v.user.Think()
		if !v.think(think) {
			v.finish()
			return
		}
	}
}

// exit, deferred first by a user's goroutine, ends it whatever happened:
// the user's lanes end (user.Close waits for them) before it is Done;
// then whichever client v holds at the end (renew replaces it) is
// closed, and with it the connection. Each step runs even if one before
// it panicked.
func (v *vu) exit() {
	defer close(v.done)
	defer func() { v.client.Close() }()
	defer func() {
		if v.State() != Done {
			v.set(Done) // only a panic gets here before finish
		}
	}()
	v.user.Close() // and the dataset rows, for users added later
}

// begin takes the user from Starting through its setup, retried from a
// clean user after each failure (renew) until it succeeds, the user is
// stopped, or it failed v.retries times after its first attempt and gives
// up (false; recorded as scenario.GaveUpAction). Users added together start within spread of each
// other, not all at once: a login storm of one microsecond is not what
// people do. spread < 0: at once.
func (v *vu) begin(spread time.Duration) bool {
	if !v.pause(time.Duration(v.user.Spread(0) * float64(max(spread, 0)))) {
		return false
	}
	v.set(SettingUp)
	v.began.Add(1)
	since, retries := time.Now(), 0
	for {
		v.doing.Store(&setupName)
		var out metrics.Outcome
		v.warm.do(func() { out = v.user.Setup() }) // as an action after a pause: the user's own stack stays small while it waits
		ok := out == metrics.OK
		v.doing.Store(nil)
		if ok {
			if v.connect {
				v.preconnect()
			}
			v.setUp.Add(1)
			v.rec.Record(metrics.Sample{Kind: metrics.Action, Name: scenario.ReadyAction, Setup: true, Latency: time.Since(since)})
			return true
		}
		if retries == v.retries && !v.canceled.Load() {
			v.rec.Record(metrics.Sample{Kind: metrics.Action, Name: scenario.GaveUpAction, Setup: true, Latency: time.Since(since)})
			return false
		}
		retries++
		if v.canceled.Load() || !v.pause(setupBackoff(v.user.Think(), retries, v.user.Spread(uint64(retries)))) || !v.renew() {
			return false
		}
	}
}

// preconnect opens the user's connection to the target, where its client
// can (transport.Client.Preconnect), before it counts as set up. A
// failure is left to its first request to meet and report.
func (v *vu) preconnect() {
	v.mu.Lock()
	c := v.client
	v.mu.Unlock()
	if p, ok := c.(interface{ Preconnect() error }); ok {
		_ = p.Preconnect()
	}
}

// Failed setups back off: a server that cannot log users in fast enough
// must not get each failure back at once, or an overload becomes
// permanent (issue 31: 557 attempts for 100 users).
const (
	minSetupBackoff = 500 * time.Millisecond
	maxSetupBackoff = 30 * time.Second
)

// setupBackoff is the pause before a failed setup's retry n (1, 2, ...):
// the user's think time (at least minSetupBackoff) doubled for each retry
// before it, at most maxSetupBackoff, times a jitter of 0.5 to 1.5 (from
// u in [0, 1), the user's own), so that users whose setups failed together
// do not retry together.
func setupBackoff(think time.Duration, n int, u float64) time.Duration {
	d := max(think, minSetupBackoff)
	for i := 1; i < n && d < maxSetupBackoff; i++ {
		d *= 2
	}
	return time.Duration(float64(min(d, maxSetupBackoff)) * (0.5 + u))
}

// handle runs the handlers of the WebSocket messages waiting, checking
// for a stop between each; false means stop.
func (v *vu) handle() bool {
	for m := v.user.NextMessage(); m != nil; m = v.user.NextMessage() {
		select {
		case <-v.stop:
			return false
		default:
		}
		v.warm.do(func() { v.user.Handle(m) })
	}
	return true
}

// think is a closed-model user's pause before an action: the think time
// d, moved by its own jitter and less what the user owes its own schedule
// (catchUp), so that a stall of the generator does not leave it in step
// with the users it woke beside; woken late by a stall, it waits as long
// again (replayAfter), so those users start over the stall's length after
// it, not at once. It records when the pause was meant to end and when the
// user started (metrics.Shard.Wake): the generator's lateness and
// burstiness. False means stop.
//
// The action before the pause owes the schedule too: a stall of the
// generator holds every action in flight and ends them together, at its
// end, and a pause timed from there would start those users together for
// good (issue 50: the meant schedule bunched to 2-3 times the fair share
// after a search's stalls). An action that took more than replayAfter
// longer than the user's last is asked about (stretched): the part of it
// the generator was stalled, up to how much longer it took, is owed as a
// late wake is, so the user's next start is where its own phase puts it.
// What the target took is not made up: a slow server slows a closed
// model's users, as it should.
func (v *vu) think(d time.Duration) bool {
	end := time.Now() // the action's end, and the pause's start
	acted := v.acted
	v.acted = time.Time{}
	if d <= 0 { // no think time (a throughput test): no schedule to keep
		v.debt = 0
		return v.pause(0)
	}
	v.pauses++
	owed, asked := v.stretched(acted, end, d)
	if owed < 0 {
		return false // stopped during the pause's first part
	}
	p, left := catchUp(d, v.took, v.debt+owed, 2*v.user.Spread(1000+v.pauses)-1)
	var want, woke time.Time
	var ok bool
	if asked { // the pause's first part is behind it
		want, woke, ok = v.waitUntil(end.Add(p))
	} else {
		want, woke, ok = v.wait(p)
	}
	if !ok {
		return false
	}
	v.debt = 0
	if want.IsZero() {
		return true
	}
	if late := woke.Sub(want); late > replayAfter {
		// Woken late, most likely with every user whose pause ended
		// during the same stall: wait as long again, so that those users
		// start over the stall's length after it (mirrored: the one due
		// first starts last), not in one burst (replay).
		if _, _, ok := v.wait(late); !ok {
			return false
		}
		woke = time.Now()
	}
	v.debt = left + max(woke.Sub(want), 0)
	v.acted = woke
	v.rec.Wake(want, woke)
	return true
}

// stretched looks at the action that ran from acted to end (acted zero:
// none, as before the first): if it took more than replayAfter longer
// than the user's last, the pause's first part (stallSettle, at most a
// third of d: the least a pause is, catchUp) is waited, and then the part
// of the action a stall of the generator took, up to how much longer it
// took, is owed (asked true; owed -1: the user was stopped meanwhile). It
// keeps how long the action took, less what is owed, for the next.
func (v *vu) stretched(acted, end time.Time, d time.Duration) (owed time.Duration, asked bool) {
	if acted.IsZero() {
		v.took = 0
		return 0, false
	}
	took, last := end.Sub(acted), v.took
	v.took = took
	over := took - last
	if over <= replayAfter || v.stalls == nil {
		return 0, false
	}
	if !v.pause(min(stallSettle, d/3)) {
		return -1, true
	}
	stalled := v.stalls.within(acted, end)
	if last == 0 {
		// Its first action: how long it takes the user does not know,
		// nor so where its phase was. It takes a new one, its own, in
		// the stall: users whose first actions one stall ended together
		// start over the stall's length, not at once.
		v.took = took - stalled
		return time.Duration(v.user.Spread(1<<32+v.pauses) * float64(stalled)), true
	}
	owed = min(over, stalled)
	v.took = took - owed
	return owed, true
}

// waitUntil waits until due, as wait does (the want it returns is due,
// or later if a handler of the user's own ran past it); a due already
// past returns at once, due as want, now as woke: late.
func (v *vu) waitUntil(due time.Time) (want, woke time.Time, ok bool) {
	want, woke, ok = v.wait(time.Until(due))
	if !ok {
		return want, woke, false
	}
	if want.IsZero() {
		return due, time.Now(), true
	}
	if want.Before(due) { // the timer's own now came before due by a few ns
		want = due
	}
	return want, woke, true
}

// pause waits d, or less if the user is stopped; false means stop.
func (v *vu) pause(d time.Duration) bool {
	_, _, ok := v.wait(d)
	return ok
}

// wait waits d, or less if the user is stopped (ok false), and returns
// when the user was due (its timer's time, or the end of a handler of its
// own that ran past it) and when it woke (both zero for d <= 0: no
// timer): the difference is the generator's lateness. Meanwhile, and first, it runs the handlers of the
// WebSocket messages that arrive (never while an action runs): they take
// from the pause, as a person reads a notification while idle.
func (v *vu) wait(d time.Duration) (want, woke time.Time, ok bool) {
	waiting := v.user.Waiting()
	if !v.handle() { // what arrived during the action first
		return want, woke, false
	}
	select {
	case <-v.stop:
		return want, woke, false
	default:
	}
	if d <= 0 {
		return want, woke, true
	}
	if v.timer == nil {
		v.timer = time.NewTimer(d)
	} else {
		v.timer.Reset(d)
	}
	want = time.Now().Add(d)
	for {
		select {
		case <-v.stop:
			v.timer.Stop()
			return want, woke, false
		case <-waiting:
			if !v.handle() {
				v.timer.Stop()
				return want, woke, false
			}
			// A handler that ran past the pause's end held the user up,
			// not the generator: the user was due when it returned.
			if now := time.Now(); now.After(want) {
				want = now
			}
		case <-v.timer.C:
			if v.stalled != nil {
				v.stalled()
			}
			woke = time.Now()
			if late := woke.Sub(want); late > replayAfter {
				if late > lateAfter {
					v.late.Add(1)
				}
				if v.stalls != nil {
					v.stalls.saw(want, woke)
				}
			}
			return want, woke, true
		}
	}
}

// finish ends the user: its background lanes first (their requests in
// flight cut, waited for), so teardown runs alone and a Done user has no
// goroutine left but its own.
func (v *vu) finish() {
	v.set(Stopping)
	v.user.StopLanes("user stopped")
	if !v.canceled.Load() {
		v.set(TearingDown)
		v.user.Teardown()
	}
	v.set(Done)
}

// renew gives the user a new scenario runtime and client before its setup
// is tried again, so that nothing of the failed attempt (user.state, the
// headers it set, cookies, the connection) carries over to the next. It
// closes the old client. It returns false, keeping the failed user, when
// the user was cancelled meanwhile.
func (v *vu) renew() bool {
	user, client := v.fresh()
	v.mu.Lock()
	if v.canceled.Load() { // cancel has the old pair, or will take it
		v.mu.Unlock()
		client.Close()
		user.Close()
		return false
	}
	oldUser, old := v.user, v.client
	v.user, v.client = user, client
	v.mu.Unlock()
	old.Close()
	oldUser.Close() // its dataset rows, if the failed setup took some
	return true
}

// cancel stops the user's code and its request in flight, for reason.
// Safe from any goroutine.
func (v *vu) cancel(reason string) {
	v.canceled.Store(true)
	v.mu.Lock()
	user, client := v.user, v.client
	v.mu.Unlock()
	user.Cancel(reason)
	client.Cancel()
}

// UsersByType counts the users the engine has started, removed ones
// included, by the name of their scenario.UserType.
func (e *Engine) UsersByType() map[string]int {
	e.mu.Lock()
	n := e.added
	e.mu.Unlock()
	if e.cfg.IDs == nil {
		return e.cfg.Scenario.UsersByType(n)
	}
	out := e.cfg.Scenario.UsersByType(0)
	for i := 1; i <= n; i++ {
		out[e.cfg.Scenario.TypeOf(e.cfg.IDs(i)).Name]++
	}
	return out
}
