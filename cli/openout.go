package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/headroom-dev/headroom/result"
)

// printOpenHead prints the head of an open-model run's summary: what was
// asked, then each request's latency from its arrival's intended start
// (what the schedule's clients saw) and its service time (what the target
// took), labelled so the two are never read for each other.
func printOpenHead(w io.Writer, r *result.Result) {
	fmt.Fprintf(w, "\n%s: %s, %s, measured window %.0fs once the pool was set up\n", r.Kind, r.Status, openModelText(r.Config.Rate), r.Window.Seconds)
	fmt.Fprintln(w, "\nlatency (from intended start): from when the arrival was due to the end of the response, waits for a free user included")
	table(w, "REQUEST", append(r.Requests, r.Totals))
	if sv := r.ServiceTimes; sv != nil {
		fmt.Fprintln(w, "\nservice time: from the request's actual send to the end of the response, what the target took")
		table(w, "REQUEST", append(sv.Requests, sv.Totals))
	}
}

// openModelText is "open model at 100/s (even arrivals), a pool of up to 150
// users (150 set up first)", or a ramp's stages.
func openModelText(rc *result.RateConfig) string {
	if rc == nil {
		return "open model"
	}
	rate := perSecond(rc.PerSecond)
	if len(rc.Stages) != 1 || rc.Stages[0].TargetPerSecond != rc.PerSecond {
		parts := []string{rate}
		for _, st := range rc.Stages {
			parts = append(parts, fmt.Sprintf("%s over %gs", perSecond(st.TargetPerSecond), st.DurationS))
		}
		rate = strings.Join(parts, " → ")
	}
	conns := ""
	if rc.Connections > 0 {
		conns = fmt.Sprintf(", sharing %d connections", rc.Connections)
	}
	return fmt.Sprintf("open model at %s (%s arrivals), a pool of up to %d users (%d set up first)%s", rate, rc.Arrivals, rc.MaxUsers, rc.PreUsers, conns)
}

// printArrivals prints what the schedule asked for and what came of it:
// the rate intended and achieved, the arrivals dropped and late.
func printArrivals(w io.Writer, r *result.Result) {
	if r.Arrivals == nil {
		return
	}
	fmt.Fprintln(w)
	arrivalsTable(w, r.Arrivals)
}

// arrivalsTable is the ARRIVALS table of a (not nil).
func arrivalsTable(w io.Writer, a *result.Arrivals) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "ARRIVALS\tintended/s\tachieved/s\tintended\tstarted\tdropped\tdropped%%\tlate (>%gms)\tlateness p50\tp99\tmax\t\n", a.LateAfterMs)
	fmt.Fprintf(tw, "arrivals\t%.1f\t%.1f\t%d\t%d\t%d\t%.2f\t%d\t%s\t%s\t%s\t\n", a.IntendedRPS, a.StartedRPS, a.Intended, a.Started, a.Dropped, a.DroppedPct, a.Late,
		ms(a.Lateness.P50Ms), ms(a.Lateness.P99Ms), ms(a.Lateness.MaxMs))
	tw.Flush()
	if a.Canceled > 0 {
		fmt.Fprintf(w, "(%d arrivals were waiting for a user when the run stopped: canceled, in no figure above)\n", a.Canceled)
	}
}

// printOmission prints the warning of a closed-model result whose users
// the target held up (coordinated omission), pointing to --rate.
func printOmission(w io.Writer, r *result.Result) {
	if warning := r.Omission.Warning(); warning != "" {
		fmt.Fprintf(w, "\nwarning: %s\n", warning)
	}
}
