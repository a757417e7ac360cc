package report

import (
	"strings"
	"testing"
)

// TestOpenResultReport: a run of the open model (testdata/runs/open-1,
// 40 arrivals a second) reports its rate, its arrivals (none dropped or
// late) and both latencies, labelled.
func TestOpenResultReport(t *testing.T) {
	md := string(Markdown(ForResult(fixture(t, "open-1"))))
	for _, want := range []string{
		"Open model at 40/s for 4s:", "p99 42.5 ms from the intended start",
		"Arrivals: 160 intended (40/s), 160 started (40.0/s), 0 dropped (0%), 0 late by more than 10 ms",
		"open: arrivals at a rate", "up to 20 (20 set up first), each with its own connection; an arrival with no user free dropped at once",
		"Latency from the intended start", "### Service time", "not used: the rate paces the actions",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}
