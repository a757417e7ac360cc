package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/runner"
)

func TestSummaryMarksActionsWithoutRequests(t *testing.T) {
	r := &result.Result{Kind: "run", Status: result.Completed, Actions: []metrics.Summary{
		{Name: "EditPost", Count: 40, NoRequest: 12},
		{Name: "Read", Count: 90},
	}}
	var b bytes.Buffer
	printSummary(&b, r)
	out := b.String()
	if !strings.Contains(out, "no req\n") || !strings.Contains(out, "no req: how many of the action's runs sent no request") {
		t.Errorf("the action table lacks its no-request column or note:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == "EditPost" && f[len(f)-1] != "12":
			t.Errorf("EditPost's row does not end with 12: %q", line)
		case len(f) > 0 && f[0] == "Read" && f[len(f)-1] != "0":
			t.Errorf("Read's row does not end with 0: %q", line)
		}
	}
	r.Actions[0].NoRequest = 0
	b.Reset()
	printSummary(&b, r)
	if strings.Contains(b.String(), "no req") {
		t.Errorf("a column with nothing to say:\n%s", b.String())
	}
}

func TestSummaryCountsUsersByType(t *testing.T) {
	r := &result.Result{Kind: "run", Status: result.Completed, UsersByType: map[string]int{"reader": 90, "poster": 10}}
	var b bytes.Buffer
	printSummary(&b, r)
	if strings.Contains(b.String(), "users by type") {
		t.Errorf("a scenario of one type shows users by type:\n%s", b.String())
	}
	r.Config.UserTypes = []result.UserType{{Name: "reader", Weight: 9}, {Name: "poster", Weight: 1}}
	b.Reset()
	printSummary(&b, r)
	if !strings.Contains(b.String(), "users by type: reader 90, poster 10\n") {
		t.Errorf("no users by type, in the scenario's order:\n%s", b.String())
	}
}

// TestOpenProgressLine: the live line of the open model shows the
// arrivals a second against the rate, the drops and late starts so far,
// and labels its latencies.
func TestOpenProgressLine(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(Env{Stderr: &b})
	p.open = true
	p.update(runner.Progress{Phase: "setup", Ready: 3, Want: 10})
	p.update(runner.Progress{Elapsed: 12 * time.Second, Total: time.Minute, Phase: "steady", Users: 10, Rate: 100, Started: 97,
		Dropped: 30, Late: 2, Last: metrics.Point{P50Ms: 1.5, P99Ms: 700}}) // within 5 s of the last: printed only on a terminal
	p.statusLine.last = time.Time{}
	p.update(runner.Progress{Elapsed: 13 * time.Second, Total: time.Minute, Phase: "steady", Users: 10, Rate: 100, Started: 97,
		Dropped: 30, Late: 2, Last: metrics.Point{P50Ms: 1.5, P99Ms: 700}})
	out := b.String()
	for _, want := range []string{"setting up the pool 00:00  users 3/10 set up", "open 00:13/01:00  arrivals/s 97 of 100  dropped 30  late 2  pool 10 users",
		"p99 700.0ms (from intended start)"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress lacks %q:\n%s", want, out)
		}
	}
}
