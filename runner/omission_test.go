package runner

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/analysis"
)

// freezing answers at once, but for the last freeze of every period from
// its start: a request that comes then waits until the period ends, as
// the requests to a stopped server (SIGSTOP) wait in its socket buffers.
func freezing(period, freeze time.Duration) http.HandlerFunc {
	t0 := time.Now()
	return func(http.ResponseWriter, *http.Request) {
		if in := time.Since(t0) % period; in >= period-freeze {
			time.Sleep(period - in)
		}
	}
}

// TestClosedRunWarnsOfAStall: 20 users thinking 100 ms against a server
// frozen 1 s in 5 send nothing while it is frozen, so the run measures
// only their 20 stuck requests of each freeze (issue 14's case): the
// result warns of coordinated omission and points to --rate. The same
// users against the server unfrozen get no warning.
func TestClosedRunWarnsOfAStall(t *testing.T) {
	t.Parallel()
	const sc = `
def get(user):
    user.http.get("/", name="GET /")
actions = [action("Get", get)]
think_time = think.constant("100ms")
`
	for _, frozen := range []bool{true, false} {
		h, d := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), 3*time.Second
		if frozen {
			h, d = freezing(5*time.Second, time.Second), 5*time.Second
		}
		res := run(t, &Bounded{Common: Common{Scenario: load(t, sc), Target: serve(t, h)}, Users: 20, Duration: d})
		o := res.Omission
		if o == nil || o.Warn != frozen || (analysis.OmissionWarning(o) != "") != frozen {
			t.Fatalf("frozen %v: %+v", frozen, o)
		}
		t.Logf("frozen %v: %d actions, %d stalled (longest %.0f ms), %d hidden (%.1f%%)", frozen, o.Actions, o.Stalled, o.MaxMs, o.Hidden, o.HiddenPct)
		if !frozen {
			continue
		}
		// One freeze in the 5 s window: each user is stuck once, for up
		// to a second, in which at its usual pace (~100 ms) it would have
		// acted about 8 more times: some 160 actions hidden among ~800.
		if o.Stalled < 15 || o.Stalled > 45 || o.HiddenPct < 10 || o.HiddenPct > 35 {
			t.Errorf("%d stalled, %.1f%% hidden; want the ~20 stuck users of one freeze hiding ~20%%", o.Stalled, o.HiddenPct)
		}
		if w := analysis.OmissionWarning(o); !strings.Contains(w, "--rate") || !strings.Contains(w, "coordinated omission") {
			t.Errorf("the warning does not point to the open model: %s", w)
		}
	}
}
