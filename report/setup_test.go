package report

import (
	"fmt"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// Setup is reported apart, and a ceiling's levels say how many users were
// set up and why a verdict was not the checks' alone.
func TestSetupAndLevelsAreShown(t *testing.T) {
	r := fixture(t, "base-1")
	md := string(Markdown(ForResult(r)))
	if strings.Contains(md, "Users' setup") {
		t.Errorf("a result without setup figures shows a setup section")
	}
	r.Setup = &result.Setup{Users: 40, Started: 42, TimeToSetUp: metrics.Summary{Name: "(time to set up)", Count: 40, P50Ms: 41.5, P95Ms: 60, P99Ms: 75.25, MaxMs: 80},
		Attempts: metrics.Summary{Name: "(setup)", Count: 45, Errors: 5},
		Totals:   metrics.Summary{Name: "setup requests", Count: 90},
		Requests: []metrics.Summary{{Name: "POST /login", Count: 45}, {Name: "POST /register", Count: 45}}}
	md = string(Markdown(ForResult(r)))
	mustContain(t, md, "## Users' setup")
	mustContain(t, md, "40 of 42 users finished setup, in 45 attempts (5 failed)")
	mustContain(t, md, "p99 75.2 ms")
	r.Setup.PerS, r.Config.Users, r.Config.RampS = 2.5, 42, 10
	mustContain(t, strings.Join(strings.Fields(string(Markdown(ForResult(r)))), " "), "Set up at 2.50 users a second, from the start to the last one ready (the ramp asked for 4.20 a second: the server set them up slower than that).")
	if rows := rowsByFirstCell(md); rows["POST /register"] == nil || rows["setup requests"] == nil {
		t.Errorf("no setup request table:\n%s", md)
	}

	c := fixture(t, "ceil-1")
	c.Ceiling.Levels = []result.Level{
		{Users: 80, SetUp: 69, SetupPerS: 1.15, SetupBound: true, Verdict: "unhealthy", Why: "only 69 of 80 users had finished setup 1m0s after the ramp (setup timeout)"},
		{Users: 60, SetUp: 60, Evaluations: 17, Unhealthy: 6, Verdict: "healthy", Undecided: true, Why: "6 of 17 evaluations unhealthy"},
		{Users: 60, SetUp: 60, Evaluations: 10, Unhealthy: 1, Verdict: "healthy", Hold: true},
	}
	rows := rowsByFirstCell(string(Markdown(ForResult(c))))
	if got := strings.Join(rows["80"], "|"); got != "80|69|1.15|0|0|0|unhealthy: only 69 of 80 users had finished setup 1m0s after the ramp (setup timeout)" {
		t.Errorf("level 80: %s", got)
	}
	if got := strings.Join(rows["60"], "|"); !strings.HasSuffix(got, "healthy (hold at the answer)") {
		t.Errorf("the hold: %s", got)
	}
}

// A ceiling whose bounding level (its interval's high end) could not set
// its users up says setup bound it, with the rate, not a check; one whose
// bounding level a check failed names the check.
func TestSetupBoundIsNamed(t *testing.T) {
	c := fixture(t, "ceil-1")
	su := c.Ceiling.SupportedUsers
	why := "only 69 of 80 users had finished setup 1m0s after the ramp (setup timeout): 1.13 setups a second since the level was asked for"
	c.Ceiling.Levels = append(c.Ceiling.Levels, result.Level{Users: int(su.High), SetUp: 69, Verdict: "unhealthy", SetupBound: true, SetupPerS: 1.13, Why: why})
	c.Setup = &result.Setup{Users: 69, Started: 80, Attempts: metrics.Summary{Name: "(setup)", Count: 120, Errors: 40, Timeouts: 11,
		Messages: map[string]int64{"POST /api/v4/users: status 400: license limit": 29, "POST /api/v4/users/login: timeout after 60s": 11}}}
	md := string(Markdown(ForResult(c)))
	mustContain(t, md, fmt.Sprintf("Bound by users' setup, not by a check: at %d users, %s.", int(su.High), why))
	mustContain(t, md, "Setups failed 51 times in the run (11 timed out), most often (29): POST /api/v4/users: status 400: license limit.")
	if strings.Contains(md, "Bottleneck: ") {
		t.Errorf("a setup-bound answer also names a bottleneck check:\n%s", md)
	}
	c = fixture(t, "ceil-1")
	md = string(Markdown(ForResult(c)))
	if strings.Contains(md, "Bound by users' setup") || !strings.Contains(md, "Bottleneck: ") {
		t.Errorf("a check-bound answer:\n%s", md)
	}
}
