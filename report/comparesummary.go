package report

import (
	"fmt"

	"github.com/headroom-dev/headroom/compare"
)

// ComparisonSummary is what `headroom compare` prints on the terminal
// (Text renders it): the two sides, the verdicts, level by level and
// where changes start, every request and action figure that moved, the
// notes and what was left out. ForComparison is the full report.
func ComparisonSummary(c *compare.Comparison, baseLabel, newLabel string, nBase, nNew int) *Doc {
	d := &Doc{Blocks: []Block{
		&Para{Text: fmt.Sprintf("%s (%d runs) vs %s (%d runs), %s results", newLabel, nNew, baseLabel, nBase, c.Kind)},
		VerdictTable(c),
	}}
	if len(c.Levels) > 0 {
		d.Blocks = append(d.Blocks, &Heading{Level: 3, Text: "level by level:"}, LevelsTable(c))
		if t := OnsetsTable(c); t != nil {
			d.Blocks = append(d.Blocks, &Heading{Level: 3, Text: "where changes start (the lowest level where a latency changed, and every level where it did):"}, t,
				&Para{Text: fmt.Sprintf("(%d latency figures judged level by level at %g%% confidence: about %.1f would be judged a change by chance alone)",
					c.LevelFigures, 100*c.Options.Confidence, float64(c.LevelFigures)*(1-c.Options.Confidence))})
		}
	}
	if moved := Movers(c); len(moved) > 0 {
		d.Blocks = append(d.Blocks, &Heading{Level: 3, Text: "per request and action:"}, &List{Items: moved})
	}
	if lines := ProfileLines(c); len(lines) > 0 {
		d.Blocks = append(d.Blocks, &Heading{Level: 3, Text: "server CPU profiles (--profile):"}, &List{Items: lines})
	}
	for _, n := range c.Notes {
		d.Blocks = append(d.Blocks, &Para{Text: "note: " + n})
	}
	if win := c.Window; len(win.OnlyBase)+len(win.OnlyNew) > 0 {
		d.Blocks = append(d.Blocks, &Para{Text: fmt.Sprintf("left out (one side only): %s only: %v; %s only: %v", baseLabel, win.OnlyBase, newLabel, win.OnlyNew)})
	}
	return d
}

// Movers lists every request and action figure, the window's and the
// setups', whose verdict is a regression or an improvement, regressions
// first: "regression setup POST /login: mean +95.8% [+79.6%, +112.1%]".
func Movers(c *compare.Comparison) []string {
	var reg, imp []string
	type rows struct {
		prefix string // "setup " for the users' setups
		rows   []compare.Row
	}
	sets := []rows{{"", c.Window.Requests}, {"", c.Window.Actions}}
	if c.Setup != nil {
		sets = append(sets, rows{"setup ", c.Setup.Requests}, rows{"setup ", c.Setup.Actions})
	}
	for _, set := range sets {
		for _, r := range set.rows {
			for _, m := range []*compare.Metric{&r.Mean, &r.P50, &r.P95, &r.P99, &r.Errors} {
				line := fmt.Sprintf("%s %s%s: %s %s", m.Verdict, set.prefix, r.Name, m.Name, m.DeltaText())
				switch m.Verdict {
				case compare.Regression:
					reg = append(reg, line)
				case compare.Improvement:
					imp = append(imp, line)
				}
			}
		}
	}
	return append(reg, imp...)
}

// ProfileLines are each compared profile's CPU a unit and, where one was
// named, the cause, a line a phase of each target; with several targets
// (a server and its database) they say which process moved:
// "Target 2 (mariadbd), the measured window: CPU a request 1.1 → 5.9 ms,
// +420% [+380%, +460%], regression; most of it in handler::ha_rnd_next (mariadbd)".
func ProfileLines(c *compare.Comparison) []string {
	var out []string
	for _, pc := range c.Profiles {
		m := pc.CPUPerUnit
		line := fmt.Sprintf("%s, %s: CPU a %s %s → %s ms, %s, %s", targetName(pc), phaseName(pc.Phase), pc.Unit, num(m.Base), num(m.New), m.DeltaText(), m.Verdict)
		if pc.Cause != "" {
			line += "; most of it in " + funcName(pc.Cause)
		}
		out = append(out, line)
	}
	return out
}
