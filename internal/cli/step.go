package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/runner"
)

var stepHelp = `
Runs a step load: each of --levels users in turn, each held for --hold.
A level starts by adding users (at most --ramp-rate a second); once every
one of them has finished setup (logged in), the level settles for --settle,
then its held window begins. Setup and settling count in no figure.

At the end: one table per level (per request name and per action: req/s,
mean, median, p95, p99, errors and timeouts), the levels side by side, and
the knee: the first level past which throughput (successful req/s) grew
less than half as fast as the users while p95 or mean latency rose more than
20% (or errors and timeouts by more than 1 point). Or that there was none.

Live progress goes to stderr, a line per finished level too; the tables to
stdout, and everything to --out (result.json and each level's exact
histograms in histograms.json). Ctrl-C stops the run and still writes the
levels held so far.

Examples:
  headroom step examples/chat.star --target http://127.0.0.1:8065 --levels 48,96,162,240,336 --hold 60s --out runs/step-new
  headroom step my.star --target http://127.0.0.1:8080 --levels 10,20,40,80 --hold 2m --settle 30s --scrape http://127.0.0.1:8080/metrics

The knee or its absence is a finding: exit 0 either way.

` + exitCodes("step", `, or a level whose
     users never all finished setup (--setup-timeout)`)

type stepFlags struct {
	loadFlags
	levels                     string
	hold, settle, setupTimeout time.Duration
	rampRate                   float64
}

func stepCmd(ctx context.Context, env Env, args []string) int {
	var f stepFlags
	fs := newFlags(env, "step", "SCENARIO.star --target URL --levels N,N,... [flags]", stepHelp)
	f.register(fs)
	fs.StringVar(&f.levels, "levels", "", "user counts to hold in turn, increasing, e.g. 48,96,162,240,336 (required)")
	fs.DurationVar(&f.hold, "hold", time.Minute, "how long each level is held after settling: its measured window")
	fs.DurationVar(&f.settle, "settle", 0, "time a level runs, once every user is set up, before it is measured (default: 10s, or a quarter of --hold if shorter)")
	numberVar(fs, &f.rampRate, "ramp-rate", 50, 0, 1e6, false, "0 (all at once) or a number of users per second, e.g. 50", "users added per second at most when a level starts (0: all at once)")
	fs.DurationVar(&f.setupTimeout, "setup-timeout", time.Minute, "stop if a level's users have not all finished setup this long after the last one started")
	path, target, code, ok := f.start(env, fs, "step", args)
	if !ok {
		return code
	}
	levels, err := parseLevels(f.levels)
	if err != nil {
		return fail(env, ExitUsage, "--levels: %v", err)
	}
	settleSet := false
	fs.Visit(func(fl *flag.Flag) { settleSet = settleSet || fl.Name == "settle" })
	if !settleSet {
		f.settle = min(10*time.Second, f.hold/4)
	}
	switch {
	case f.hold <= 0:
		return fail(env, ExitUsage, "--hold must be positive, e.g. --hold 60s")
	case f.settle < 0:
		return fail(env, ExitUsage, "--settle must be 0 or more")
	case f.setupTimeout <= 0:
		return fail(env, ExitUsage, "--setup-timeout must be positive")
	}
	top := levels[len(levels)-1]
	sc, out, code, ok := f.prepare(ctx, env, path, target, top, fmt.Sprintf("--levels up to %d users", top))
	if !ok {
		return code
	}
	st := &runner.Step{Common: f.common(env, "step", args, sc, target, out.path), Levels: levels, Hold: f.hold, Settle: f.settle,
		RampRate: f.rampRate, SetupTimeout: f.setupTimeout}
	closeFleet, code, ok := f.attachFleet(ctx, env, sc, &st.Common, target)
	if !ok {
		out.release()
		return code
	}
	defer closeFleet()
	stop, err := f.serveMetrics(env, &st.Common)
	if err != nil {
		out.release()
		return fail(env, ExitUsage, "%v", err)
	}
	defer stop()
	pr := newStepProgress(env, levels, f.quiet)
	st.Progress = pr.update
	fmt.Fprintf(env.Stderr, "stepping %s against %s: %s users, each held %v after %v settling, seed %d\n",
		sc.Path, target.Redacted(), joinInts(levels), f.hold, f.settle, f.seed)
	res, err := st.Run(ctx)
	pr.done()
	return finish(env, out, res, err, f.noReport, printStep)
}

// parseLevels reads "48,96,162" and checks the levels increase.
func parseLevels(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("required: the user counts to hold in turn, e.g. --levels 48,96,162,240")
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number of users; write e.g. --levels 48,96,162,240", strings.TrimSpace(part))
		}
		out = append(out, n)
	}
	return out, runner.CheckLevels(out)
}

func joinInts(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ", ")
}

// stepProgress prints a status line each second (in place on a terminal,
// every five seconds otherwise) and a line of its own per finished level.
type stepProgress struct {
	statusLine
	quiet  bool
	levels []int
}

func newStepProgress(env Env, levels []int, quiet bool) *stepProgress {
	return &stepProgress{statusLine: newStatusLine(env), quiet: quiet, levels: levels}
}

func (p *stepProgress) update(x runner.StepProgress) {
	if x.Done != nil {
		p.clear()
		l := x.Done
		fmt.Fprintf(p.w, "%s level %d/%d done: %d users, %.1f req/s, mean %s, p95 %s, p99 %s, errors %.2f%%, timeouts %d\n",
			clock(x.Elapsed), levelIndex(p.levels, l.Users)+1, len(p.levels), l.Users, l.Totals.RPS,
			ms(l.Totals.MeanMs), ms(l.Totals.P95Ms), ms(l.Totals.P99Ms), failedPct(l.Totals), l.Totals.Timeouts)
	}
	if p.quiet {
		return
	}
	var what string
	switch x.Phase {
	case runner.PhaseStarting:
		what = fmt.Sprintf("starting, %d/%d users set up", x.Ready, x.Want)
	case runner.PhaseSettling:
		what = fmt.Sprintf("settling, %s left", clock(x.Left))
	case runner.PhaseHolding:
		what = fmt.Sprintf("holding, %s left", clock(x.Left))
	case runner.PhaseStopping:
		p.clear()
		fmt.Fprintf(p.w, "stopping: letting %d users finish their actions...\n", x.Users)
		return
	}
	line := fmt.Sprintf("%s level %d/%d, %d users: %s | req/s %.0f  p50 %s  p95 %s  errors %d  timeouts %d%s",
		clock(x.Elapsed), x.Level+1, len(p.levels), x.Want, what, x.Last.RPS, ms(x.Last.P50Ms), ms(x.Last.P95Ms), x.Last.Errors, x.Last.Timeouts, connectedLine(x.Last))
	p.show(line, false)
}

func (p *stepProgress) done() { p.clear() }

func levelIndex(levels []int, users int) int {
	for i, n := range levels {
		if n == users {
			return i
		}
	}
	return -1
}

// printStep prints a step result: one table per level, the levels side
// by side, the knee in words.
func printStep(w io.Writer, r *result.Result) {
	s := r.Step
	fmt.Fprintf(w, "\nstep: %s, %d of %d levels held %s each after %s settling; setup and settling are in no figure\n",
		r.Status, len(s.Levels), len(s.Planned), secs(s.HoldS), secs(s.SettleS))
	for _, l := range s.Levels {
		cut := ""
		if !l.Complete {
			cut = ", cut short"
		}
		fmt.Fprintf(w, "\n%d users (held %s from %s%s):\n", l.Users, secs(l.Window.Seconds), clock(time.Duration(l.Window.Start*float64(time.Second))), cut)
		stepTable(w, "REQUEST", append(l.Requests, l.Totals))
		stepTable(w, "ACTION", l.Actions)
		printConnected(w, l.Connected)
	}
	if len(s.Levels) > 0 {
		fmt.Fprintln(w, "\nlevels (all requests):")
		levelTable(w, r)
	}
	fmt.Fprintf(w, "\n%s\n", s.Knee.Summary)
	printAgents(w, r)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, l := range s.Levels {
		if warning := l.Omission.Warning(); warning != "" {
			fmt.Fprintf(w, "\nwarning: at %d users, %s\n", l.Users, warning)
		}
	}
}

func stepTable(w io.Writer, head string, rows []metrics.Summary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	noReq := newNoRequestColumn(rows)
	fmt.Fprintf(tw, "%s\tcount\treq/s\terrors\terr%%\ttimeouts\tmean\tp50\tp95\tp99\t%s\n", head, noReq.head())
	for _, s := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%d\t%.2f\t%d\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Count, s.RPS, s.Errors, failedPct(s), s.Timeouts,
			ms(s.MeanMs), ms(s.P50Ms), ms(s.P95Ms), ms(s.P99Ms), noReq.cell(s))
	}
	tw.Flush()
	noReq.note(w)
}

// levelTable has a row per level; with --scrape, a column of server CPU
// (cores, mean over the held window) per scraped endpoint.
func levelTable(w io.Writer, r *result.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "users\treq/s\terrors\terr%\ttimeouts\tmean\tp50\tp95\tp99")
	if r.Server != nil {
		for _, t := range r.Server.Targets {
			fmt.Fprintf(tw, "\tcpu %s", t.Instance)
		}
	}
	fmt.Fprint(tw, "\t\n")
	for _, l := range r.Step.Levels {
		t := l.Totals
		fmt.Fprintf(tw, "%d\t%.1f\t%d\t%.2f\t%d\t%s\t%s\t%s\t%s", l.Users, t.RPS, t.Errors, failedPct(t), t.Timeouts, ms(t.MeanMs), ms(t.P50Ms), ms(t.P95Ms), ms(t.P99Ms))
		for _, sw := range l.Server {
			fmt.Fprintf(tw, "\t%.2f", sw.CPUCoresMean)
		}
		fmt.Fprint(tw, "\t\n")
	}
	tw.Flush()
}

func secs(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(100 * time.Millisecond).String()
}

// failedPct is the share of requests that failed (timeouts apart), in percent.
func failedPct(s metrics.Summary) float64 {
	if s.Count == 0 {
		return 0
	}
	return 100 * float64(s.Errors) / float64(s.Count)
}
