package report

import (
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// A run on agents has a section of its agents: a row each, the lost one
// and the slow one said so, the faults, and the degraded seconds counted.
func TestAgentsAreShown(t *testing.T) {
	r := fixture(t, "base-1")
	if md := string(Markdown(ForResult(r))); strings.Contains(md, "## Agents") {
		t.Error("a run in one process shows an agents section")
	}
	r.Agents = &result.Agents{DegradedS: 2, Coverage: 0.9, Agents: []result.Agent{
		{Index: 0, Name: "pod-0", Cores: 4, Peak: 1000, Requests: 12000, RPS: 200, P50Ms: 12, P99Ms: 80},
		{Index: 1, Name: "pod-1", Cores: 4, Peak: 500, Requests: 3000, RPS: 100, LeftS: 30, Lost: "its connection closed"},
		{Index: 2, Name: "pod-2", Cores: 4, Peak: 1000, Requests: 12000, RPS: 200, P50Ms: 40, Outlier: "median latency 40.0 ms against 12.0 ms"},
	}, Faults: []result.Fault{{T: 30, Index: 1, Name: "pod-1", Reason: "its connection closed", Users: 500, To: 2, RecoveredT: 32}}}
	r.DegradedTotals = metrics.Summary{Count: 1234}
	md := string(Markdown(ForResult(r)))
	mustContain(t, md, "## Agents")
	mustContain(t, md, "2s of the timeline were degraded")
	mustContain(t, md, "1,234 requests are kept out")
	rows := rowsByFirstCell(md)
	if got := strings.Join(rows["1"], "|"); !strings.Contains(got, "pod-1") || !strings.Contains(got, "lost at 30s: its connection closed") {
		t.Errorf("the lost agent's row: %s", got)
	}
	if got := strings.Join(rows["2"], "|"); !strings.Contains(got, "slow: median latency 40.0 ms") {
		t.Errorf("the slow agent's row: %s", got)
	}
	mustContain(t, md, "agent 1 (pod-1) lost (its connection closed); its 500 users moved to 2 agents, all set up again at 32s")
	mustContain(t, md, "degraded (an agent lost, its users not yet set up again elsewhere)")

	// No agent lost, but one busy: its seconds came late, and the report says so, not "lost".
	r.Agents.Faults, r.Agents.LateSeconds = nil, 2
	md = string(Markdown(ForResult(r)))
	mustContain(t, md, "2s of the timeline were degraded (in 2 of them an agent's second came after the coordinator stopped waiting for it")
	if strings.Contains(md, "an agent lost") {
		t.Error("late seconds are told as a lost agent")
	}
}
