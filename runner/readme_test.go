package runner

import (
	"context"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/testbed"
)

// The README's scenario runs against the testbed as it is written: its
// users sign up, log in and act (it had not, for a while: it logged in
// accounts no one had signed up). In virtual time.
func TestTheREADMEsScenarioRuns(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "## A scenario")
	j := strings.Index(s[max(i, 0):], "```python\n")
	if i < 0 || j < 0 {
		t.Fatal("the README has no \"## A scenario\" with a python block")
	}
	src := s[i+j+len("```python\n"):]
	src = src[:strings.Index(src, "```")]
	synctest.Test(t, func(t *testing.T) {
		_, target, dial := testbedInMemory(t, testbed.Config{})
		res, err := (&Bounded{Common: Common{Scenario: load(t, src), Target: target, Seed: 1, Grace: time.Second, Dial: dial},
			Users: 5, Duration: 30 * time.Second}).Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != result.Completed || res.Setup == nil || res.Setup.Users != 5 || res.Totals.Count == 0 || res.Totals.Errors > 0 {
			t.Errorf("status %s, setup %+v, totals %+v, notes %q", res.Status, res.Setup, res.Totals, res.Notes)
		}
	})
}
