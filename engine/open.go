package engine

import (
	"container/heap"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/transport"
)

// The open model (issue 14): iterations start when a Pacer says they are
// due, whatever the target does, each one action (chosen by weight, as
// the closed model chooses) run by a user of a bounded pool.
//
//   - A user of the pool is a user as in the closed model: its own setup,
//     state, random streams and keep-alive connection, kept from one
//     iteration to the next (or, with OpenModel.Connections, one of a
//     shared transport.Pool). One set up in advance opens its connection
//     at its setup, so the window's first arrivals do not each dial. Its
//     WebSocket messages are handled while it is idle. The scenario's
//     think time does not apply: the schedule paces the iterations.
//   - An arrival goes to the user free longest. If none is free, it waits
//     for one up to OpenModel.MaxWait after its intended time, and is then
//     dropped: a metrics.Arrival sample of outcome DroppedArrival, never a
//     silent skip. Meanwhile a user is added on demand, up to MaxUsers,
//     one per arrival waiting (one at a time with MaxWait 0, as k6 does).
//   - The dispatcher never waits for a user: a pool too small shows as
//     drops, and the schedule does not fall behind.
//   - A stall of the process (the collector, a busy machine) that wakes
//     the dispatcher more than replayAfter late does not hand out what
//     came due meanwhile in one burst: each such arrival is replayed as
//     late again as it was (mirrored over the stall's end, as a closed
//     model's users are, vu.think), so the target gets the stall's
//     arrivals over as long as the stall lasted, beside those due then.
//   - Each arrival that starts is counted with how late it started (the
//     dispatcher woke late, a user's setup, the wait for a user), and its
//     action and requests are counted from its intended start, their
//     service time beside (scenario.User.RunLate, metrics.Sample.Intended).

// ArrivalsName is the name arrivals are counted under unless
// OpenModel.Name gives another.
const ArrivalsName = "(arrivals)"

// OpenModel sets up the open model's pool of users.
type OpenModel struct {
	// PreAllocated users are added, and begin their setup (spread as
	// Config.Spread says), at StartOpen: before the first arrival, if
	// the caller waits for Ready. 0 <= PreAllocated <= MaxUsers.
	PreAllocated int
	// MaxUsers bounds the pool (>= 1): users past PreAllocated are added
	// on demand, and set up at once, when arrivals find none free.
	MaxUsers int
	// MaxWait is how long after its intended time an arrival may still
	// start, having waited for a user to come free; then it is dropped.
	// 0 drops an arrival that finds no user free at once (k6's rule).
	// An arrival replayed after a stall waits from its replay time.
	MaxWait time.Duration
	// Name is what arrivals are counted under (metrics.Snapshot.Arrivals);
	// default ArrivalsName.
	Name string
	// Connections, if above 0, makes the pool's users share that many
	// keep-alive connections to the target (transport.Pool) instead of
	// each holding its own: a request waits for a free one, and the wait
	// is in its latency from the intended start, not in its service time.
	Connections int
}

// Check refuses a model StartOpen cannot start: a bound below 1, users
// set up in advance outside [0, MaxUsers], a negative wait or count of
// connections.
func (m OpenModel) Check() error {
	switch {
	case m.MaxUsers < 1:
		return fmt.Errorf("open model: at most %d users: want 1 or more", m.MaxUsers)
	case m.PreAllocated < 0 || m.PreAllocated > m.MaxUsers:
		return fmt.Errorf("open model: %d users set up in advance: want 0 to the %d at most", m.PreAllocated, m.MaxUsers)
	case m.MaxWait < 0:
		return fmt.Errorf("open model: a wait for a user of %v: want 0 or more", m.MaxWait)
	case m.Connections < 0:
		return fmt.Errorf("open model: %d shared connections: want 0 (each user its own) or more", m.Connections)
	}
	return nil
}

// ErrNotOpen is SetPacer's error on an engine StartOpen was not called on.
var ErrNotOpen = errors.New("engine: the open model was not started (StartOpen)")

// openModel is the pool and the schedule of an engine in the open model.
type openModel struct {
	cfg  OpenModel
	rec  *metrics.Shard // where the dispatcher records the arrivals it drops or cancels
	wake chan struct{}  // (1) SetPacer woke the dispatcher
	quit chan struct{}  // closed by halt
	done chan struct{}  // closed when the dispatcher has ended
	once sync.Once

	mu      sync.Mutex
	pacer   Pacer
	origin  time.Time // when pacer's schedule began
	base    int64     // arrivals dispatched before pacer's
	count   int64     // arrivals dispatched, ever
	idle    []*vu     // users free, longest free first
	waiting []arrival // arrivals waiting for a user, oldest first
	replay  replays   // arrivals a stall made late, by their replay time
	size    int       // users in the pool, those stopped aside
	growing int       // users added on demand, not yet set up
}

// arrival is one arrival handed to a user.
type arrival struct {
	due time.Time // its intended start
	at  time.Time // when it is handed out: due, or its replay after a stall
}

// replays is a min-heap of arrivals by their replay time (container/heap).
type replays []arrival

func (r replays) Len() int           { return len(r) }
func (r replays) Less(i, j int) bool { return r[i].at.Before(r[j].at) }
func (r replays) Swap(i, j int)      { r[i], r[j] = r[j], r[i] }
func (r *replays) Push(x any)        { *r = append(*r, x.(arrival)) }
func (r *replays) Pop() any {
	old := *r
	a := old[len(old)-1]
	*r = old[:len(old)-1]
	return a
}

// maxBatch bounds the arrivals one step dispatches under the lock: users
// coming free get their turn even when a schedule is far behind.
const maxBatch = 1024

// StartOpen puts the engine in the open model: it adds m.PreAllocated
// users to the pool, which begin their setup; no arrival comes before
// SetPacer. An engine runs one model: StartOpen refuses an engine with
// users of the closed model, one started already or one aborted, and
// SetUsers adds no user after it (Stop still stops them all).
func (e *Engine) StartOpen(m OpenModel) error {
	if err := m.Check(); err != nil {
		return err
	}
	if m.Name == "" {
		m.Name = ArrivalsName
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.reason != "":
		return fmt.Errorf("open model: the engine was aborted (%s)", e.reason)
	case e.open != nil:
		return errors.New("open model: started already")
	case len(e.users) > 0:
		return fmt.Errorf("open model: %d users of the closed model are running", len(e.users))
	}
	o := &openModel{cfg: m, rec: e.cfg.Recorder.Shard(0), wake: make(chan struct{}, 1),
		quit: make(chan struct{}), done: make(chan struct{}), size: m.PreAllocated}
	e.open = o
	if m.Connections > 0 {
		e.conns = transport.NewPool(m.Connections)
	}
	for range m.PreAllocated {
		e.addPoolUser(o, false)
	}
	go e.dispatch(o)
	return nil
}

// GrowOpen raises the open model's bound to maxUsers and its users set up
// in advance to preAllocated, where they are above StartOpen's (or the
// last GrowOpen's): the users the rise of preAllocated adds (as many as
// the bound leaves room for) begin their setup at once. It never shrinks
// the pool; MaxWait, Name and Connections stay as StartOpen set them. An
// agent takes on a lost agent's share of the pool so.
func (e *Engine) GrowOpen(maxUsers, preAllocated int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	o := e.open
	switch {
	case o == nil:
		return ErrNotOpen
	case e.reason != "":
		return fmt.Errorf("open model: the engine was aborted (%s)", e.reason)
	}
	select {
	case <-o.quit:
		return errors.New("open model: stopped")
	default:
	}
	o.mu.Lock()
	o.cfg.MaxUsers = max(o.cfg.MaxUsers, maxUsers)
	add := min(preAllocated-o.cfg.PreAllocated, o.cfg.MaxUsers-o.size)
	o.cfg.PreAllocated = max(o.cfg.PreAllocated, preAllocated)
	add = max(add, 0)
	o.size += add
	o.mu.Unlock()
	for range add {
		e.addPoolUser(o, false)
	}
	return nil
}

// SetPacer starts p's schedule now, in place of any other: its arrivals
// are counted from this call (elapsed from now, count from 0). nil stops
// the arrivals until the next call. A bounded run sets one for the whole
// run; a step or ceiling run can set a Constant(rate, Forever) per level.
// The dispatcher calls p from its own goroutine only.
func (e *Engine) SetPacer(p Pacer) error {
	e.mu.Lock()
	o := e.open
	e.mu.Unlock()
	if o == nil {
		return ErrNotOpen
	}
	// What the old schedule made due and the dispatcher has not handed
	// out yet (it wakes a moment after each arrival's time) goes first:
	// started, kept waiting or dropped, counted either way, not lost.
	now := time.Now()
	o.mu.Lock()
	grow := 0
	for o.pacer != nil {
		_, g, more := o.due(now)
		grow += g
		if !more {
			break
		}
	}
	o.pacer, o.origin, o.base = p, now, o.count
	o.mu.Unlock()
	for range grow {
		e.grow(o)
	}
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return nil
}

// addPoolUser adds a user to o's pool. Under e.mu.
func (e *Engine) addPoolUser(o *openModel, onDemand bool) {
	v := e.newUser()
	v.arrive = make(chan arrival, 1)
	v.connect = !onDemand
	e.users = append(e.users, v)
	spread := e.cfg.Spread
	if onDemand { // an arrival waits for it
		spread = -1
	}
	go func() {
		defer e.recover(v)
		v.serve(o, spread, onDemand, e.cfg.OnAction)
	}()
}

// dispatch is the open model's clock: it hands out every arrival due,
// sleeps until the next one or until the oldest waiting one expires, and
// ends at halt or Abort, cancelling the arrivals still waiting.
func (e *Engine) dispatch(o *openModel) {
	defer close(o.done)
	defer o.cancelWaiting()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	guard := &guarded{w: newGuard(), from: guardedGaps}
	defer guard.w.Close()
	for {
		now := time.Now()
		next, grow := o.step(now)
		for range grow {
			e.grow(o)
		}
		var fired <-chan time.Time
		switch {
		case next.IsZero(): // nothing due: wait for SetPacer
		case !next.After(now): // a batch cut short: go on after a look at quit
			select {
			case <-o.quit:
				return
			case <-e.abort:
				return
			default:
				continue
			}
		default:
			timer.Reset(next.Sub(now))
			guard.wait(now, next)
			fired = timer.C
		}
		select {
		case <-fired:
			if e.stalled != nil {
				e.stalled()
			}
			if time.Since(next) > lateAfter {
				e.late.Add(1)
			}
		case <-o.wake:
			timer.Stop()
		case <-o.quit:
			return
		case <-e.abort:
			return
		}
	}
}

// grow adds a user on demand, unless the engine was aborted meanwhile.
func (e *Engine) grow(o *openModel) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.reason != "" {
		o.mu.Lock()
		o.size--
		o.growing--
		o.mu.Unlock()
		return
	}
	e.addPoolUser(o, true)
}

// step dispatches every arrival due by now (up to maxBatch) and expires
// those waiting too long. It returns when to step again (zero: not
// before SetPacer) and how many users to add to the pool.
func (o *openModel) step(now time.Time) (next time.Time, grow int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.expire(now)
	next, grow, more := o.due(now)
	if more {
		return now, grow
	}
	if len(o.waiting) > 0 {
		if t := o.waiting[0].at.Add(o.cfg.MaxWait); next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next, grow
}

// due hands out the arrivals due by now, up to maxBatch (more: there are
// others): the replays due, then the pacer's, replaying those a stall
// made late. It returns when the next one is due (zero: none) and how
// many users to add to the pool. Under o.mu.
func (o *openModel) due(now time.Time) (next time.Time, grow int, more bool) {
	n := 0
	for ; len(o.replay) > 0 && !o.replay[0].at.After(now); n++ {
		if n == maxBatch {
			return now, grow, true
		}
		grow += o.arrive(heap.Pop(&o.replay).(arrival), now)
	}
	for ; o.pacer != nil; n++ {
		if n == maxBatch {
			return now, grow, true
		}
		wait, stop := o.pacer.Pace(now.Sub(o.origin), o.count-o.base)
		if stop {
			o.pacer = nil
			break
		}
		if wait > 0 {
			next = now.Add(wait)
			break
		}
		o.count++
		a := arrival{due: now.Add(wait)}
		a.at = a.due // its wait for a user counts from when it was due
		if -wait > replayAfter {
			a.at = now.Add(-wait)
			heap.Push(&o.replay, a)
			continue
		}
		grow += o.arrive(a, now)
	}
	if len(o.replay) > 0 && (next.IsZero() || o.replay[0].at.Before(next)) {
		next = o.replay[0].at
	}
	return next, grow, false
}

// arrive hands a to the user free longest, or else keeps it waiting for
// one (while MaxWait allows) or drops it; it returns 1 if a user should
// be added to the pool for it: the pool is below MaxUsers and fewer users
// are being set up than arrivals wait. Under o.mu.
func (o *openModel) arrive(a arrival, now time.Time) int {
	if len(o.idle) > 0 {
		v := o.idle[0]
		o.idle[0] = nil
		o.idle = o.idle[1:]
		v.arrive <- a // empty: v is idle
		return 0
	}
	if now.Sub(a.at) < o.cfg.MaxWait {
		o.waiting = append(o.waiting, a)
	} else {
		o.record(metrics.DroppedArrival, 0)
	}
	if o.size < o.cfg.MaxUsers && o.growing < max(1, len(o.waiting)) {
		o.size++
		o.growing++
		return 1
	}
	return 0
}

// expire drops the arrivals that waited MaxWait. Under o.mu.
func (o *openModel) expire(now time.Time) {
	i := 0
	for i < len(o.waiting) && now.Sub(o.waiting[i].at) >= o.cfg.MaxWait {
		o.record(metrics.DroppedArrival, 0)
		i++
	}
	o.waiting = o.waiting[i:]
}

// record counts one arrival that did not start. Under o.mu.
func (o *openModel) record(out metrics.Outcome, late time.Duration) {
	o.rec.Record(metrics.Sample{Kind: metrics.Arrival, Name: o.cfg.Name, Outcome: out, Latency: late})
}

// take gives v, free, the oldest arrival waiting, or else puts v among
// the users free and returns false.
func (o *openModel) take(v *vu) (arrival, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.expire(time.Now())
	if len(o.waiting) > 0 {
		a := o.waiting[0]
		o.waiting = o.waiting[1:]
		return a, true
	}
	o.idle = append(o.idle, v)
	return arrival{}, false
}

// forget takes v, stopping, out of the users free; an arrival handed to
// it meanwhile is counted as canceled.
func (o *openModel) forget(v *vu) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if i := slices.Index(o.idle, v); i >= 0 {
		o.idle = slices.Delete(o.idle, i, i+1)
	}
	select {
	case <-v.arrive:
		o.record(metrics.Canceled, 0)
	default:
	}
}

// leave takes v out of the pool as its goroutine ends; growing: it was
// added on demand and never got past setup.
func (o *openModel) leave(v *vu, growing bool) {
	o.forget(v)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.size--
	if growing {
		o.growing--
	}
}

// settled counts a user added on demand as set up (or given up).
func (o *openModel) settled() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.growing--
}

// cancelWaiting counts the arrivals still waiting, for a user or their
// replay, as canceled: the run stopped before they started.
func (o *openModel) cancelWaiting() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for range len(o.waiting) + len(o.replay) {
		o.record(metrics.Canceled, 0)
	}
	o.waiting, o.replay = nil, nil
	o.pacer = nil
}

// halt ends the dispatcher and waits for it: no arrival after it.
func (o *openModel) halt() {
	o.once.Do(func() { close(o.quit) })
	<-o.done
}

// serve is a pool user's goroutine: set up, then until stopped take an
// arrival (idle until one comes), run one action for it counted from its
// intended start, and come free again. A panic leaves it Done and out of
// the pool, for the engine to recover.
func (v *vu) serve(o *openModel, spread time.Duration, onDemand bool, onAction func(user int, action string)) {
	defer v.exit()
	growing := onDemand
	defer func() { o.leave(v, growing) }()
	ok := v.begin(spread)
	if growing {
		o.settled()
		growing = false
	}
	if !ok {
		v.finish()
		return
	}
	for {
		a, waited, ok := v.await(o)
		if !ok {
			o.forget(v) // before its teardown: no arrival is handed to it during it
			v.finish()
			return
		}
		now := time.Now()
		late := max(now.Sub(a.due), 0)
		v.rec.Record(metrics.Sample{Kind: metrics.Arrival, Name: o.cfg.Name, Latency: late})
		v.rec.Wake(a.due, now)
		act := v.user.Next()
		v.set(Acting)
		if onAction != nil {
			onAction(v.id, act.Name)
		}
		v.doing.Store(&act.Name)
		if waited { // idle meanwhile: on a worker, as vu.run after a pause
			v.warm.do(func() { v.user.RunLate(act, late) })
		} else { // the arrival was waiting for it: its stack is still the last action's
			v.user.RunLate(act, late)
		}
		v.doing.Store(nil)
	}
}

// await returns v's next arrival: one waiting for a user, or else the
// one the dispatcher hands it while it is idle (waited), handling its
// WebSocket messages meanwhile; ok is false when v is stopped.
func (v *vu) await(o *openModel) (a arrival, waited, ok bool) {
	select {
	case <-v.stop:
		return arrival{}, false, false
	default:
	}
	if !v.handle() { // what arrived during the action first
		return arrival{}, false, false
	}
	if a, ok := o.take(v); ok {
		return a, false, true
	}
	v.set(Idle)
	waiting := v.user.Waiting()
	for {
		select {
		case a := <-v.arrive:
			return a, true, true
		case <-v.stop:
			return arrival{}, true, false
		case <-waiting:
			if !v.handle() {
				return arrival{}, true, false
			}
		}
	}
}
