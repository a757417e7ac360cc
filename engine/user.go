package engine

import (
	"sync/atomic"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario"
	"github.com/headroom-dev/headroom/transport"
)

// State is where a user is in its life. The only transitions are:
//
//	Starting -> SettingUp -> Acting <-> Thinking
//	SettingUp, Acting, Thinking -> Stopping   (removed: finish the action, or be cancelled after the grace period)
//	Stopping -> TearingDown -> Done
//	Stopping -> Done                          (cancelled, or no teardown)
//
// A failed setup is retried after a think-time pause; the user stays in
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
)

func (s State) String() string {
	return [...]string{"starting", "setting-up", "acting", "thinking", "stopping", "tearing-down", "done"}[s]
}

// lateAfter is how late a think time may end before the wake-up counts as
// late: the generator's scheduler could not run the user on time.
const lateAfter = 50 * time.Millisecond

// vu is one virtual user: its scenario runtime, its connections, its state.
type vu struct {
	id       int
	user     *scenario.User
	client   *transport.Client
	state    atomic.Int32
	stop     chan struct{} // closed when the user is asked to stop
	done     chan struct{} // closed when its goroutine has ended
	canceled atomic.Bool
	late     *atomic.Int64          // engine-wide count of wake-ups later than lateAfter
	setUp    *atomic.Int64          // engine-wide count of users past setup
	doing    atomic.Pointer[string] // the action running (or setup); nil otherwise
}

var setupName = scenario.SetupAction

func (v *vu) State() State { return State(v.state.Load()) }

func (v *vu) set(s State) { v.state.Store(int32(s)) }

// run is the user's goroutine. A panic leaves it Done, its connection
// closed and done closed, for the engine to recover.
func (v *vu) run(onAction func(user int, action string)) {
	defer close(v.done)
	defer v.client.Close()
	defer func() { v.user.Close() }() // the user's dataset rows, for users added later; whichever user v holds at the end
	defer func() {
		if v.State() != Done {
			v.set(Done) // only a panic gets here before finish
		}
	}()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	// pause waits d, or less if the user is stopped; false means stop.
	pause := func(d time.Duration) bool {
		if d <= 0 {
			select {
			case <-v.stop:
				return false
			default:
				return true
			}
		}
		want := time.Now().Add(d)
		timer.Reset(d)
		select {
		case <-v.stop:
			timer.Stop()
			return false
		case <-timer.C:
			if time.Since(want) > lateAfter {
				v.late.Add(1)
			}
			return true
		}
	}

	v.set(SettingUp)
	for {
		v.doing.Store(&setupName)
		ok := v.user.Setup() == metrics.OK
		v.doing.Store(nil)
		if ok {
			v.setUp.Add(1)
			break
		}
		if v.canceled.Load() || !pause(v.user.Think()) {
			v.finish()
			return
		}
	}
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
		v.user.Run(a)
		v.doing.Store(nil)
		v.set(Thinking)
		if !pause(v.user.Think()) {
			v.finish()
			return
		}
	}
}

func (v *vu) finish() {
	v.set(Stopping)
	if !v.canceled.Load() {
		v.set(TearingDown)
		v.user.Teardown()
	}
	v.set(Done)
}

// cancel stops the user's code and its request in flight, for reason.
func (v *vu) cancel(reason string) {
	v.canceled.Store(true)
	v.user.Cancel(reason)
	v.client.Cancel()
}
