package cli

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

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

func (p *ceilingProgress) update(x runner.CeilingProgress) {
	if x.Decision != "" || x.Warning != "" {
		p.clear()
	}
	if x.Warning != "" {
		fmt.Fprintf(p.w, "%s warning: %s\n", clock(x.Elapsed), x.Warning)
	}
	if x.Decision != "" {
		fmt.Fprintf(p.w, "%s %s\n", clock(x.Elapsed), x.Decision)
	}
	var b strings.Builder
	if p.unit == result.UnitRate {
		fmt.Fprintf(&b, "%s rate %d/s→%d/s, pool %d", clock(x.Elapsed), x.Users, x.Target, x.Pool)
		if x.Users == 0 && x.Started > 0 {
			b.WriteString(" (setting up)")
		}
		if x.Last.Dropped > 0 {
			fmt.Fprintf(&b, "  dropped %d", x.Last.Dropped)
		}
	} else {
		fmt.Fprintf(&b, "%s users %d→%d", clock(x.Elapsed), x.Users, x.Target)
		if x.Started > x.Users { // some still setting up: not yet load
			fmt.Fprintf(&b, " (%d setting up)", x.Started-x.Users)
		}
	}
	fmt.Fprintf(&b, "  req/s %.0f%s", x.Last.RPS, connectedLine(x.Last))
	for _, r := range x.Results {
		if r.Inactive {
			continue
		}
		mark := "ok"
		if r.Fired {
			mark = "FIRED"
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

// printSupported prints the answer, its interval and whether it can be
// trusted; it returns what the answer is called.
func printSupported(w io.Writer, c *result.Ceiling) (what string) {
	su := c.SupportedUsers
	unit := c.UnitName()
	what, per := "supported users", ""
	if unit == result.UnitRate {
		what, per = "supported arrival rate", "/s"
	}
	fmt.Fprintln(w)
	took := time.Duration(c.SearchSeconds * float64(time.Second)).Round(time.Second)
	switch {
	case su.Found && strings.HasPrefix(su.Method, "search"):
		high := fmt.Sprintf("%.0f", su.High)
		if su.High == 0 {
			high = "?" // no decided unhealthy level bounds it
		}
		fmt.Fprintf(w, "%s: %.0f%s  (the ceiling lies in [%.0f, %s); %s), found in %v\n", what, su.Value, per, su.Low, high, su.Method, took)
		if su.Why != "" {
			fmt.Fprintf(w, "  %s\n", su.Why)
		}
	case su.Found:
		fmt.Fprintf(w, "%s: %.0f%s  (5-95%% band %.0f..%.0f; %s), found in %v\n", what, su.Value, per, su.Low, su.High, su.Method, took)
	default:
		fmt.Fprintf(w, "%s: NOT FOUND after %v: %s\n", what, took, su.Why)
		if su.Low > 0 {
			fmt.Fprintf(w, "  highest healthy level seen: %s\n", result.Amount(su.Low, unit))
		}
	}
	if !c.Trustworthy {
		fmt.Fprintf(w, "NOT TRUSTWORTHY: %s\n", c.Untrusted)
	}
	fmt.Fprintf(w, "throughput at %s: %.1f req/s\n", result.Amount(math.Round(su.Value), unit), c.ThroughputRPS)
	return what
}

// printBottleneck prints which checks fired, and which never could.
func printBottleneck(w io.Writer, c *result.Ceiling) {
	fmt.Fprintln(w, "bottleneck:")
	any := false
	bs := append([]result.Bottleneck(nil), c.Bottleneck...)
	sort.SliceStable(bs, func(i, j int) bool { return bs[i].Fired > bs[j].Fired })
	for _, b := range bs {
		if b.Fired == 0 {
			continue
		}
		any = true
		first := ""
		if b.First {
			first = ", fired first"
		}
		failed := ""
		if b.Failed > 0 {
			failed = fmt.Sprintf(" (%d could not be evaluated: %s)", b.Failed, b.LastError)
		}
		if b.Inactive > 0 {
			failed += fmt.Sprintf(" (inactive in %d more)", b.Inactive)
		}
		fmt.Fprintf(w, "  %-28s fired in %d of %d evaluations%s, first at %s%s\n", b.Check, b.Fired, b.Evaluations-b.Inactive, first,
			clock(time.Duration(b.FirstAt*float64(time.Second))), failed)
	}
	if !any {
		fmt.Fprintln(w, "  no check fired")
	}
	for i, b := range c.Bottleneck {
		if !c.NoSource(i) {
			continue
		}
		needs := ""
		if i < len(c.Checks) && len(c.Checks[i].Requires) > 0 {
			needs = ": no scraped target exposed " + strings.Join(c.Checks[i].Requires, " or ")
		}
		fmt.Fprintf(w, "  %-28s inactive, never evaluated%s\n", b.Check, needs)
	}
}

// printLevels prints the levels tried, in order, with their verdicts.
func printLevels(w io.Writer, c *result.Ceiling) {
	per := ""
	if c.UnitName() == result.UnitRate {
		per = "/s"
	}
	if len(c.Levels) > 0 {
		var parts []string
		untrue := false
		for _, l := range c.Levels {
			mark := "ok"
			if l.Verdict == "unhealthy" {
				mark = "X"
			}
			switch {
			case l.Hold:
				mark += " (hold)"
			case l.Undecided:
				mark += "?"
			}
			if l.Evaluations == 0 && l.Why != "" {
				mark += " (setup)"
			}
			if l.KeptOut > 0 {
				mark += fmt.Sprintf(" (%d kept out)", l.KeptOut)
				untrue = true
			}
			parts = append(parts, fmt.Sprintf("%d%s %s", l.Users, per, mark))
		}
		fmt.Fprintf(w, "levels: %s\n", strings.Join(parts, ", "))
		fmt.Fprintln(w, "        (X unhealthy, ? undecided at the confidence asked: the interval is widened past it; (setup) could not set its users up)")
		if untrue {
			fmt.Fprintln(w, "        (N kept out: evaluations that fired while the generator's starts were late or bunched, not blamed on the target)")
		}
	}
}

// printCeiling prints the answer of a ceiling run: supported users, the
// interval, the bottleneck, the levels, and the table at the ceiling.
func printCeiling(w io.Writer, r *result.Result) {
	c := r.Ceiling
	what := printSupported(w, c)
	printBottleneck(w, c)
	printLevels(w, c)
	fmt.Fprintf(w, "\nat the %s (%s):\n", what, c.StatsWindow)
	if sv := r.ServiceTimes; sv != nil {
		fmt.Fprintln(w, "latency (from intended start): from when the arrival was due to the end of the response")
		table(w, "REQUEST", append(r.Requests, r.Totals))
		fmt.Fprintln(w, "service time: from the request's actual send to the end of the response")
		table(w, "REQUEST", append(sv.Requests, sv.Totals))
	} else {
		table(w, "REQUEST", append(r.Requests, r.Totals))
	}
	if r.Arrivals != nil {
		arrivalsTable(w, r.Arrivals)
	}
	printConnected(w, r.Connected)
	printAgents(w, r)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	printOmission(w, r)
}
