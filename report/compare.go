package report

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/headroom-dev/headroom/compare"
	"github.com/headroom-dev/headroom/result"
)

// ForComparison is the report of a comparison: the verdicts first, then
// the setup of each side, the per-request tables with their deltas, the
// server's side, and the charts with base and new on the same axes.
func ForComparison(c *compare.Comparison) *Doc {
	b, n := c.Base.Label, c.New.Label
	d := &Doc{Title: fmt.Sprintf("headroom compare: %s vs %s (%s)", n, b, kindName(c.Kind))}
	add := func(bs ...Block) { d.Blocks = append(d.Blocks, bs...) }
	add(&Para{Text: fmt.Sprintf("%s: %d run(s); %s: %d run(s). Each side's figure pools its runs (latencies from the merged exact histograms); "+
		"the interval of a change is %.0f%% (Welch's t over the runs), and a change is called a regression or an improvement only when the interval "+
		"excludes zero and the change is at least %.0f%% (%.2f points for error rates).",
		b, len(c.Base.Dirs), n, len(c.New.Dirs), 100*c.Options.Confidence, 100*c.Options.MinEffect, c.Options.MinErrorPoints)})
	add(&Heading{Level: 2, Text: "Verdict"}, VerdictTable(c))
	if len(c.Notes) > 0 {
		add(&List{Items: c.Notes})
	}
	add(&Heading{Level: 2, Text: "Setup"}, sidesTable(c))
	if !setupOnly(c) { // no window: what they measured is their setups
		add(windowBlocks(c)...)
		add(phaseCompareBlocks(c)...)
	}
	add(setupsBlocks(c)...)
	add(levelsBlocks(c)...)
	for i, s := range c.Server {
		add(serverSideBlocks(i, s, b, n)...)
	}
	add(profileCompareBlocks(c)...)
	add(&Heading{Level: 2, Text: "Over time"}, &Para{Text: b + " dashed, " + n + " solid; one line per run."})
	var runs []namedRun
	for i, r := range c.Base.Results {
		runs = append(runs, namedRun{name: fmt.Sprintf("%s %d", b, i+1), res: r, dashed: true})
	}
	for i, r := range c.New.Results {
		runs = append(runs, namedRun{name: fmt.Sprintf("%s %d", n, i+1), res: r})
	}
	add(timelineCharts("", runs)...)
	add(serverCharts("", runs)...)
	return d
}

// sidesTable is each side's runs, scenario, target, load and build.
func sidesTable(c *compare.Comparison) *Table {
	st := &Table{Header: []string{"", c.Base.Label, c.New.Label}}
	for _, r := range [][3]string{
		{"runs", strings.Join(c.Base.Dirs, ", "), strings.Join(c.New.Dirs, ", ")},
		{"scenario", c.Base.Scenario + " (" + short(c.Base.ScenarioHash) + ")", c.New.Scenario + " (" + short(c.New.ScenarioHash) + ")"},
		{"target", c.Base.Target, c.New.Target},
		loadRow(c),
		{"headroom", c.Base.Headroom, c.New.Headroom},
	} {
		st.Rows = append(st.Rows, r[:])
	}
	if len(c.Base.Knee) > 0 {
		st.Rows = append(st.Rows, []string{"knee", strings.Join(c.Base.Knee, " / "), strings.Join(c.New.Knee, " / ")})
	}
	return st
}

// windowBlocks are the requests and actions of the compared window.
func windowBlocks(c *compare.Comparison) []Block {
	b, n := c.Base.Label, c.New.Label
	out := []Block{&Heading{Level: 2, Text: "Requests"}, &Para{Text: spanText(c.Kind)},
		rowsTable("request", b, n, c.Window.Requests), &Para{Text: fmt.Sprintf("Each cell: %s → %s (change). Intervals are in compare.json. Rows with fewer than %d requests on a side get no verdict.", b, n, c.Options.MinCount)}}
	out = append(out, apart("requests", b, n, c.Window.OnlyBase, c.Window.OnlyNew)...)
	if len(c.Window.Weights) > 1 {
		wt := &Table{Header: []string{"request", "common mix", b + " share", n + " share"}, Right: []int{1, 2, 3}}
		for _, w := range c.Window.Weights {
			wt.Rows = append(wt.Rows, []string{w.Name, pctText(100 * w.Weight), pctText(100 * w.Base), pctText(100 * w.New)})
		}
		out = append(out, &Para{Text: "The common mix weighs each request by the mean of its share on the two sides, so a request that became more frequent does not pass for a slower system:"}, wt)
	}
	if len(c.Window.Actions) > 0 {
		out = append(out, &Heading{Level: 3, Text: "Actions"}, rowsTable("action", b, n, c.Window.Actions))
		out = append(out, apart("actions", b, n, c.Window.OnlyBaseActions, c.Window.OnlyNewActions)...)
	}
	return out
}

// setupsBlocks compare users' setups over the whole runs; none without.
func setupsBlocks(c *compare.Comparison) []Block {
	s := c.Setup
	if s == nil {
		return nil
	}
	b, n := c.Base.Label, c.New.Label
	out := []Block{&Heading{Level: 2, Text: "Users' setups"}, &Para{Text: "Every user's setup over the whole run (a login, a sign-up, its first page), " +
		"which every figure above leaves out: a release that made logins slower shows here. " +
		"(setup) is each attempt, (time to set up) a user's first attempt to ready, retries included."}}
	t := metricTable(b, n)
	if c.SetupRate != nil {
		metricRow(t, c.SetupRate.Name, c.SetupRate)
	}
	for _, m := range []*compare.Metric{&s.MixMean, &s.MixP99, &s.MixErrors} {
		metricRow(t, m.Name, m)
	}
	out = append(out, t, rowsTable("setup request", b, n, s.Requests))
	out = append(out, apart("setup requests", b, n, s.OnlyBase, s.OnlyNew)...)
	if len(s.Actions) > 0 {
		out = append(out, rowsTable("setup", b, n, s.Actions))
	}
	return out
}

// levelsBlocks compare a step's or a ceiling's levels, with their charts.
func levelsBlocks(c *compare.Comparison) []Block {
	if len(c.Levels) == 0 {
		return nil
	}
	b, n := c.Base.Label, c.New.Label
	out := []Block{&Heading{Level: 2, Text: "Levels"}, &Para{Text: fmt.Sprintf("Each level's held window, over the requests both sides made, with one mix. Each cell: %s → %s (change); compare.json has the intervals.", b, n)},
		LevelsTable(c)}
	for _, k := range []struct {
		name, title, y string
		m              func(*compare.LevelSpan) *compare.Metric
	}{
		{"levels-rps", "Throughput by level", "requests/s", func(l *compare.LevelSpan) *compare.Metric { return &l.Throughput }},
		{"levels-p99", "p99 latency by level (common mix)", "p99 (ms)", func(l *compare.LevelSpan) *compare.Metric { return &l.MixP99 }},
	} {
		ch := &Chart{Name: k.name, Title: k.title, XLabel: levelUnit(c), YLabel: k.y}
		bs, ns := Series{Name: b, Dashed: true}, Series{Name: n}
		for i := range c.Levels {
			m, u := k.m(&c.Levels[i]), float64(c.Levels[i].Users)
			bs.X, bs.Y = append(bs.X, u), append(bs.Y, m.Base)
			ns.X, ns.Y = append(ns.X, u), append(ns.Y, m.New)
		}
		ch.Series = []Series{bs, ns}
		out = append(out, ch)
	}
	out = append(out, &Heading{Level: 3, Text: "Where changes start"})
	if t := OnsetsTable(c); t != nil {
		out = append(out, &Para{Text: "Each action and request whose latency (mean, p50, p95 or p99) changed at some level: the lowest level where it did, and every level where it did the same way. The others changed at no level. " + byChance(c)}, t)
	} else {
		out = append(out, &Para{Text: "No action's or request's latency (mean, p50, p95, p99) changed at any level."})
	}
	for _, l := range c.Levels {
		out = append(out, &Heading{Level: 3, Text: fmt.Sprintf("%d %s", l.Users, levelUnit(c))},
			rowsTable("action", b, n, l.Actions), rowsTable("request", b, n, l.Requests))
		out = append(out, apart("requests", b, n, l.OnlyBase, l.OnlyNew)...)
	}
	return out
}

// serverSideBlocks compare scraped server i: its resources and timings.
func serverSideBlocks(i int, s compare.ServerComparison, b, n string) []Block {
	out := []Block{&Heading{Level: 2, Text: fmt.Sprintf("Server %d: %s / %s (%s)", i+1, s.Base, s.New, s.Kind)}}
	t := metricTable(b, n)
	for _, m := range []*compare.Metric{&s.CPU, &s.Memory, &s.Goroutines} {
		if m.Base != 0 || m.New != 0 {
			metricRow(t, m.Name, m)
		}
	}
	for j := range s.Database {
		metricRow(t, s.Database[j].Name+" (window)", &s.Database[j])
	}
	for j := range s.SetupDatabase {
		metricRow(t, s.SetupDatabase[j].Name+" (setup)", &s.SetupDatabase[j])
	}
	for j := range s.Timings {
		metricRow(t, s.Timings[j].Title+": mean, common mix (ms)", &s.Timings[j].Mix)
	}
	out = append(out, t)
	for _, tc := range s.Timings {
		tt := metricTable(b, n)
		tt.Header[0] = tc.Title
		for k := range tc.Items {
			it := &tc.Items[k]
			metricRow(tt, it.Name+": mean (ms)", &it.Mean)
			metricRow(tt, it.Name+": p99 (ms)", &it.P99)
		}
		out = append(out, &Heading{Level: 3, Text: tc.Title + " (" + tc.Metric + ")"}, tt)
		out = append(out, apart(tc.Title, b, n, tc.OnlyBase, tc.OnlyNew)...)
	}
	return out
}

// VerdictTable is the headline figures of a comparison, each with both
// sides, the change with its interval, and the verdict.
func VerdictTable(c *compare.Comparison) *Table {
	t := metricTable(c.Base.Label, c.New.Label)
	for _, m := range headlines(c) {
		metricRow(t, m.Name, m)
	}
	return t
}

// loadRow is the setup's row of load: each run's users, or (the open
// model) each run's peak arrival rate.
func loadRow(c *compare.Comparison) [3]string {
	if c.Base.Model != result.ModelOpen {
		return [3]string{"users", ints(c.Base.Users), ints(c.New.Users)}
	}
	rates := func(rs []float64) string {
		parts := make([]string, len(rs))
		for i, r := range rs {
			parts[i] = num(r) + "/s"
		}
		return strings.Join(parts, ", ")
	}
	return [3]string{"peak arrival rate", rates(c.Base.Rates), rates(c.New.Rates)}
}

// levelUnit names what c's levels count: users, or arrivals/s.
func levelUnit(c *compare.Comparison) string { return result.UnitOf(c.Unit) }

// LevelsTable is a step comparison level by level: requests/s, mean, p99
// and errors over the common mix, each "base → new (change)", the server's
// CPU a request where the runs scraped it, and the worst verdict of the
// level.
func LevelsTable(c *compare.Comparison) *Table {
	t := &Table{Header: []string{levelUnit(c), "requests/s", "mean (ms)", "p99 (ms)", "errors"}, Right: []int{0}}
	servers, dbs := len(c.Levels[0].ServerCPU), len(c.Levels[0].Database)
	for _, l := range c.Levels {
		servers, dbs = min(servers, len(l.ServerCPU)), min(dbs, len(l.Database))
	}
	for _, m := range c.Levels[0].ServerCPU[:servers] {
		t.Header = append(t.Header, m.Name)
	}
	for _, m := range c.Levels[0].Database[:dbs] {
		t.Header = append(t.Header, m.Name)
	}
	t.Header = append(t.Header, "verdict")
	for _, l := range c.Levels {
		ms := []*compare.Metric{&l.Throughput, &l.MixMean, &l.MixP99, &l.MixErrors}
		for i := range servers {
			ms = append(ms, &l.ServerCPU[i])
		}
		for i := range dbs {
			ms = append(ms, &l.Database[i])
		}
		row := []string{fmt.Sprint(l.Users)}
		for _, m := range ms {
			row = append(row, change(m))
		}
		t.Rows = append(t.Rows, append(row, worst(ms)))
	}
	return t
}

// byChance says how many of the level-by-level verdicts of change chance
// alone would give.
func byChance(c *compare.Comparison) string {
	conf := c.Options.Confidence
	return fmt.Sprintf("Of the %d latency figures judged level by level at %s confidence, about %s would be judged a change by chance alone: a change at one level that the levels above it do not repeat is weaker evidence than one that persists.",
		c.LevelFigures, pctText(100*conf), num(float64(c.LevelFigures)*(1-conf)))
}

// OnsetsTable is where each request's and action's latency first changed,
// level by level, or nil when none did at any level.
func OnsetsTable(c *compare.Comparison) *Table {
	if len(c.Onsets) == 0 {
		return nil
	}
	t := &Table{Header: []string{"action or request", "first at (" + levelUnit(c) + ")", "verdict there", "change there", "levels with it"}, Right: []int{1}}
	for _, o := range c.Onsets {
		levels := make([]string, len(o.Levels))
		for i, u := range o.Levels {
			levels[i] = fmt.Sprint(u)
		}
		t.Rows = append(t.Rows, []string{o.Name, fmt.Sprint(o.Users), o.Verdict + " (" + strings.Join(o.Figures, ", ") + ")",
			o.Change, fmt.Sprintf("%s (of %d)", strings.Join(levels, ", "), o.Of)})
	}
	return t
}

// setupOnly: every run compared ran its users' setup and no action
// (run --setup-only), so no window figure has anything in it.
func setupOnly(c *compare.Comparison) bool {
	for _, r := range append(slices.Clip(c.Base.Results), c.New.Results...) {
		if !r.Config.SetupOnly {
			return false
		}
	}
	return len(c.Base.Results) > 0
}

// headlines are the figures a release note quotes.
func headlines(c *compare.Comparison) []*compare.Metric {
	var out []*compare.Metric
	if c.Users != nil {
		out = append(out, c.Users, c.CeilingRPS)
	}
	if w := &c.Window; !setupOnly(c) {
		out = append(out, &w.Throughput, &w.MixMean, &w.MixP99, &w.MixErrors)
	}
	if c.ServiceMean != nil {
		out = append(out, c.ServiceMean, c.ServiceP99)
	}
	if c.Setup != nil { // a login that got slower is a release note's too
		out = append(out, &c.Setup.MixMean, &c.Setup.MixP99)
	}
	if c.SetupRate != nil {
		out = append(out, c.SetupRate)
	}
	for i := range c.Profiles { // what the server spent a login or a request on
		out = append(out, &c.Profiles[i].CPUPerUnit)
	}
	for _, s := range c.Server {
		for i := range s.Database {
			m := s.Database[i]
			m.Name += " (window)"
			out = append(out, &m)
		}
		for i := range s.SetupDatabase { // a login that asks more of the database
			m := s.SetupDatabase[i]
			m.Name += " (setup)"
			out = append(out, &m)
		}
		for i := range s.Timings {
			m := s.Timings[i].Mix
			m.Name = s.Timings[i].Title + ", mean (common mix)"
			out = append(out, &m)
		}
	}
	return out
}

func metricTable(b, n string) *Table {
	return &Table{Header: []string{"figure", b, n, "change [interval]", "verdict"}, Right: []int{1, 2, 3}}
}

func metricRow(t *Table, name string, m *compare.Metric) {
	f := func(v, sd float64, runs int) string {
		s := num(v)
		if m.Points {
			s = pctText(v)
		}
		if runs > 1 {
			if sd < 1e-9*math.Max(1, math.Abs(v)) { // equal runs but for float rounding
				sd = 0
			}
			s += " ± " + num(sd)
		}
		return s
	}
	t.Rows = append(t.Rows, []string{name, f(m.Base, m.BaseSD, len(m.BaseRuns)), f(m.New, m.NewSD, len(m.NewRuns)), m.DeltaText(), m.Verdict})
}

// rowsTable is one line per request: the figures that move, with the
// worst verdict of the row.
func rowsTable(first, b, n string, rows []compare.Row) *Table {
	t := &Table{Header: []string{first, b + " count", n + " count", "mean (ms)", "p50 (ms)", "p95 (ms)", "p99 (ms)", "errors", "verdict"},
		Right: []int{1, 2}}
	for _, r := range rows {
		ms := []*compare.Metric{&r.Mean, &r.P50, &r.P95, &r.P99, &r.Errors}
		t.Rows = append(t.Rows, []string{r.Name, count(r.BaseCount), count(r.NewCount), change(ms[0]), change(ms[1]), change(ms[2]), change(ms[3]), change(ms[4]), worst(ms)})
	}
	return t
}

// change is one figure as "base → new (change)", without the interval.
func change(m *compare.Metric) string {
	v := func(x float64) string {
		if m.Points {
			return pctText(x)
		}
		return num(x)
	}
	d := "-"
	switch {
	case m.Verdict == compare.NoData || m.Verdict == compare.NotComparable:
	default:
		d = m.DeltaText()
		if i := strings.Index(d, " ["); i >= 0 {
			d = d[:i]
		}
	}
	return fmt.Sprintf("%s → %s (%s)", v(m.Base), v(m.New), d)
}

// worst is a row's verdict: a regression if any figure regressed (naming
// them), else an improvement if any improved, else the common verdict.
func worst(ms []*compare.Metric) string {
	var reg, imp []string
	for _, m := range ms {
		switch m.Verdict {
		case compare.Regression:
			reg = append(reg, m.Name)
		case compare.Improvement:
			imp = append(imp, m.Name)
		}
	}
	switch {
	case len(reg) > 0:
		return "regression (" + strings.Join(reg, ", ") + ")"
	case len(imp) > 0:
		return "improvement (" + strings.Join(imp, ", ") + ")"
	}
	return ms[0].Verdict
}

// apart lists names seen on one side only.
func apart(what, b, n string, onlyBase, onlyNew []string) []Block {
	var items []string
	if len(onlyBase) > 0 {
		items = append(items, fmt.Sprintf("only in %s: %s", b, strings.Join(onlyBase, ", ")))
	}
	if len(onlyNew) > 0 {
		items = append(items, fmt.Sprintf("only in %s: %s", n, strings.Join(onlyNew, ", ")))
	}
	if len(items) == 0 {
		return nil
	}
	return []Block{&Para{Text: "Left out of every figure above, as they were made on one side only (" + what + "):"}, &List{Items: items}}
}

func spanText(kind string) string {
	switch kind {
	case "ceiling":
		return "At each run's supported users (its measure hold)."
	case "step":
		return "Every held level together; per level below."
	}
	return "The measured window of each run (after the ramp)."
}

func kindName(kind string) string {
	switch kind {
	case "run":
		return "bounded runs"
	case "step":
		return "step runs"
	}
	return kind + " runs"
}

func ints(xs []int) string { return strings.Trim(fmt.Sprint(xs), "[]") }
