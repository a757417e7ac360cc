package cli

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/headroom-dev/headroom/health"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/runner"
)

// ceilingProgress prints a status line each second (in place on a
// terminal, every five seconds otherwise) and every decision on a line of
// its own.
type ceilingProgress struct {
	statusLine
	unit string // result.UnitUsers (zero) or result.UnitRate
}

func newCeilingProgress(env Env) *ceilingProgress {
	return &ceilingProgress{statusLine: newStatusLine(env)}
}

func (p *ceilingProgress) update(t runner.Tick) {
	x := t.Ceiling
	if x == nil {
		return
	}
	if x.Warning != "" {
		p.event("%s warning: %s", clock(t.Elapsed), x.Warning)
	}
	if x.Decision != "" {
		p.event("%s %s", clock(t.Elapsed), x.Decision)
	}
	var b strings.Builder
	if p.unit == result.UnitRate {
		fmt.Fprintf(&b, "%s rate %d/s→%d/s, pool %d", clock(t.Elapsed), x.Applied, t.Want, t.Users)
		if x.Applied == 0 && x.Started > 0 {
			b.WriteString(" (setting up)")
		}
		if t.Last.Dropped > 0 {
			fmt.Fprintf(&b, "  dropped %d", t.Last.Dropped)
		}
	} else {
		fmt.Fprintf(&b, "%s users %d→%d", clock(t.Elapsed), x.Applied, t.Want)
		if x.Started > x.Applied { // some still setting up: not yet load
			fmt.Fprintf(&b, " (%d setting up)", x.Started-x.Applied)
		}
	}
	fmt.Fprintf(&b, "  req/s %.0f%s", t.Last.RPS, connectedLine(t.Last))
	for _, r := range x.Results {
		if r.Inactive {
			continue
		}
		mark := "ok"
		switch {
		case r.Fired:
			mark = "FIRED"
		case r.Unknown:
			mark = "unknown"
		case math.IsNaN(r.Value):
			mark = "no data"
		}
		fmt.Fprintf(&b, " | %s %s/%g %s", short(r.Name), value(r), r.Threshold, mark)
	}
	p.show(b.String(), false)
}

// short abbreviates a check name for the status line:
// "client p99 latency (s)" -> "p99", "server 5xx errors (%)" -> "server 5xx".
func short(name string) string {
	n := strings.TrimPrefix(name, "client ")
	if i := strings.Index(n, " ("); i > 0 {
		n = n[:i]
	}
	for _, w := range []string{" latency", " errors", " utilisation"} {
		n = strings.TrimSuffix(n, w)
	}
	return n
}

func value(r health.Result) string {
	if math.IsNaN(r.Value) {
		return "?"
	}
	return fmt.Sprintf("%.3g", r.Value)
}

// printChecks lists the checks of a run as it starts.
func printChecks(w io.Writer, checks []health.Check) {
	for _, ch := range checks {
		op := ">"
		if ch.Below {
			op = "<"
		}
		when := ""
		if len(ch.Requires) > 0 {
			when = " (once a target exposes " + strings.Join(ch.Requires, " or ") + ")"
		}
		fmt.Fprintf(w, "  %-28s fires when %s %g%s\n", ch.Name, op, ch.Threshold, when)
	}
}
