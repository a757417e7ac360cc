package engine

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario"
	"github.com/headroom-dev/headroom/transport"
)

func TestCatchUp(t *testing.T) {
	const s = time.Second
	const ms = time.Millisecond
	for _, c := range []struct {
		d, took, debt, pause, left time.Duration
	}{
		{s, 0, 0, s, 0},                              // on time: the think time
		{s, 0, 30 * ms, 970 * ms, 0},                 // made up at once
		{s, 0, 500 * ms, 500 * ms, 0},                // half a cycle: the least a pause is
		{s, 0, 505 * ms, 500 * ms, 5 * ms},           // a rest finer than 10 ms: made up next
		{s, 0, 700 * ms, 1300 * ms, 0},               // more: its phase a cycle later, never two actions back to back
		{s, 100 * ms, 700 * ms, 1400 * ms, 0},        // a cycle is the think time and the action
		{s, 0, 2300 * ms, 700 * ms, 0},               // whole cycles forgiven: the phase kept, not the count
		{s, 100 * ms, 2300 * ms, 900 * ms, 0},        // 2300 + 100 + 900: three cycles of 1.1 s
		{20 * ms, 30 * ms, 15 * ms, 10 * ms, 5 * ms}, // a think time under 20 ms: no action lost for a phase
		{0, 0, 50 * ms, 0, 0},                        // no think time, no phase
		{s, 0, -ms, s, 0},
	} {
		if p, l := catchUp(c.d, c.took, c.debt, 0); p != c.pause || l != c.left {
			t.Errorf("catchUp(%v, took %v, owed %v) = %v, %v; want %v, %v", c.d, c.took, c.debt, p, l, c.pause, c.left)
		}
	}
	// The jitter moves a pause by up to 1% either way, before the debt.
	if p, _ := catchUp(s, 0, 0, 1); p != 1010*ms {
		t.Errorf("jitter +1: %v", p)
	}
	if p, l := catchUp(s, 0, 30*ms, -1); p != 960*ms || l != 0 {
		t.Errorf("jitter -1, 30 ms owed: %v, %v", p, l)
	}
	// Whatever is owed, a user lands on its own phase (a whole number of
	// cycles after it was due), or within 10 ms of it and making that up,
	// and never pauses under half a cycle: users owing different amounts
	// never land on each other's phases.
	for debt := time.Duration(0); debt < 3*s; debt += 7 * ms {
		p, l := catchUp(s, 0, debt, 0)
		if p < s/2 || l > replayAfter || (debt+p-l)%s != 0 {
			t.Errorf("catchUp(1s, %v) = %v, %v: off its phase, or under half a cycle", debt, p, l)
		}
	}
}

// stalls is a process that stops for length every period from start:
// what wakes during a stall (a user's timer, a response) wakes at its
// end, all together. Virtual time only.
type stalls struct {
	start          time.Time
	period, length time.Duration
}

func (s stalls) wait() {
	in := time.Since(s.start) % s.period
	if in < s.length {
		time.Sleep(s.length - in)
	}
}

// stalledClient answers after service, or at the end of the stall the
// answer falls in.
type stalledClient struct {
	s       stalls
	service time.Duration
}

func (c stalledClient) Do(_ *transport.Request, resp *transport.Response) {
	start := time.Now()
	time.Sleep(c.service)
	c.s.wait()
	*resp = transport.Response{Status: 200, Latency: time.Since(start)}
}
func (stalledClient) Cookies() map[string]string { return nil }
func (stalledClient) Cancel()                    {}
func (stalledClient) Close()                     {}

// Users with a constant think time on a process that stalls 300 ms every
// 10 s (the collector, a busy machine) keep their own phases: each stall
// wakes the users it caught together, once, and a cycle later they are
// spread again. Without catching up, each stall would add to one bunch
// for good, and the target would get it every second (issue 28); without
// the replay, each stall's users would start in one burst at its end.
func TestUsersKeepTheirPhasesThroughStalls(t *testing.T) {
	users, minutes := 1000, 10
	if raceEnabled {
		users, minutes = 200, 3
	}
	synctest.Test(t, func(t *testing.T) {
		sc, err := scenario.Load(context.Background(), "s.star", []byte(oneRequest+"think_time = think.constant('1s')\n"), scenario.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		st := stalls{start: time.Now(), period: 10 * time.Second, length: 300 * time.Millisecond}
		var mu sync.Mutex
		var starts []time.Duration
		begin := time.Now()
		rec := metrics.NewRecorder(2, nil, time.Now)
		e := New(Config{Scenario: sc, Target: &url.URL{Scheme: "http", Host: "127.0.0.1:1"}, Seed: 3, Recorder: rec,
			HTTP: func(transport.Options) scenario.HTTPClient {
				return stalledClient{s: st, service: 2 * time.Millisecond}
			},
			OnAction: func(int, string) {
				mu.Lock()
				starts = append(starts, time.Since(begin))
				mu.Unlock()
			}})
		e.stalled = st.wait
		e.SetUsers(users)
		end := time.Duration(minutes) * time.Minute
		time.Sleep(end - 8*time.Second)
		last := metrics.NewSnapshot()
		rec.Drain(last) // everything until now: the stalls' bunches among it
		time.Sleep(8 * time.Second)
		e.Stop()

		// Between the last two stalls, once a cycle has gone by: 10 ms
		// windows hold their fair share (users/100), give or take chance.
		from := end - 8*time.Second // the last stall ended at end - 9.7 s, the last cycle after it at end - 8.7 s
		bins := map[time.Duration]int{}
		n := 0
		for _, s := range starts {
			if s >= from && s < from+7*time.Second {
				bins[s.Truncate(10*time.Millisecond)]++
				n++
			}
		}
		fair := float64(users) / 100
		most := 0
		for _, c := range bins {
			most = max(most, c)
		}
		// Right after the last stall, the users it held start over as
		// long as it lasted (replayed), beside those due then: twice the
		// rate for 300 ms, not all in one window.
		stall := end - 10*time.Second
		after := map[time.Duration]int{}
		for _, s := range starts {
			if s >= stall && s < stall+time.Second {
				after[s.Truncate(10*time.Millisecond)]++
			}
		}
		for w, c := range after {
			if float64(c) > 4*fair+4 {
				t.Errorf("%v after the last stall, a 10 ms window held %d starts, %.1f times its fair share: the stall became a burst", w-stall, c, float64(c)/fair)
			}
		}
		if float64(n) < 0.97*7*float64(users) {
			t.Errorf("%d starts in 7 s of %d users thinking 1 s: the users lost actions", n, users)
		}
		if float64(most) > 3*fair+3 {
			t.Errorf("after %d min of stalls, a 10 ms window held %d starts, %.1f times its fair share (%.0f): users gathered into bunches", minutes, most, float64(most)/fair, fair)
		}

		// Every start was counted with its lateness; the stalls' are there.
		w := last.Wakes
		if w == nil || float64(w.Late.Count) < 0.97*float64(len(starts)-n)*float64(end-8*time.Second)/float64(end) {
			t.Fatalf("wakes: %+v of %d starts", w, len(starts))
		}
		if p := w.Late.Percentile(100); p < 500_000 || p > 601_000 {
			t.Errorf("latest start %d µs late, want up to twice the 300 ms stall (woken at its end, then replayed)", p)
		}
		if p := w.Late.Percentile(50); p > 1000 {
			t.Errorf("median start %d µs late: most users wake on time", p)
		}
	})
}

// A stall seen by many users (each from its own due time, all to its
// end) is one; how much of an action it covers is the overlap.
func TestStallLog(t *testing.T) {
	var l stallLog
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	l.saw(at(300), at(600)) // woken at the stall's end, due in it
	l.saw(at(120), at(601))
	l.saw(at(450), at(600))
	l.saw(at(2000), at(2050)) // another
	for _, c := range []struct {
		from, to int
		want     time.Duration
	}{
		{0, 100, 0},                       // before
		{50, 601, 481 * time.Millisecond}, // in flight through it
		{500, 550, 50 * time.Millisecond}, // inside it
		{0, 3000, 531 * time.Millisecond}, // both
		{700, 1900, 0},                    // between
	} {
		if got := l.within(at(c.from), at(c.to)); got != c.want {
			t.Errorf("within(%d, %d ms) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}
