package analysis

import (
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// lvl is a completed level held 60 s: rps requests a second (errPct
// percent of them failed), with the given mean and p95.
func lvl(users int, rps, meanMs, p95Ms, errPct float64) result.StepLevel {
	count := int64(rps * 60)
	return result.StepLevel{Users: users, Complete: true, Totals: metrics.Summary{
		Count: count, Errors: int64(errPct / 100 * float64(count)), RPS: rps, MeanMs: meanMs, P95Ms: p95Ms,
	}}
}

func partial(l result.StepLevel) result.StepLevel {
	l.Complete = false
	return l
}

func TestFindKnee(t *testing.T) {
	cases := []struct {
		name   string
		levels []result.StepLevel
		found  bool
		users  int      // the knee, when found
		words  []string // in the summary
	}{
		{
			// The forum's first table (no error rates there: none assumed).
			// 240 -> 336 is +40% users for +18.8% req/s, under half of it,
			// while p95 of GET_thread went from 360 ms to 2.7 s.
			name: "forum step load",
			levels: []result.StepLevel{lvl(48, 9.4, 150, 180, 0), lvl(96, 18.5, 165, 200, 0), lvl(162, 31, 200, 250, 0),
				lvl(240, 44.6, 250, 360, 0), lvl(336, 53, 1100, 2700, 0)},
			found: true, users: 240,
			words: []string{"knee at 240 users", "from 240 to 336 users (+40%)", "throughput grew 19% (44.6 → 53.0 req/s)", "p95 rose 650% (360 ms → 2.70 s)"},
		},
		{
			name:   "linear, then saturated",
			levels: []result.StepLevel{lvl(10, 100, 5, 8, 0), lvl(20, 200, 5, 8, 0), lvl(40, 250, 40, 90, 0), lvl(80, 250, 180, 400, 0)},
			found:  true, users: 20,
			words: []string{"knee at 20 users", "(+100%) throughput grew 25%", "p95 rose"},
		},
		{
			name:   "saturated from the first step",
			levels: []result.StepLevel{lvl(50, 100, 50, 80, 0), lvl(100, 102, 400, 900, 0)},
			found:  true, users: 50,
		},
		{
			name:   "throughput falls",
			levels: []result.StepLevel{lvl(10, 100, 5, 8, 0), lvl(20, 80, 50, 120, 0)},
			found:  true, users: 10,
			words: []string{"throughput fell 20% (100.0 → 80.0 req/s)"},
		},
		{
			name:   "mean rises, p95 does not",
			levels: []result.StepLevel{lvl(10, 100, 10, 100, 0), lvl(20, 110, 30, 110, 0)},
			found:  true, users: 10,
			words: []string{"mean latency rose 200% (10 ms → 30 ms)"},
		},
		{
			// Fast 503s: requests grow, successes do not, latency falls.
			name:   "load shed with errors",
			levels: []result.StepLevel{lvl(10, 100, 10, 20, 0), lvl(20, 200, 6, 15, 50)},
			found:  true, users: 10,
			words: []string{"throughput grew 0% (100.0 → 100.0 req/s)", "errors and timeouts rose from 0.0% to 50.0% of requests"},
		},
		{
			name:   "linear all the way",
			levels: []result.StepLevel{lvl(10, 100, 5, 8, 0), lvl(20, 199, 5, 9, 0), lvl(40, 390, 6, 10, 0)},
			found:  false,
			words:  []string{"no knee within 10–40 users", "at least 50% as fast", "the least: from 20 to 40 users (+100%) throughput grew 96%"},
		},
		{
			// latency grows but throughput keeps up: not past the knee yet
			name:   "slower but still scaling",
			levels: []result.StepLevel{lvl(10, 100, 5, 8, 0), lvl(20, 180, 15, 30, 0)},
			found:  false,
		},
		{
			name:   "flat but healthy points elsewhere",
			levels: []result.StepLevel{lvl(10, 100, 5, 8, 0), lvl(20, 101, 5, 8, 0)},
			found:  false,
			words:  []string{"latency and errors held", "load generator or the scenario"},
		},
		{
			// exactly half the proportional gain is still growing (strict <)
			name:   "efficiency at the boundary",
			levels: []result.StepLevel{lvl(10, 100, 5, 8, 0), lvl(20, 150, 50, 80, 0)},
			found:  false,
		},
		{
			// exactly +20% latency is not a rise (strict >)
			name:   "latency at the boundary",
			levels: []result.StepLevel{lvl(10, 100, 10, 10, 0), lvl(20, 100, 12, 12, 0)},
			found:  false,
		},
		{
			name:   "an interrupted level is skipped",
			levels: []result.StepLevel{lvl(10, 100, 5, 8, 0), partial(lvl(20, 100, 500, 900, 0)), lvl(40, 390, 6, 10, 0)},
			found:  false,
		},
		{
			name:   "one completed level",
			levels: []result.StepLevel{lvl(10, 100, 5, 8, 0), partial(lvl(20, 100, 500, 900, 0))},
			found:  false,
			words:  []string{"at least two completed levels", "got 1"},
		},
		{
			name:  "nothing",
			found: false,
			words: []string{"got 0"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := FindKnee(c.levels, DefaultKneeRule())
			if k.Found != c.found || (c.found && k.Users != c.users) {
				t.Errorf("found %v at %d users, want %v at %d: %s", k.Found, k.Users, c.found, c.users, k.Summary)
			}
			for _, w := range c.words {
				if !strings.Contains(k.Summary, w) {
					t.Errorf("summary lacks %q: %s", w, k.Summary)
				}
			}
			if k.Summary == "" || k.Rule != DefaultKneeRule() {
				t.Errorf("summary %q, rule %+v", k.Summary, k.Rule)
			}
		})
	}
}

func TestKneeFigures(t *testing.T) {
	k := FindKnee([]result.StepLevel{lvl(100, 50, 40, 60, 0), lvl(150, 51, 400, 900, 2)}, DefaultKneeRule())
	if !k.Found || k.Users != 100 || k.Next != 150 {
		t.Fatalf("knee %+v", k)
	}
	near := func(a, b float64) bool { return a-b < 0.01 && b-a < 0.01 }
	if k.UsersGainPct != 50 || k.ThroughputRPS[0] != 50 || !near(k.ThroughputRPS[1], 51*(1-61.0/3060)) ||
		k.P95Ms != [2]float64{60, 900} || k.MeanMs != [2]float64{40, 400} || k.ErrorPct[0] != 0 || !near(k.ErrorPct[1], 100*61.0/3060) {
		t.Errorf("figures %+v", k)
	}
	if !strings.Contains(k.Summary, "p95 rose 1400%") || !strings.Contains(k.Summary, "and errors and timeouts rose from 0.0% to 2.0%") {
		t.Errorf("summary %s", k.Summary)
	}
}

// A stricter rule moves the knee: the rule is a parameter, not a constant.
func TestKneeRuleIsAParameter(t *testing.T) {
	levels := []result.StepLevel{lvl(10, 100, 5, 8, 0), lvl(20, 170, 6, 10, 0), lvl(40, 260, 30, 60, 0)}
	if k := FindKnee(levels, DefaultKneeRule()); k.Found {
		t.Errorf("default rule: %s", k.Summary)
	}
	strict := result.KneeRule{Efficiency: 0.8, LatencyRisePct: 30, ErrorRisePoints: 1}
	// 10 -> 20: +70% for +100% users, p95 +25%: not a knee (latency);
	// 20 -> 40: +53% for +100% users, p95 +500%: a knee at 20.
	if k := FindKnee(levels, strict); !k.Found || k.Users != 20 {
		t.Errorf("efficiency 0.8: %s", k.Summary)
	}
}
