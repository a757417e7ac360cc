package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/report"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/runner"
)

// statusLine is one live line on stderr: redrawn in place on a terminal,
// printed every five seconds otherwise (logs stay readable).
type statusLine struct {
	w     io.Writer
	tty   bool
	last  time.Time
	width int
}

func newStatusLine(env Env) statusLine {
	return statusLine{w: env.Stderr, tty: env.IsTerminal != nil && env.IsTerminal(env.Stderr)}
}

// show draws line; always prints it off a terminal even within five seconds.
func (s *statusLine) show(line string, always bool) {
	if s.tty {
		fmt.Fprintf(s.w, "\r%s%s", line, strings.Repeat(" ", max(0, s.width-len(line))))
		s.width = len(line)
		return
	}
	if always || time.Since(s.last) >= 5*time.Second {
		fmt.Fprintln(s.w, line)
		s.last = time.Now()
	}
}

// clear blanks the line on a terminal, before a line of its own.
func (s *statusLine) clear() {
	if s.tty && s.width > 0 {
		fmt.Fprintf(s.w, "\r%s\r", strings.Repeat(" ", s.width))
		s.width = 0
	}
}

// progress is a bounded run's live line.
type progress struct {
	statusLine
	open bool // a run of the open model: arrivals, not users
}

func newProgress(env Env) *progress { return &progress{statusLine: newStatusLine(env)} }

func (p *progress) update(x runner.Progress) {
	if p.open {
		p.updateOpen(x)
		return
	}
	errPct := 0.0
	if x.Requests > 0 {
		errPct = 100 * float64(x.Errors) / float64(x.Requests)
	}
	phase := x.Phase
	if phase == "setup" {
		phase = "waiting for setup"
	}
	line := fmt.Sprintf("%s %s/%s  users %d/%d (%d set up)  req/s %.0f  p50 %s  p99 %s  errors %.2f%%  timeouts %d",
		phase, clock(x.Elapsed), clock(x.Total), x.Users, x.Want, x.Ready, x.Last.RPS, ms(x.Last.P50Ms), ms(x.Last.P99Ms), errPct, x.Timeouts)
	line += connectedLine(x.Last)
	if n := x.Last.SetupErrors; n > 0 {
		line += fmt.Sprintf("  setup errors %d/s", n)
	}
	if x.Phase == "stopping" {
		line = fmt.Sprintf("stopping: letting %d users finish their actions...", x.Users)
	}
	p.show(line, x.Phase == "stopping")
}

// updateOpen is the line of a run of the open model: the arrivals the
// schedule asked for and those that started, dropped and late, and the
// latency from the intended start.
func (p *progress) updateOpen(x runner.Progress) {
	var line string
	switch x.Phase {
	case "stopping":
		line = fmt.Sprintf("stopping: letting %d users finish their actions...", x.Users)
	case "steady":
		errPct := 0.0
		if x.Requests > 0 {
			errPct = 100 * float64(x.Errors) / float64(x.Requests)
		}
		line = fmt.Sprintf("open %s/%s  arrivals/s %.0f of %.0f  dropped %d  late %d  pool %d users  p50 %s  p99 %s (from intended start)  errors %.2f%%  timeouts %d",
			clock(x.Elapsed), clock(x.Total), x.Started, x.Rate, x.Dropped, x.Late, x.Users, ms(x.Last.P50Ms), ms(x.Last.P99Ms), errPct, x.Timeouts)
		line += connectedLine(x.Last)
	default:
		line = fmt.Sprintf("setting up the pool %s  users %d/%d set up", clock(x.Elapsed), x.Ready, x.Want)
		if n := x.Last.SetupErrors; n > 0 {
			line += fmt.Sprintf("  setup errors %d/s", n)
		}
	}
	p.show(line, x.Phase == "stopping")
}

func (p *progress) done() {
	if p.tty {
		fmt.Fprintln(p.w)
	}
}

func clock(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%02d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

func ms(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v < 10:
		return fmt.Sprintf("%.2fms", v)
	case v < 1000:
		return fmt.Sprintf("%.1fms", v)
	}
	return fmt.Sprintf("%.2fs", v/1000)
}

// printSummary prints the per-request and per-action tables of a result.
func printSummary(w io.Writer, r *result.Result) {
	if r.Config.Open() {
		printOpenHead(w, r)
	} else {
		fmt.Fprintf(w, "\n%s: %s, %d users, measured window %.0fs once set up, after a %.0fs ramp\n",
			r.Kind, r.Status, r.Config.Users, r.Window.Seconds, r.Config.RampS)
		table(w, "REQUEST", append(r.Requests, r.Totals))
	}
	if n := r.StoppingTotals.Count; n > 0 {
		fmt.Fprintf(w, "(%d more requests ended while users stopped, after the window: in stopping_totals, in no figure above)\n", n)
	}
	fmt.Fprintln(w)
	if r.Config.Open() {
		fmt.Fprintln(w, "actions: latency from intended start (a WebSocket message's handler, as it ran)")
	}
	table(w, "ACTION", r.Actions)
	printArrivals(w, r)
	printConnected(w, r.Connected)
	printSetup(w, r.Setup)
	if len(r.Config.UserTypes) > 0 {
		fmt.Fprintf(w, "users by type: %s\n", usersByType(r))
	}
	g := r.Generator
	fmt.Fprintf(w, "\ngenerator: CPU %.0f%% of one core (%d cores), peak RSS %.0f MB, %d late wake-ups\n",
		g.CPUPercent, g.GOMAXPROCS, g.PeakRSSMB, g.LateWakeups)
	if line := result.ScheduleLine(g.Lateness, g.Burstiness); line != "" {
		fmt.Fprintf(w, "  its schedule: %s\n", line)
	}
	printAgents(w, r)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	printOmission(w, r)
	errs := topMessages(r)
	if len(errs) > 0 {
		fmt.Fprintln(w, "\nerrors:")
		for _, e := range errs {
			fmt.Fprintf(w, "  %6d  %s\n", e.n, e.msg)
		}
	}
}

// printSetup prints what users' setups did, apart from every table above.
func printSetup(w io.Writer, st *result.Setup) {
	if st == nil {
		return
	}
	fmt.Fprintf(w, "\nsetup (in no figure above): %d of %d users set up; %d attempts, %d failed; time to set up a user p50 %s  p95 %s  p99 %s  max %s\n",
		st.Users, st.Started, st.Attempts.Count, st.Attempts.Errors+st.Attempts.Timeouts,
		ms(st.TimeToSetUp.P50Ms), ms(st.TimeToSetUp.P95Ms), ms(st.TimeToSetUp.P99Ms), ms(st.TimeToSetUp.MaxMs))
	if len(st.Requests) > 0 {
		table(w, "SETUP REQUEST", append(st.Requests, st.Totals))
	}
}

// usersByType is "reader 9, poster 1": the users the run started of each
// type, in the scenario's order.
func usersByType(r *result.Result) string {
	var parts []string
	for _, t := range r.Config.UserTypes {
		parts = append(parts, fmt.Sprintf("%s %d", t.Name, r.UsersByType[t.Name]))
	}
	return strings.Join(parts, ", ")
}

func table(w io.Writer, head string, rows []metrics.Summary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	noReq := newNoRequestColumn(rows)
	fmt.Fprintf(tw, "%s\tcount\treq/s\terr%%\ttimeouts\tmean\tp50\tp90\tp95\tp99\tmax\t%s\n", head, noReq.head())
	for _, s := range rows {
		errPct := 0.0
		if s.Count > 0 {
			errPct = 100 * float64(s.Errors) / float64(s.Count)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.2f\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Count, s.RPS, errPct, s.Timeouts,
			ms(s.MeanMs), ms(s.P50Ms), ms(s.P90Ms), ms(s.P95Ms), ms(s.P99Ms), ms(s.MaxMs), noReq.cell(s))
	}
	tw.Flush()
	noReq.note(w)
}

// noRequestColumn is whether an action table has a "no req" column: only
// when one of its actions sent no request at least once.
type noRequestColumn bool

func newNoRequestColumn(rows []metrics.Summary) noRequestColumn {
	for _, s := range rows {
		if s.NoRequest > 0 {
			return true
		}
	}
	return false
}

func (c noRequestColumn) head() string {
	if !c {
		return ""
	}
	return "no req\t"
}

func (c noRequestColumn) cell(s metrics.Summary) string {
	if !c {
		return ""
	}
	return fmt.Sprintf("%d\t", s.NoRequest)
}

// note explains the column under the table.
func (c noRequestColumn) note(w io.Writer) {
	if c {
		fmt.Fprintln(w, strings.Replace(report.NoRequestNote, "no request:", "no req:", 1))
	}
}

type message struct {
	msg string
	n   int64
}

func topMessages(r *result.Result) []message {
	var out []message
	actions := r.Actions
	if r.Setup != nil {
		actions = append(slices.Clip(actions), r.Setup.Attempts)
	}
	for _, s := range actions {
		for m, n := range s.Messages {
			out = append(out, message{s.Name + ": " + m, n})
		}
	}
	// largest first, at most 10
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].n > out[j-1].n; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	if len(out) > 10 {
		out = out[:10]
	}
	return out
}
