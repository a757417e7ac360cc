package report

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/headroom-dev/headroom/result"
)

// ForResult is the report of one run: its setup, its answer (the
// ceiling, the knee), its tables and its charts.
func ForResult(r *result.Result) *Doc {
	d := &Doc{Title: fmt.Sprintf("headroom %s: %s against %s", r.Kind, filepath.Base(r.Config.Scenario), r.Config.Target)}
	add := func(b ...Block) { d.Blocks = append(d.Blocks, b...) }
	add(&Para{Text: headline(r)})
	add(&Heading{Level: 2, Text: "Setup"}, setupTable(r), &Para{Text: "Command: " + strings.Join(r.Config.Command, " ")})
	if len(r.Config.UserTypes) > 0 {
		add(&Heading{Level: 3, Text: "User types"}, typesTable(r))
	}
	if len(r.Notes) > 0 {
		add(&Heading{Level: 2, Text: "Notes"}, &List{Items: r.Notes})
	}
	add(omissionBlocks(r)...)
	switch {
	case r.Ceiling != nil:
		add(ceilingBlocks(r)...)
	case r.Step != nil:
		add(stepBlocks(r)...)
	}
	add(&Heading{Level: 2, Text: "Requests"}, &Para{Text: windowText(r)}, summaryTable("request", r.Requests))
	add(openBlocks(r)...)
	if len(r.Actions) > 0 {
		add(&Heading{Level: 3, Text: "Actions"}, summaryTable("action", r.Actions))
		if anyNoRequest(r.Actions) {
			add(&Para{Text: NoRequestNote})
		}
	}
	add(connectedBlocks(r.Connected)...)
	if st := r.Setup; st != nil {
		add(&Heading{Level: 2, Text: "Users' setup"}, &Para{Text: setupText(st)})
		if len(st.Requests) > 0 {
			add(summaryTable("setup request", append(st.Requests, st.Totals)))
		}
	}
	add(agentBlocks(r)...)
	add(&Heading{Level: 2, Text: "Over time"})
	add(timelineCharts("", []namedRun{{name: "run", res: r}})...)
	if r.Server != nil {
		add(&Heading{Level: 2, Text: "Server"})
		for _, tg := range r.Server.Targets {
			w := tg.Window
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
			add(&Para{Text: txt + "."})
			add(timingTables(w)...)
		}
		add(serverCharts("", []namedRun{{name: "run", res: r}})...)
	}
	return d
}

func headline(r *result.Result) string {
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
		if b := firstBottleneck(r.Ceiling); b != "" {
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

// setupText sums up users' setups, which no other figure holds.
func setupText(st *result.Setup) string {
	t := st.TimeToSetUp
	return fmt.Sprintf("In no figure above: %d of %d users finished setup, in %d attempts (%d failed). Time to set up a user, from its first attempt: p50 %s ms, p95 %s ms, p99 %s ms, max %s ms.",
		st.Users, st.Started, st.Attempts.Count, st.Attempts.Errors+st.Attempts.Timeouts, num(t.P50Ms), num(t.P95Ms), num(t.P99Ms), num(t.MaxMs))
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
	g := r.Generator
	row("generator", fmt.Sprintf("%s, %d cores, CPU %s%% of a core, peak RSS %s MB, %d late wake-ups", g.Host, g.GOMAXPROCS, num(g.CPUPercent), num(g.PeakRSSMB), g.LateWakeups))
	if line := result.ScheduleLine(g.Lateness, g.Burstiness); line != "" {
		row("generator's schedule", line)
	}
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

func ceilingBlocks(r *result.Result) []Block {
	ci := r.Ceiling
	out := []Block{&Heading{Level: 2, Text: "Health checks"}}
	t := &Table{Header: []string{"check", "threshold", "fired", "first", "query"}, Right: []int{1, 2}}
	var inactive []string
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
		q := ""
		if i < len(ci.Checks) {
			q = ci.Checks[i].Query
		}
		fired := fmt.Sprintf("%d of %d", b.Fired, b.Evaluations-b.Inactive)
		switch {
		case ci.NoSource(i):
			fired = "inactive"
			inactive = append(inactive, b.Check+needs(ci, i))
		case b.Inactive > 0:
			fired += fmt.Sprintf(" (inactive in %d more)", b.Inactive)
		}
		t.Rows = append(t.Rows, []string{b.Check, thr, fired, first, q})
	}
	out = append(out, t)
	if len(inactive) > 0 {
		out = append(out, &Para{Text: "Inactive, never evaluated (no scraped target exposed what they need): " + strings.Join(inactive, "; ") + "."})
	}
	if len(ci.Levels) > 0 {
		lt := &Table{Header: []string{"users", "set up", "judged", "unhealthy", "pressure", "verdict"}, Right: []int{0, 1, 2, 3, 4}}
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
			lt.Rows = append(lt.Rows, []string{fmt.Sprint(l.Users), setUp, fmt.Sprint(l.Evaluations), fmt.Sprint(l.Unhealthy), num(l.Pressure), verdict})
		}
		out = append(out, &Heading{Level: 3, Text: "Levels the search held"}, lt)
	}
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

func stepBlocks(r *result.Result) []Block {
	st := r.Step
	out := []Block{&Heading{Level: 2, Text: "Levels"}, &Para{Text: st.Knee.Summary}}
	unit := "users"
	open := st.UnitName() == result.UnitRate
	if open {
		unit = "arrivals/s"
	}
	t := &Table{Header: []string{unit, "req/s", "mean (ms)", "p50 (ms)", "p95 (ms)", "p99 (ms)", "errors", "held"}, Right: []int{0, 1, 2, 3, 4, 5, 6, 7}}
	if open {
		t.Header = append(t.Header, "dropped", "late", "service p95 (ms)")
		t.Right = append(t.Right, 8, 9, 10)
		out = append(out, &Para{Text: "Latencies count from each arrival's intended start; the service time from the request's actual send. " +
			"Dropped: arrivals that found no user of the pool free; late: those that started more than 10 ms after they were due."})
	}
	thr := &Chart{Name: "step-throughput", Title: "Throughput by level", XLabel: unit, YLabel: "requests/s"}
	lat := &Chart{Name: "step-latency", Title: "Latency by level", XLabel: unit, YLabel: "ms"}
	tput, mean, p95 := Series{Name: "requests/s"}, Series{Name: "mean"}, Series{Name: "p95"}
	for _, l := range st.Levels {
		held := seconds(l.Window.Seconds)
		if !l.Complete {
			held += " (cut short)"
		}
		s := l.Totals
		row := []string{fmt.Sprint(l.Users), num(s.RPS), num(s.MeanMs), num(s.P50Ms), num(s.P95Ms), num(s.P99Ms), errPct(s), held}
		if open {
			dropped, late, svc := "–", "–", "–"
			if a := l.Arrivals; a != nil {
				dropped, late = num(a.DroppedPct)+"%", count(a.Late)
			}
			if sv := l.ServiceTimes; sv != nil {
				svc = num(sv.Totals.P95Ms)
			}
			row = append(row, dropped, late, svc)
		}
		t.Rows = append(t.Rows, row)
		u := float64(l.Users)
		tput.X, tput.Y = append(tput.X, u), append(tput.Y, s.RPS)
		mean.X, mean.Y = append(mean.X, u), append(mean.Y, s.MeanMs)
		p95.X, p95.Y = append(p95.X, u), append(p95.Y, s.P95Ms)
	}
	thr.Series, lat.Series = []Series{tput}, []Series{mean, p95}
	out = append(out, t, thr, lat)
	// Per level and request: the forum table, correct.
	pr := &Table{Header: []string{unit, "request", "req/s", "median (ms)", "p95 (ms)", "p99 (ms)", "errors"}, Right: []int{0, 2, 3, 4, 5, 6}}
	for _, l := range st.Levels {
		for _, s := range l.Requests {
			pr.Rows = append(pr.Rows, []string{fmt.Sprint(l.Users), s.Name, num(s.RPS), num(s.P50Ms), num(s.P95Ms), num(s.P99Ms), errPct(s)})
		}
	}
	out = append(out, &Heading{Level: 3, Text: "Per level and request"}, pr)
	return out
}
