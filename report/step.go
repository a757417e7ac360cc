package report

import (
	"fmt"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// stepBlocks are a step run's levels: a row and a point of the charts
// each, then each level's requests and actions by name.
func stepBlocks(r *result.Result) []Block {
	st := r.Step
	out := []Block{&Heading{Level: 2, Text: "Levels"}} // the knee is the headline
	unit := "users"
	open := st.UnitName() == result.UnitRate
	if open {
		unit = "arrivals/s"
		out = append(out, &Para{Text: "Latencies count from each arrival's intended start; the service time from the request's actual send. " +
			"Dropped: arrivals that found no user of the pool free; late: those that started more than 10 ms after they were due."})
	}
	t := levelsTable(r, unit, open)
	thr := &Chart{Name: "step-throughput", Title: "Throughput by level", XLabel: unit, YLabel: "requests/s"}
	lat := &Chart{Name: "step-latency", Title: "Latency by level", XLabel: unit, YLabel: "ms"}
	tput, mean, p95 := Series{Name: "requests/s"}, Series{Name: "mean"}, Series{Name: "p95"}
	for i := range st.Levels {
		l := &st.Levels[i]
		t.Rows = append(t.Rows, levelRow(l, open))
		u, s := float64(l.Users), l.Totals
		tput.X, tput.Y = append(tput.X, u), append(tput.Y, s.RPS)
		mean.X, mean.Y = append(mean.X, u), append(mean.Y, s.MeanMs)
		p95.X, p95.Y = append(p95.X, u), append(p95.Y, s.P95Ms)
	}
	thr.Series, lat.Series = []Series{tput}, []Series{mean, p95}
	out = append(out, t, thr, lat)
	// Per level and request: the forum table, correct; and per action,
	// what a user waited for a whole step of the scenario.
	out = append(out, &Heading{Level: 3, Text: "Per level and request"}, perLevel(st.Levels, unit, "request", "req/s", func(l *result.StepLevel) []metrics.Summary { return l.Requests }))
	if pa := perLevel(st.Levels, unit, "action", "runs/s", func(l *result.StepLevel) []metrics.Summary { return l.Actions }); len(pa.Rows) > 0 {
		out = append(out, &Heading{Level: 3, Text: "Per level and action"}, pa)
	}
	return out
}

// levelsTable is the levels table's header: each level's figures, how
// fast its users were set up (the closed model) or its arrivals (the
// open), and each scraped server's CPU or database work a request.
func levelsTable(r *result.Result, unit string, open bool) *Table {
	t := &Table{Header: []string{unit, "req/s", "mean (ms)", "p50 (ms)", "p95 (ms)", "p99 (ms)", "errors", "held"}, Right: []int{0, 1, 2, 3, 4, 5, 6, 7}}
	if !open { // how fast the users each level added were set up; the open model's pool is set up on demand
		t.Header, t.Right = append(t.Header, "setups/s"), append(t.Right, 8)
	} else {
		t.Header = append(t.Header, "dropped", "late", "service p95 (ms)")
		t.Right = append(t.Right, 8, 9, 10)
	}
	if r.Server != nil { // the server's CPU at each level, cores, mean over the held window
		for _, tg := range r.Server.Targets {
			t.Right = append(t.Right, len(t.Header))
			if d := tg.Window.Database; d != nil {
				t.Right = append(t.Right, len(t.Header)+1)
				t.Header = append(t.Header, dbWork(d)+" a request "+tg.Instance, "rows read a request "+tg.Instance)
			} else {
				t.Header = append(t.Header, "server CPU (cores) "+tg.Instance)
			}
		}
	}
	return t
}

// levelRow is one level's row of levelsTable.
func levelRow(l *result.StepLevel, open bool) []string {
	held := seconds(l.Window.Seconds)
	if !l.Complete {
		held += " (cut short)"
	}
	s := l.Totals
	row := []string{fmt.Sprint(l.Users), num(s.RPS), num(s.MeanMs), num(s.P50Ms), num(s.P95Ms), num(s.P99Ms), errPct(s), held}
	if !open {
		setups := "–" // no user added, or not all set up
		if l.Setup != nil && l.Setup.PerS > 0 {
			setups = num(l.Setup.PerS)
		}
		row = append(row, setups)
	} else {
		dropped, late, svc := "–", "–", "–"
		if a := l.Arrivals; a != nil {
			dropped, late = num(a.DroppedPct)+"%", count(a.Late)
		}
		if sv := l.ServiceTimes; sv != nil {
			svc = num(sv.Totals.P95Ms)
		}
		row = append(row, dropped, late, svc)
	}
	for _, sw := range l.Server {
		if d := sw.Database; d != nil {
			row = append(row, perRequest(d.Queries+d.Transactions, s.Count), perRequest(d.RowsRead, s.Count))
		} else {
			row = append(row, num(sw.CPUCoresMean))
		}
	}
	return row
}

// perLevel is a table of each level's summaries by name (of what names,
// counted a second under rate).
func perLevel(levels []result.StepLevel, unit, what, rate string, of func(*result.StepLevel) []metrics.Summary) *Table {
	t := &Table{Header: []string{unit, what, rate, "median (ms)", "p95 (ms)", "p99 (ms)", "errors"}, Right: []int{0, 2, 3, 4, 5, 6}}
	for i := range levels {
		l := &levels[i]
		for _, s := range of(l) {
			t.Rows = append(t.Rows, []string{fmt.Sprint(l.Users), s.Name, num(s.RPS), num(s.P50Ms), num(s.P95Ms), num(s.P99Ms), errPct(s)})
		}
	}
	return t
}
