package report

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// LiveState is what the live view (--ui) shows of a run as it goes, beside
// the result so far.
type LiveState struct {
	// Status is the terminal's status line, word for word; Events the lines
	// it printed of their own (a ceiling's decisions, a step's levels done,
	// warnings), oldest first: the page shows them newest first.
	Status string
	Events []string
	// Last holds the last seconds' figures, per name: the tables' span;
	// Total, if not nil, all their requests (else merged from Last).
	Last  *metrics.Snapshot
	Total *metrics.Stat
	// Agents are the agents' figures now; nil without agents.
	Agents *result.Agents
	// Generator is this process's own figures now (CPU, lateness).
	Generator string
	// Dropped is how many updates the page's viewers were too slow for.
	Dropped int64
}

// Live is the page of a run as it goes: the status, the last seconds'
// requests and connections, a ceiling's checks, levels and decisions or a
// step's levels so far, the agents, the generator and the charts over time
// — each block built as the run's report builds it, from r, the result so
// far (read only).
func Live(r *result.Result, s LiveState) *Doc {
	d := &Doc{Title: fmt.Sprintf("headroom %s: %s against %s (live)", r.Kind, filepath.Base(r.Config.Scenario), r.Config.Target)}
	add := func(b ...Block) { d.Blocks = append(d.Blocks, b...) }
	add(&Para{Text: s.Status})
	if len(s.Events) > 0 { // a ceiling's decisions, a step's levels done, warnings
		items := slices.Clone(s.Events)
		slices.Reverse(items)
		add(&Heading{Level: 3, Text: "The latest events"}, &List{Items: items})
	}
	// What a watcher looks at first: the answer taking shape, then the load.
	switch {
	case r.Ceiling != nil:
		add(ceilingBlocks(r, false)...)
		add(checkCharts(r.Ceiling)...)
	case r.Step != nil && len(r.Step.Levels) > 0:
		add(stepBlocks(r)...)
	}
	add(&Heading{Level: 2, Text: "Over time"})
	add(timelineCharts("", []namedRun{{name: "run", res: r}})...)
	if last := s.Last; last != nil && !last.Start.IsZero() {
		win := last.End.Sub(last.Start)
		all := s.Total
		if all == nil {
			all = last.Total(metrics.Request, metrics.NewStat())
		}
		add(&Heading{Level: 2, Text: fmt.Sprintf("Requests, the last %s", seconds(win.Seconds()))},
			summaryTable("request", append(last.Summaries(metrics.Request, win), all.Summarize("all requests", win))))
		if as := last.Summaries(metrics.Action, win); len(as) > 0 {
			add(&Heading{Level: 3, Text: "Actions"}, summaryTable("action", as))
		}
		add(connectedBlocks(result.ConnectedOf(last, win), "")...)
	}
	gen := s.Generator
	if s.Dropped > 0 {
		gen += fmt.Sprintf(" %s updates of this page were dropped: a viewer was too slow for them (the run went on).", count(s.Dropped))
	}
	add(&Heading{Level: 2, Text: "Generator"}, &Para{Text: gen})
	if s.Agents != nil {
		cp := *r
		cp.Agents = s.Agents
		add(agentBlocks(&cp)...)
	}
	return d
}
