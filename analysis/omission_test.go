package analysis

import (
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
)

// actions is a snapshot of actions, each of one request, taking the given
// latencies n times each.
func actions(spec ...any) *metrics.Snapshot {
	s := metrics.NewSnapshot()
	for i := 0; i < len(spec); i += 2 {
		for range spec[i].(int) {
			s.Add(&metrics.Sample{Kind: metrics.Action, Name: "A", Requests: 1, Latency: spec[i+1].(time.Duration)})
		}
	}
	return s
}

func TestOmissionOf(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name           string
		snap           *metrics.Snapshot
		think          time.Duration
		stalled, heldN int64 // want
		warn           bool
	}{
		// A target frozen 1 s in 5 with 50 users thinking 100 ms: per 5 s,
		// ~2000 actions of 1 ms and 50 held ~950 ms, each hiding 8 more
		// (950 / 101 - 1) at the users' usual pace.
		{"a freeze", actions(2000, ms, 50, 950*ms), 100 * ms, 50, 400, true},
		{"healthy, a long tail", actions(1000, 5*ms, 100, 60*ms, 10, 180*ms), 100 * ms, 0, 0, false},
		// A kind of action that is always slow is not a stall: it never
		// takes two whole intervals.
		{"bimodal", actions(700, ms, 300, 150*ms), 100 * ms, 0, 0, false},
		// A few stalls: counted, below the warning.
		{"a few stalls", actions(2000, ms, 5, 950*ms), 100 * ms, 5, 40, false},
		{"chat think time", actions(1000, 10*ms, 10, 2*time.Second), 4 * time.Second, 0, 0, false},
	} {
		o := OmissionOf(c.snap, c.think)
		if o == nil || o.Stalled != c.stalled || o.Hidden != c.heldN || o.Warn != c.warn {
			t.Errorf("%s: %+v; want %d stalled, %d hidden, warn %v", c.name, o, c.stalled, c.heldN, c.warn)
			continue
		}
		if w := OmissionWarning(o); (w != "") != c.warn || (c.warn && !strings.Contains(w, "--rate")) {
			t.Errorf("%s: warning %q", c.name, w)
		}
	}
	if o := OmissionOf(actions(100, time.Second), 0); o != nil {
		t.Errorf("no think time: %+v; want no judgement", o)
	}
	idle := metrics.NewSnapshot()
	idle.Add(&metrics.Sample{Kind: metrics.Action, Name: "(ws message)", Latency: time.Second})
	if o := OmissionOf(idle, time.Second); o != nil {
		t.Errorf("no action sent a request: %+v", o)
	}
}
