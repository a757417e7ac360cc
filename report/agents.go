package report

import (
	"fmt"
	"strings"

	"github.com/headroom-dev/headroom/result"
)

// agentBlocks is the section of a run spread over agents: a line per
// agent, the faults survived and what they kept out of the figures, and
// the agents whose latency departs from the others'.
func agentBlocks(r *result.Result) []Block {
	a := r.Agents
	if a == nil {
		return nil
	}
	text := fmt.Sprintf("The users ran on %d agents; they were there for %s%% of the run's agent-seconds.", len(a.Agents), num(100*a.Coverage))
	if a.DegradedS > 0 {
		var why []string
		if len(a.Faults) > 0 {
			why = append(why, "an agent lost, its users not yet set up again elsewhere")
		}
		if a.LateSeconds > 0 {
			why = append(why, fmt.Sprintf("in %d of them an agent's second came after the coordinator stopped waiting for it "+
				"(a busy agent; its samples were counted with a later second)", a.LateSeconds))
		}
		if len(why) == 0 {
			why = append(why, "an agent lost or late")
		}
		text += fmt.Sprintf(" %s of the timeline were degraded (%s): their %s requests are kept out of every figure above and below.",
			seconds(a.DegradedS), strings.Join(why, "; "), count(r.DegradedTotals.Count))
	}
	blocks := []Block{&Heading{Level: 2, Text: "Agents"}, &Para{Text: text}}
	t := &Table{Header: []string{"agent", "name", "cores", "peak users", "requests", "req/s", "p50 ms", "p99 ms", "CPU %", "RSS MB", "late", "note"},
		Right: []int{0, 2, 3, 4, 5, 6, 7, 8, 9, 10}}
	open := r.Config.Open()
	if open { // the open model: each agent's arrivals, started and dropped
		t.Header = append(t.Header[:4], append([]string{"arrivals", "dropped"}, t.Header[4:]...)...)
		t.Right = []int{0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	}
	for _, ag := range a.Agents {
		note := ""
		switch {
		case ag.Lost != "":
			note = fmt.Sprintf("lost at %s: %s", seconds(ag.LeftS), ag.Lost)
		case ag.Outlier != "":
			note = "slow: " + ag.Outlier
		case ag.JoinedS > 1:
			note = "joined at " + seconds(ag.JoinedS)
		}
		row := []string{fmt.Sprint(ag.Index), ag.Name, fmt.Sprint(ag.Cores), fmt.Sprint(ag.Peak)}
		if open {
			row = append(row, count(ag.Arrivals), count(ag.Dropped))
		}
		t.Rows = append(t.Rows, append(row, count(ag.Requests),
			num(ag.RPS), num(ag.P50Ms), num(ag.P99Ms), num(ag.CPUPct), num(ag.RSSMB), count(ag.Late), note))
	}
	blocks = append(blocks, t)
	if len(a.Faults) > 0 {
		var items []string
		for _, f := range a.Faults {
			item := fmt.Sprintf("%s: agent %d (%s) lost (%s); its %d users moved to %d agents", seconds(f.T), f.Index, f.Name, f.Reason, f.Users, f.To)
			if f.RecoveredT > 0 {
				item += ", all set up again at " + seconds(f.RecoveredT)
			}
			items = append(items, item)
		}
		blocks = append(blocks, &Heading{Level: 3, Text: "Faults"}, &List{Items: items})
	}
	return blocks
}
