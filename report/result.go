package report

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/headroom-dev/headroom/analysis"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// ForResult is the report of one run: its setup, its answer (the
// ceiling, the knee), its tables and its charts.
func ForResult(r *result.Result) *Doc { return forResult(r, true) }

// Summary is what a terminal shows when a run ends: the report without
// its setup and its charts, every other block as ForResult has it, so the
// terminal and the reports say the same thing in the same words.
func Summary(r *result.Result) *Doc { return forResult(r, false) }

func forResult(r *result.Result, full bool) *Doc {
	d := &Doc{Title: fmt.Sprintf("headroom %s: %s against %s", r.Kind, filepath.Base(r.Config.Scenario), r.Config.Target)}
	add := func(b ...Block) {
		for _, b := range b {
			switch b.(type) {
			case *Chart, *Flame:
				if !full {
					continue
				}
			}
			d.Blocks = append(d.Blocks, b)
		}
	}
	add(&Para{Text: headline(r)})
	if full {
		add(&Heading{Level: 2, Text: "Setup"}, setupTable(r), &Para{Text: "Command: " + strings.Join(r.Config.Command, " ")})
	}
	if len(r.Config.UserTypes) > 0 {
		add(&Heading{Level: 3, Text: "User types"}, typesTable(r))
	}
	if len(r.Notes) > 0 {
		add(&Heading{Level: 2, Text: "Notes"}, &List{Items: r.Notes})
	}
	add(omissionBlocks(r)...)
	switch {
	case r.Ceiling != nil:
		add(ceilingBlocks(r, full)...)
	case r.Step != nil:
		add(stepBlocks(r)...)
	}
	if !r.Config.SetupOnly { // no window: the setup's figures are the answer
		add(requestBlocks(r)...)
		add(connectedBlocks(r.Connected, openDuring(r))...)
	}
	add(setupBlocks(r)...)
	add(errorBlocks(r)...)
	add(&Heading{Level: 2, Text: "Generator"}, &Para{Text: generatorText(r.Generator)})
	add(agentBlocks(r)...)
	if full {
		add(&Heading{Level: 2, Text: "Over time"})
		add(timelineCharts("", []namedRun{{name: "run", res: r}})...)
	}
	add(serverBlocks(r)...)
	add(profileBlocks(r)...)
	return d
}

// requestBlocks are the requests' and actions' tables of the measured
// window, with the open model's service times and arrivals.
func requestBlocks(r *result.Result) []Block {
	out := []Block{&Heading{Level: 2, Text: "Requests"}, &Para{Text: windowText(r)}, summaryTable("request", append(r.Requests, r.Totals))}
	if n := r.StoppingTotals.Count; n > 0 {
		out = append(out, &Para{Text: fmt.Sprintf("%s more requests ended while users stopped, after the window: in stopping_totals, in no figure above.", count(n))})
	}
	if txt := wireText(r.Totals); txt != "" {
		out = append(out, &Para{Text: txt})
	}
	out = append(out, phaseBlocks(r.Phases, false)...)
	out = append(out, openBlocks(r)...)
	if len(r.Actions) > 0 {
		out = append(out, &Heading{Level: 3, Text: "Actions"}, summaryTable("action", r.Actions))
		if anyNoRequest(r.Actions) {
			out = append(out, &Para{Text: NoRequestNote})
		}
	}
	return out
}

// wireText says how the requests went on the wire, when it is not plain
// HTTP/1.1: how many responses came over HTTP/2, and what compression
// saved; "" otherwise.
func wireText(t metrics.Summary) string {
	var parts []string
	switch {
	case t.HTTP2 > 0 && t.HTTP2 == t.Count:
		parts = append(parts, "Every response came over HTTP/2.")
	case t.HTTP2 > 0:
		parts = append(parts, fmt.Sprintf("%s of the %s responses came over HTTP/2, the rest over HTTP/1.1.", count(t.HTTP2), count(t.Count)))
	}
	if t.BodyIn > t.BytesIn && t.BytesIn > 0 {
		parts = append(parts, fmt.Sprintf("Bodies came compressed: %s MiB on the wire, heads included, held %s MiB decoded (%s times as much).",
			num(float64(t.BytesIn)/(1<<20)), num(float64(t.BodyIn)/(1<<20)), num(float64(t.BodyIn)/float64(t.BytesIn))))
	}
	return strings.Join(parts, " ")
}

// serverBlocks are the scraped server's figures over the measured window.
func serverBlocks(r *result.Result) []Block {
	if r.Server == nil {
		return nil
	}
	out := []Block{&Heading{Level: 2, Text: "Server"}}
	for _, tg := range r.Server.Targets {
		w := tg.Window
		if w.Database != nil {
			requests := float64(r.Totals.Count)
			if r.Step != nil { // its server window spans the levels' setups too: a request at each level, below
				requests = 0
			}
			txt := fmt.Sprintf("%s (a %s database's exporter), over the measured window: %s", tg.URL, w.Database.System,
				databaseText(w.Database, requests, "request"))
			if st := tg.Setup; st != nil && st.Database != nil && r.Setup != nil {
				txt += "; over users' setup (from the start to the window): " + databaseText(st.Database, float64(r.Setup.Users), "user set up")
			}
			out = append(out, &Para{Text: txt + "."})
			continue
		}
		txt := fmt.Sprintf("%s (%s), over the measured window: CPU %s cores mean, %s max; memory %s MiB mean, %s max",
			tg.URL, tg.Kind, num(w.CPUCoresMean), num(w.CPUCoresMax), num(w.MemoryMBMean), num(w.MemoryMBMax))
		if tg.Memory != "" {
			txt += " (" + tg.Memory + ")"
		}
		if has(tg.Has, "goroutines") {
			txt += fmt.Sprintf("; goroutines %s mean, %s max", num(w.GoroutinesMean), num(w.GoroutinesMax))
		}
		if tg.Failed > 0 {
			txt += fmt.Sprintf(". %d of %d scrapes failed (last: %s)", tg.Failed, tg.Scrapes+tg.Failed, tg.LastError)
		}
		out = append(out, &Para{Text: txt + "."})
		out = append(out, timingTables(w)...)
	}
	return append(out, serverCharts("", []namedRun{{name: "run", res: r}})...)
}

// databaseText says what a database did over a span of units of work
// (requests, users set up): each figure, and a unit.
func databaseText(d *result.DatabaseWork, units float64, unit string) string {
	per := func(v float64, what string) string {
		t := count(int64(math.Round(v))) + " " + what
		if units > 0 {
			t += fmt.Sprintf(" (%s a %s)", num(v/units), unit)
		}
		return t
	}
	return per(d.Queries+d.Transactions, dbWork(d)) + ", " + per(d.RowsRead, "rows read")
}

// dbWork names what a database's system counts of its work: statements
// (MySQL, MariaDB) or transactions (PostgreSQL).
func dbWork(d *result.DatabaseWork) string {
	if d.System == "postgresql" {
		return "transactions"
	}
	return "queries"
}

// perRequest is v over n requests, "–" when there were none.
func perRequest(v float64, n int64) string {
	if n <= 0 {
		return "–"
	}
	return num(v / float64(n))
}

// errorBlocks list the most common error messages of the actions and
// of users' setups, most first: ten at most.
func errorBlocks(r *result.Result) []Block {
	type message struct {
		text string
		n    int64
	}
	var ms []message
	actions := r.Actions
	if r.Setup != nil {
		actions = append(slices.Clip(actions), r.Setup.Attempts)
	}
	for _, s := range actions {
		for m, n := range s.Messages {
			if m == "other" { // the overflow: not a message of its own
				m = "other messages, past the 20 kinds kept for it"
			}
			ms = append(ms, message{s.Name + ": " + m, n})
		}
	}
	if len(ms) == 0 {
		return nil
	}
	sort.SliceStable(ms, func(i, j int) bool {
		if ms[i].n != ms[j].n {
			return ms[i].n > ms[j].n
		}
		return ms[i].text < ms[j].text
	})
	items := []string{}
	for _, m := range ms[:min(len(ms), 10)] {
		items = append(items, fmt.Sprintf("%s × %s", count(m.n), m.text))
	}
	return []Block{&Heading{Level: 2, Text: "Errors"}, &List{Items: items}}
}

// generatorText is the generator's own figures: what it cost, and how
// true its schedule was.
func generatorText(g result.Generator) string {
	s := fmt.Sprintf("%s, %d cores: CPU %s%% of a core, peak RSS %s MB, %d late wake-ups.", g.Host, g.GOMAXPROCS, num(g.CPUPercent), num(g.PeakRSSMB), g.LateWakeups)
	if line := analysis.ScheduleLine(g.Lateness, g.Burstiness); line != "" {
		s += " Its schedule: " + line + "."
	}
	return s
}

func headline(r *result.Result) string {
	switch r.Status {
	case result.Interrupted:
		return fmt.Sprintf("This %s was interrupted: its figures cover what it measured before. %s", r.Kind, answer(r))
	case result.Stopped:
		return fmt.Sprintf("This %s was stopped early by headroom (the notes say why): its figures cover what it measured before. %s", r.Kind, answer(r))
	case result.Failed:
		return fmt.Sprintf("This %s measured nothing (the notes say why). %s", r.Kind, answer(r))
	}
	return answer(r)
}

// answer is a run's answer in a sentence or two: the supported users, the
// knee, or the load and its latency.
func answer(r *result.Result) string {
	switch {
	case r.Ceiling != nil:
		su := r.Ceiling.SupportedUsers
		if !su.Found {
			return "No ceiling found: " + su.Why + "."
		}
		what, per := "Supported users", ""
		if r.Ceiling.UnitName() == result.UnitRate {
			what, per = "Supported arrival rate", "/s"
		}
		s := fmt.Sprintf("%s: %s%s (%s), at %s requests/s; found in %s.", what, num(su.Value), per, interval(su), num(r.Ceiling.ThroughputRPS), seconds(r.Ceiling.SearchSeconds))
		if su.Why != "" { // why the interval is wider than the precision asked
			s += " " + strings.ToUpper(su.Why[:1]) + su.Why[1:] + "."
		}
		if b := setupBound(r); b != "" {
			s += " " + b
		} else if b := firstBottleneck(r.Ceiling); b != "" {
			s += " Bottleneck: " + b + "."
		}
		if !r.Ceiling.Trustworthy {
			s += " Not trustworthy: " + r.Ceiling.Untrusted + "."
		}
		return s
	case r.Step != nil:
		return r.Step.Knee.Summary
	case r.Config.Open():
		return openHeadline(r)
	case r.Config.SetupOnly:
		return setupOnlyAnswer(r)
	}
	return fmt.Sprintf("%d users for %s: %s requests/s, mean %s ms, p99 %s ms, errors %s.", r.Config.Users, seconds(r.Window.Seconds),
		num(r.Totals.RPS), num(r.Totals.MeanMs), num(r.Totals.P99Ms), errPct(r.Totals))
}

func interval(su result.Supported) string {
	if su.High > 0 {
		return fmt.Sprintf("in [%s, %s), %s", num(su.Low), num(su.High), su.Method)
	}
	return fmt.Sprintf("no unhealthy level found above %s, %s", num(su.Low), su.Method)
}

// firstBottleneck names the check that fired first, and how often.
func firstBottleneck(c *result.Ceiling) string {
	for _, b := range c.Bottleneck {
		if b.First {
			return fmt.Sprintf("%s (fired in %d of %d judged evaluations)", b.Check, b.Fired, b.Evaluations-b.Inactive)
		}
	}
	return ""
}

func setupTable(r *result.Result) *Table {
	c := r.Config
	t := &Table{Header: []string{"setting", "value"}}
	row := func(k, v string) { t.Rows = append(t.Rows, []string{k, v}) }
	if c.Label != "" {
		row("label", c.Label)
	}
	row("kind", r.Kind)
	row("status", r.Status)
	row("scenario", fmt.Sprintf("%s (%s)", c.Scenario, short(c.ScenarioHash)))
	row("target", c.Target)
	switch {
	case r.Ceiling != nil:
		row("controller", r.Ceiling.Controller)
		row("checks evaluated by", r.Ceiling.Evaluator)
		if c.Open() {
			poolRows(c, row)
		}
	case r.Step != nil:
		levels := strings.Trim(fmt.Sprint(r.Step.Planned), "[]")
		if r.Step.UnitName() == result.UnitRate {
			levels = strings.ReplaceAll(levels, " ", "/s ") + "/s"
		}
		row("levels", levels)
		row("hold / settle", fmt.Sprintf("%s / %s", seconds(r.Step.HoldS), seconds(r.Step.SettleS)))
		if c.Open() {
			poolRows(c, row)
		}
	case c.Open():
		openRows(c, row)
	default:
		row("users", fmt.Sprint(c.Users))
		row("ramp / duration", fmt.Sprintf("%s / %s", seconds(c.RampS), seconds(c.DurationS)))
	}
	if len(c.UserTypes) == 0 {
		row("actions (weight)", actionMix(c.Actions))
		if c.Open() {
			row("think time", "not used: the rate paces the actions ("+c.Think+" in the scenario)")
		} else {
			row("think time", c.Think)
		}
	} else {
		row("user types", fmt.Sprintf("%d, below", len(c.UserTypes)))
	}
	row("seed", fmt.Sprint(c.Seed))
	row("started", r.StartedAt.UTC().Format("2006-01-02 15:04:05 UTC"))
	row("took", seconds(r.EndedAt.Sub(r.StartedAt).Seconds()))
	row("headroom", r.Headroom)
	return t
}

func actionMix(as []result.ActionWeight) string {
	var mix []string
	for _, a := range as {
		mix = append(mix, fmt.Sprintf("%s %.3g", a.Name, a.Weight))
	}
	return strings.Join(mix, ", ")
}

// typesTable lists a scenario's user types: weight, users started,
// actions and think time.
func typesTable(r *result.Result) *Table {
	t := &Table{Header: []string{"user type", "weight", "users", "actions (weight)", "think time"}, Right: []int{1, 2}}
	for _, ut := range r.Config.UserTypes {
		users := "-"
		if n, ok := r.UsersByType[ut.Name]; ok {
			users = count(int64(n))
		}
		t.Rows = append(t.Rows, []string{ut.Name, fmt.Sprintf("%.3g", ut.Weight), users, actionMix(ut.Actions), ut.Think})
	}
	return t
}

// short shortens a "sha256:<hex>" hash to a recognisable prefix.
func short(h string) string {
	if len(h) > 19 {
		return h[:19]
	}
	return h
}

func windowText(r *result.Result) string {
	switch {
	case r.Ceiling != nil:
		if r.Ceiling.UnitName() == result.UnitRate {
			return "At the supported arrival rate: " + r.Ceiling.StatsWindow + ". Latency from the intended start (the service time, from the actual send, is below)."
		}
		return "At the supported users: " + r.Ceiling.StatsWindow + "."
	case r.Step != nil:
		return "Every level's held window together (settling excluded); per level below."
	case r.Config.Open():
		return fmt.Sprintf("The measured window: %s once the pool of users was set up. Latency from the intended start: from when each arrival was due "+
			"to the end of its response, a wait for a free user included (the service time, from the actual send, is below).", seconds(r.Window.Seconds))
	}
	return fmt.Sprintf("The measured window: %s after the ramp (the ramp's %s requests are left out).", seconds(r.Window.Seconds), count(r.RampTotals.Count))
}

// ceilingBlocks are a ceiling run's checks and levels; full adds each
// check's query and its chart.
func ceilingBlocks(r *result.Result, full bool) []Block {
	ci := r.Ceiling
	out := []Block{&Heading{Level: 2, Text: "Health checks"}}
	t := &Table{Header: []string{"check", "threshold", "fired", "first"}, Right: []int{1, 2}}
	var inactive, failed, queries []string
	for i, b := range ci.Bottleneck {
		first := ""
		if b.First {
			first = fmt.Sprintf("first, at %s", seconds(b.FirstAt))
		}
		thr := ""
		if i < len(ci.Checks) {
			thr = num(ci.Checks[i].Threshold)
			if ci.Checks[i].Below {
				thr = "below " + thr
			}
		}
		if i < len(ci.Checks) {
			queries = append(queries, b.Check+": "+ci.Checks[i].Query)
		}
		fired := fmt.Sprintf("%d of %d", b.Fired, b.Evaluations-b.Inactive)
		switch {
		case ci.NoSource(i):
			fired = "inactive"
			inactive = append(inactive, b.Check+needs(ci, i))
		case b.Inactive > 0:
			fired += fmt.Sprintf(" (inactive in %d more)", b.Inactive)
		}
		if b.Failed > 0 {
			failed = append(failed, fmt.Sprintf("%s %d times (last: %s)", b.Check, b.Failed, b.LastError))
		}
		t.Rows = append(t.Rows, []string{b.Check, thr, fired, first})
	}
	out = append(out, t)
	if len(inactive) > 0 {
		out = append(out, &Para{Text: "Inactive, never evaluated (no scraped target exposed what they need): " + strings.Join(inactive, "; ") + "."})
	}
	if len(failed) > 0 {
		out = append(out, &Para{Text: "Could not be evaluated, counted as firing: " + strings.Join(failed, "; ") + "."})
	}
	if full && len(queries) > 0 {
		out = append(out, &Para{Text: "Their queries:"}, &List{Items: queries})
	}
	out = append(out, levelBlocks(ci)...)
	if full {
		out = append(out, checkCharts(ci)...)
	}
	return out
}

// levelBlocks are the levels a search held, with their verdicts.
func levelBlocks(ci *result.Ceiling) []Block {
	if len(ci.Levels) == 0 {
		return nil
	}
	lt := &Table{Header: []string{"users", "set up", "setups/s", "judged", "unhealthy", "pressure", "verdict"}, Right: []int{0, 1, 2, 3, 4, 5}}
	if ci.UnitName() == result.UnitRate {
		lt.Header[0], lt.Header[1] = "arrivals/s", "reached"
	}
	for _, l := range ci.Levels {
		verdict := l.Verdict
		switch {
		case l.Hold:
			verdict += " (hold at the answer)"
		case l.Undecided:
			verdict += " (undecided)"
		}
		if l.Why != "" {
			verdict += ": " + l.Why
		}
		if l.KeptOut > 0 {
			verdict += fmt.Sprintf("; %d firing evaluations kept out, the generator's load untrue (%s)", l.KeptOut, l.Untrue)
		}
		setUp := fmt.Sprint(l.SetUp)
		if l.SetUp == 0 && l.Evaluations > 0 { // a result from before set-up counts
			setUp = "–"
		}
		rate := "–" // reached by removing users, or by the open model's rate
		if l.SetupPerS > 0 {
			rate = num(l.SetupPerS)
		}
		lt.Rows = append(lt.Rows, []string{fmt.Sprint(l.Users), setUp, rate, fmt.Sprint(l.Evaluations), fmt.Sprint(l.Unhealthy), num(l.Pressure), verdict})
	}
	return []Block{&Heading{Level: 3, Text: "Levels the search held"}, lt}
}

// checkCharts draw each check's value against its threshold over the run.
func checkCharts(ci *result.Ceiling) []Block {
	var out []Block
	for i, ch := range ci.Checks {
		if ci.NoSource(i) {
			continue // no value to draw
		}
		c := &Chart{Name: fmt.Sprintf("check%d", i+1), Title: "Check: " + ch.Name, XLabel: "time since start (s)", YLabel: "value"}
		v, thr := Series{Name: "value"}, Series{Name: "threshold", Dashed: true}
		for _, p := range ci.CheckTimeline {
			y := math.NaN()
			if i < len(p.Values) && p.Values[i] != nil {
				y = *p.Values[i]
			}
			v.X, v.Y = append(v.X, p.T), append(v.Y, y)
			thr.X, thr.Y = append(thr.X, p.T), append(thr.Y, ch.Threshold)
		}
		c.Series = []Series{v, thr}
		out = append(out, c)
	}
	return out
}

// needs is what check i waited for, as " (a or b)"; "" when the result
// does not say.
func needs(ci *result.Ceiling, i int) string {
	if i >= len(ci.Checks) || len(ci.Checks[i].Requires) == 0 {
		return ""
	}
	return " (" + strings.Join(ci.Checks[i].Requires, " or ") + ")"
}
