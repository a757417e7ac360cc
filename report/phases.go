package report

import (
	"fmt"
	"slices"

	"github.com/headroom-dev/headroom/compare"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// phaseBlocks say where each request name's time went (result.Phases):
// the connections' phases as a mean and how many made one, the wait (time
// to first byte) and receive at their median and p99; of the users'
// setups with setup (result.Setup.Phases).
func phaseBlocks(ps result.Phases, setup bool) []Block {
	if len(ps) == 0 {
		return nil
	}
	var names []string
	for _, t := range ps {
		for _, s := range t.Requests {
			if !slices.Contains(names, s.Name) {
				names = append(names, s.Name)
			}
		}
	}
	slices.Sort(names)
	names = append(names, "all requests")
	// The connections' phases that any request went through.
	var conns []string
	for _, p := range metrics.PhaseNames[:metrics.PhaseWait] {
		if ps[p] != nil {
			conns = append(conns, p)
		}
	}
	// The wait and receive, whose every column stays, and unread where
	// the kernel stamped any response.
	timed := []string{metrics.PhaseNames[metrics.PhaseWait], metrics.PhaseNames[metrics.PhaseReceive]}
	if unread := metrics.PhaseNames[metrics.PhaseUnread]; ps[unread] != nil {
		timed = append(timed, unread)
	}
	t := &Table{Header: []string{"request"}}
	for _, p := range conns {
		t.Header = append(t.Header, p+" (ms)")
	}
	for _, p := range timed {
		t.Header = append(t.Header, p+" p50 (ms)", p+" p99 (ms)")
	}
	for i := 1; i < len(t.Header); i++ {
		t.Right = append(t.Right, i)
	}
	for _, name := range names {
		row := []string{name}
		for _, p := range conns {
			row = append(row, made(phaseOf(ps, p, name)))
		}
		for _, p := range timed {
			s := phaseOf(ps, p, name)
			if s == nil {
				row = append(row, "", "")
				continue
			}
			row = append(row, num(s.P50Ms), num(s.P99Ms))
		}
		t.Rows = append(t.Rows, row)
	}
	heading, where := "Where the time went", "in the window"
	if setup {
		heading, where = "Where the setups' time went", "in a setup"
	}
	return []Block{&Heading{Level: 3, Text: heading},
		&Para{Text: "wait: from sending the request to the response's first byte; receive: from it to the response's end; dns, connect, " +
			"tls (where any request made a connection " + where + "): the mean of those that did, how many in brackets (docs/HTTP.md)." + unreadNote(ps)},
		t}
}

// phaseCompareBlocks are the comparison's phases (compare.PhaseRow): per
// request name, each phase's mean and p99, base against new.
func phaseCompareBlocks(c *compare.Comparison) []Block {
	if len(c.Phases) == 0 {
		return nil
	}
	t := metricTable(c.Base.Label, c.New.Label)
	for i := range c.Phases {
		r := &c.Phases[i]
		metricRow(t, r.Mean.Name+" (ms)", &r.Mean)
		metricRow(t, r.P99.Name+" (ms)", &r.P99)
	}
	return []Block{&Heading{Level: 3, Text: "Where the time went"},
		&Para{Text: "Each phase of the window's requests (docs/HTTP.md): its mean and p99 in each run, a side's figure the mean of its runs'. " +
			"dns, connect and tls count only the requests that made a connection."}, t}
}

// made is a connection phase's mean and how many went through it.
func made(s *metrics.Summary) string {
	if s == nil {
		return ""
	}
	return fmt.Sprintf("%s (%s)", num(s.MeanMs), count(s.Count))
}

// phaseOf is phase p's summary of request name ("all requests": the
// totals), or nil.
func phaseOf(ps result.Phases, p, name string) *metrics.Summary {
	t := ps[p]
	switch {
	case t == nil:
		return nil
	case name == "all requests":
		return &t.Totals
	}
	for i := range t.Requests {
		if t.Requests[i].Name == name {
			return &t.Requests[i]
		}
	}
	return nil
}

// unreadNote says what the unread columns are, where there are any.
func unreadNote(ps result.Phases) string {
	if ps[metrics.PhaseNames[metrics.PhaseUnread]] == nil {
		return ""
	}
	return " unread, a part of the wait and receive: how long the response's end waited, arrived in the kernel, for headroom to read it: " +
		"its own delay, not the target's (a busy generator)."
}
