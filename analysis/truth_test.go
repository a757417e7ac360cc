package analysis

import (
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/result"
)

// Starts are judged against the fair schedule too: independent users at
// the second's rate (issue 50). Each case is far from the bound: at 280
// starts a second the busiest 10 ms of random phases holds about 8 (it
// passes 14 once in 10,000 seconds); a collapsed schedule held 17-52.
func TestUntrueAgainstTheFairSchedule(t *testing.T) {
	for _, c := range []struct {
		name string
		b    result.Burstiness
		want string
	}{
		{"fair", result.Burstiness{Starts: 280, Max10ms: 9, Meant10ms: 8, Max100ms: 40, Meant100ms: 38, Fair10ms: 8, Fair100ms: 38}, ""},
		{"fair, busier", result.Burstiness{Starts: 640, Max10ms: 15, Meant10ms: 14, Max100ms: 80, Meant100ms: 78}, ""},
		// Sent what it meant, but what it meant was bunched: the schedule.
		{"collapsed", result.Burstiness{Starts: 280, Max10ms: 30, Meant10ms: 30, Max100ms: 60, Meant100ms: 60, Fair10ms: 8}, "the generator's schedule bunched: 30 starts meant for one 10 ms"},
		{"collapsed in 100 ms", result.Burstiness{Starts: 280, Max10ms: 10, Meant10ms: 10, Max100ms: 100, Meant100ms: 100}, "schedule bunched: 100 starts meant for one 100 ms"},
		// Within twice its schedule, but far past the fair share: sent.
		{"sent", result.Burstiness{Starts: 400, Max10ms: 26, Meant10ms: 11, Max100ms: 45, Meant100ms: 42}, "the generator's starts bunched: 26 in one 10 ms where independent users"},
		// A result from before Starts was kept: the fair rule cannot be worked out.
		{"old result", result.Burstiness{Max10ms: 30, Meant10ms: 30, Max100ms: 60, Meant100ms: 60}, ""},
	} {
		got := Untrue(nil, &c.b, time.Second)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: Untrue = %q, want %q", c.name, got, c.want)
		}
	}
}
