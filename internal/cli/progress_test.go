package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
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
