package report

import (
	"fmt"
	"strings"

	"github.com/headroom-dev/headroom/analysis"
	"github.com/headroom-dev/headroom/result"
)

// The open model's parts of a run's report (docs/OPEN.md): the rate in
// the headline and the setup, the arrivals dropped and late, and the
// service times beside the latencies from the intended start.

// openHeadline is the headline of a run of the open model.
func openHeadline(r *result.Result) string {
	s := fmt.Sprintf("Open model at %s for %s: %s requests/s, mean %s ms, p99 %s ms from the intended start, errors %s.",
		rateText(r.Config.Rate), seconds(r.Window.Seconds), num(r.Totals.RPS), num(r.Totals.MeanMs), num(r.Totals.P99Ms), errPct(r.Totals))
	if a := r.Arrivals; a != nil {
		s += " " + arrivalsText(a)
	}
	return s
}

// arrivalsText is what came of the schedule's arrivals, in a sentence.
func arrivalsText(a *result.Arrivals) string {
	return fmt.Sprintf("Arrivals: %s intended (%s/s), %s started (%s/s), %s dropped (%s%%), %s late by more than %s ms (lateness p99 %s ms, max %s ms).",
		count(a.Intended), num(a.IntendedRPS), count(a.Started), num(a.StartedRPS), count(a.Dropped), num(a.DroppedPct),
		count(a.Late), num(a.LateAfterMs), num(a.Lateness.P99Ms), num(a.Lateness.MaxMs))
}

// rateText is "100/s", or a ramp's stages: "0/s → 100/s over 30 s → ...".
func rateText(rc *result.RateConfig) string {
	if rc == nil {
		return "a rate"
	}
	rate := num(rc.PerSecond) + "/s"
	if len(rc.Stages) == 1 && rc.Stages[0].TargetPerSecond == rc.PerSecond {
		return rate
	}
	parts := []string{rate}
	for _, st := range rc.Stages {
		parts = append(parts, fmt.Sprintf("%s/s over %s", num(st.TargetPerSecond), seconds(st.DurationS)))
	}
	return strings.Join(parts, " → ")
}

// openRows are the setup table's rows of a run of the open model.
func openRows(c result.Config, row func(k, v string)) {
	row("model", "open: arrivals at a rate, each one action on a free user of a pool")
	if rc := c.Rate; rc != nil {
		row("rate / duration", fmt.Sprintf("%s (%s arrivals) / %s", rateText(rc), rc.Arrivals, seconds(c.DurationS)))
		row("pool of users", poolText(rc))
	}
}

// poolText is the pool in words: "up to 100 (100 set up first); an
// arrival with no user free dropped at once".
func poolText(rc *result.RateConfig) string {
	wait := "dropped at once"
	if rc.MaxWaitS > 0 {
		wait = "waits up to " + seconds(rc.MaxWaitS)
	}
	conns := "each with its own connection"
	if rc.Connections > 0 {
		conns = fmt.Sprintf("sharing %d connections", rc.Connections)
	}
	return fmt.Sprintf("up to %d (%d set up first), %s; an arrival with no user free %s", rc.MaxUsers, rc.PreUsers, conns, wait)
}

// poolRows are the setup table's rows of a step or ceiling run of the
// open model: its levels are rates, on one pool.
func poolRows(c result.Config, row func(k, v string)) {
	row("model", "open: each level an arrival rate, each arrival one action on a free user of a pool")
	if rc := c.Rate; rc != nil {
		row("arrivals", rc.Arrivals)
		row("pool of users", poolText(rc))
	}
}

// openBlocks are the service times and the arrivals of a run of the open
// model; none for the closed model.
func openBlocks(r *result.Result) []Block {
	var out []Block
	if sv := r.ServiceTimes; sv != nil {
		out = append(out, &Heading{Level: 3, Text: "Service time"},
			&Para{Text: "The same requests timed from their actual send to the end of the response: what the target took, without the wait for a free user or a late start."},
			summaryTable("request", append(sv.Requests, sv.Totals)))
	}
	if a := r.Arrivals; a != nil {
		out = append(out, &Heading{Level: 3, Text: "Arrivals"}, &Para{Text: arrivalsText(a)})
	}
	return out
}

// omissionBlocks warn when a closed-model run's users were held up by the
// target (coordinated omission): at the run's figures, or at each step
// level where it happened.
func omissionBlocks(r *result.Result) []Block {
	var items []string
	if w := analysis.OmissionWarning(r.Omission); w != "" {
		items = append(items, strings.ToUpper(w[:1])+w[1:]+".")
	}
	if r.Step != nil {
		for _, l := range r.Step.Levels {
			if w := analysis.OmissionWarning(l.Omission); w != "" {
				items = append(items, fmt.Sprintf("At %s, %s.", result.Amount(float64(l.Users), r.Step.Unit), w))
			}
		}
	}
	if len(items) == 0 {
		return nil
	}
	return []Block{&Heading{Level: 2, Text: "Warning: coordinated omission"}, &List{Items: items}}
}
