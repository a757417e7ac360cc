package compare

import (
	"slices"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/result"
)

// withServerCPU copies the step-1 fixture, started later by shift, with
// its scraped server's CPU at every level set to cores × the level's
// requests a second ÷ 1000: cores ms of CPU a request.
func withServerCPU(t *testing.T, shift time.Duration, ms float64) string {
	return copyRun(t, "step-1", func(r *result.Result) {
		r.StartedAt = r.StartedAt.Add(shift)
		for i := range r.Step.Levels {
			l := &r.Step.Levels[i]
			l.Server = []result.ServerWindow{{Seconds: 10, CPUCoresMean: ms * l.Totals.RPS / 1000}}
		}
	})
}

// A server that spends twice the CPU a request on the new side is a
// regression of its CPU a request at every level, each run's figure a
// point; where a run scraped nothing there is no figure.
func TestStepLevelsCompareServerCPUPerRequest(t *testing.T) {
	base, err := Load("a", []string{withServerCPU(t, time.Hour, 10), withServerCPU(t, 2*time.Hour, 10.4)})
	if err != nil {
		t.Fatal(err)
	}
	new, err := Load("b", []string{withServerCPU(t, 3*time.Hour, 20), withServerCPU(t, 4*time.Hour, 20.6)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compare(base, new, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Levels) != 4 {
		t.Fatalf("%d levels, want 4", len(c.Levels))
	}
	for _, l := range c.Levels {
		if len(l.ServerCPU) != 1 {
			t.Fatalf("level %d: %d server CPU figures, want 1", l.Users, len(l.ServerCPU))
		}
		m := l.ServerCPU[0]
		if !near(m.Base, 10.2) || !near(m.New, 20.3) || m.Verdict != Regression {
			t.Errorf("level %d: %v → %v ms (%s), want 10.2 → 20.3, a regression", l.Users, m.Base, m.New, m.Verdict)
		}
	}
	unscraped, err := Load("c", []string{copyRun(t, "step-1", func(r *result.Result) {
		for i := range r.Step.Levels {
			r.Step.Levels[i].Server = nil
		}
	})})
	if err != nil {
		t.Fatal(err)
	}
	if c, err = Compare(base, unscraped, Options{}); err != nil {
		t.Fatal(err)
	}
	if n := len(c.Levels[0].ServerCPU); n != 0 {
		t.Errorf("%d server CPU figures against a run that scraped nothing, want none", n)
	}
}

func near(a, b float64) bool { return a > b-1e-9 && a < b+1e-9 }

// A request that regressed from the second level on starts there, with
// every level that did; one that improved at one level only starts there;
// one that changed nowhere is left out; a regression of one figure wins
// over an improvement of another in the same row.
func TestOnsetsFindTheFirstLevelOfAChange(t *testing.T) {
	row := func(name string, v50, v99 string) Row {
		r := Row{Name: name}
		r.Mean.Verdict, r.P95.Verdict = NoChange, NoChange
		r.P50 = Metric{Verdict: v50, Base: 100, New: 130, Delta: 0.3, Low: 0.2, High: 0.4, HasInterval: true}
		r.P99.Verdict = v99
		return r
	}
	levels := []LevelSpan{
		{Users: 8, Span: Span{Requests: []Row{row("GET /a", NoChange, NoChange), row("GET /b", NoChange, NoChange), row("GET /c", NoChange, NoChange)}}},
		{Users: 24, Span: Span{Requests: []Row{row("GET /a", Regression, NoChange), row("GET /b", Improvement, NoChange), row("GET /c", NoChange, NoChange)}}},
		{Users: 48, Span: Span{Requests: []Row{row("GET /a", Regression, Regression), row("GET /b", NoChange, NoChange), row("GET /c", Improvement, Regression)}}},
	}
	got, judgedFigures := onsets(levels)
	if judgedFigures != 3*3*4 {
		t.Errorf("%d figures judged, want 36 (mean, p50, p95, p99 of 3 rows at 3 levels)", judgedFigures)
	}
	if len(got) != 3 {
		t.Fatalf("onsets %+v, want GET /a, GET /b and GET /c", got)
	}
	a, b, c := got[0], got[1], got[2]
	if a.Name != "GET /a" || a.Users != 24 || a.Verdict != Regression || !slices.Equal(a.Levels, []int{24, 48}) || a.Of != 3 ||
		!slices.Equal(a.Figures, []string{"p50"}) || a.Change != "+30.0% [+20.0%, +40.0%]" {
		t.Errorf("GET /a: %+v, want a regression of p50 from 24 users on, +30.0%% [+20.0%%, +40.0%%]", a)
	}
	if b.Name != "GET /b" || b.Users != 24 || b.Verdict != Improvement || !slices.Equal(b.Levels, []int{24}) {
		t.Errorf("GET /b: %+v, want an improvement at 24 users only", b)
	}
	if c.Name != "GET /c" || c.Users != 48 || c.Verdict != Regression || !slices.Equal(c.Figures, []string{"p99"}) {
		t.Errorf("GET /c: %+v, want a regression (p99) at 48, over p50's improvement", c)
	}
}

// withDatabase is withServerCPU with a second endpoint, a MySQL exporter,
// whose database ran queries statements and read rows rows a request.
func withDatabase(t *testing.T, shift time.Duration, queries, rows float64) string {
	return copyRun(t, "step-1", func(r *result.Result) {
		r.StartedAt = r.StartedAt.Add(shift)
		for i := range r.Step.Levels {
			l := &r.Step.Levels[i]
			n := float64(l.Totals.Count)
			l.Server = []result.ServerWindow{{Seconds: 10, CPUCoresMean: 10 * l.Totals.RPS / 1000},
				{Seconds: 10, Database: &result.DatabaseWork{System: "mysql", Queries: queries * n, RowsRead: rows * n}}}
		}
	})
}

// A release that sends more queries a request is a regression of its
// database's queries a request at every level, its rows read unchanged;
// the exporter's endpoint gives no server CPU figure.
func TestStepLevelsCompareDatabaseWorkPerRequest(t *testing.T) {
	base, err := Load("a", []string{withDatabase(t, time.Hour, 5, 40), withDatabase(t, 2*time.Hour, 5.2, 40.5)})
	if err != nil {
		t.Fatal(err)
	}
	new, err := Load("b", []string{withDatabase(t, 3*time.Hour, 12, 40.2), withDatabase(t, 4*time.Hour, 12.1, 40.4)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compare(base, new, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range c.Levels {
		if len(l.ServerCPU) != 1 || len(l.Database) != 2 {
			t.Fatalf("level %d: %d server CPU and %d database figures, want 1 and 2 (queries, rows read)", l.Users, len(l.ServerCPU), len(l.Database))
		}
		q, rows := l.Database[0], l.Database[1]
		if q.Name != "database 2 (mysql) queries a request" || !near(q.Base, 5.1) || !near(q.New, 12.05) || q.Verdict != Regression {
			t.Errorf("level %d: %s %v → %v (%s), want database 2's queries 5.1 → 12.05, a regression", l.Users, q.Name, q.Base, q.New, q.Verdict)
		}
		if rows.Name != "database 2 (mysql) rows read a request" || rows.Verdict != NoChange {
			t.Errorf("level %d: %s %v → %v (%s), want no change", l.Users, rows.Name, rows.Base, rows.New, rows.Verdict)
		}
	}
}
