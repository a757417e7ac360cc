package cli

import (
	"context"
	"flag"
	"fmt"
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

The open model (--rates, docs/OPEN.md): each level is an arrival rate
instead of a user count, held as run --rate holds one, on one pool of users
(--max-users, default the top rate × 1 s, all set up before the first level).
Latencies count from each arrival's intended start, service times beside
them; arrivals that find no user free are dropped and counted per level.

Examples:
  headroom step examples/chat.star --target http://127.0.0.1:8065 --levels 48,96,162,240,336 --hold 60s --out runs/step-new
  headroom step examples/api.star --target http://127.0.0.1:8065 --rates 100,200,400,800 --hold 60s
  headroom step my.star --target http://127.0.0.1:8080 --levels 10,20,40,80 --hold 2m --settle 30s --scrape http://127.0.0.1:8080/metrics

The knee or its absence is a finding: exit 0 either way.

` + exitCodes("step", `, or a level whose
     users never all finished setup (--setup-timeout)`)

type stepFlags struct {
	loadFlags
	levels, rates              string
	maxUsers                   int
	pool                       poolFlags
	hold, settle, setupTimeout time.Duration
	rampRate                   float64
}

// levelsOf is what the step holds: user counts (--levels), or arrival
// rates on one pool of users (--rates, the open model).
func (f *stepFlags) levelsOf(set map[string]bool) (levels []int, open *runner.OpenLevels, err error) {
	switch {
	case f.rates != "" && f.levels != "":
		return nil, nil, fmt.Errorf("--levels are user counts (the closed model) and --rates arrival rates (the open model): give one of them")
	case f.rates != "":
		if set["ramp-rate"] {
			return nil, nil, fmt.Errorf("--ramp-rate is the closed model's: with --rates a level's rate starts at once, on a pool of users set up before the first level")
		}
		if levels, err = parseRates(f.rates); err != nil {
			return nil, nil, fmt.Errorf("--rates: %v", err)
		}
		maxUsers := f.maxUsers
		if !set["max-users"] {
			maxUsers = runner.DefaultMaxUsers(float64(levels[len(levels)-1]))
		}
		open, err = f.pool.levels(set, maxUsers, maxUsers)
		return levels, open, err
	}
	if err := f.pool.refuseClosed(set, "--rates", "max-users"); err != nil {
		return nil, nil, err
	}
	if levels, err = parseLevels(f.levels); err != nil {
		return nil, nil, fmt.Errorf("--levels: %v", err)
	}
	return levels, nil, nil
}

// times checks --hold, --settle and --setup-timeout, --settle defaulting
// to the runner's rule for the hold.
func (f *stepFlags) times(set map[string]bool) error {
	if !set["settle"] {
		f.settle = runner.DefaultStepSettle(f.hold)
	}
	switch {
	case f.hold <= 0:
		return fmt.Errorf("--hold must be positive, e.g. --hold 60s")
	case f.settle < 0:
		return fmt.Errorf("--settle must be 0 or more")
	case f.setupTimeout <= 0:
		return fmt.Errorf("--setup-timeout must be positive")
	}
	return nil
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
	fs.StringVar(&f.rates, "rates", "", "the open model: arrival rates to hold in turn instead of --levels, whole arrivals per second, increasing, e.g. 100,200,400,800 (docs/OPEN.md)")
	fs.IntVar(&f.maxUsers, "max-users", 0, "with --rates: the most users the pool may hold (default: the top rate × 1 s, at least 10)")
	f.pool.register(fs, "--rates", "(default: --max-users, so no setup runs in a level)")
	path, target, code, ok := f.start(env, fs, "step", args)
	if !ok {
		return code
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	levels, open, err := f.levelsOf(set)
	if err == nil {
		err = f.times(set)
	}
	if err != nil {
		return fail(env, ExitUsage, "%v", err)
	}
	top := levels[len(levels)-1]
	users, what := top, fmt.Sprintf("--levels up to %d users", top)
	if open != nil {
		users, what = open.MaxUsers, fmt.Sprintf("--max-users %d", open.MaxUsers)
	}
	sc, out, code, ok := f.prepare(ctx, env, path, target, users, what)
	if !ok {
		return code
	}
	st := &runner.Step{Common: f.common(env, "step", args, sc, target, out.path), Levels: levels, Hold: f.hold, Settle: f.settle,
		RampRate: f.rampRate, SetupTimeout: f.setupTimeout, Open: open}
	l, code, ok := f.launch(ctx, env, "step", sc, &st.Common, target, out)
	if !ok {
		return code
	}
	defer l.stop()
	pr := newStepProgress(env, levels, f.quiet)
	l.ui.watch(&pr.statusLine, &st.Common, pr.update)
	if open != nil {
		pr.unit = result.UnitRate
		fmt.Fprintf(env.Stderr, "stepping %s against %s: %s arrivals/s, each held %v after %v settling; open model, %s; seed %d\n",
			sc.Path, target.Redacted(), joinInts(levels), f.hold, f.settle, describePool(open.Arrivals, open.MaxUsers, open.PreUsers, open.MaxWait, open.Connections), f.seed)
	} else {
		fmt.Fprintf(env.Stderr, "stepping %s against %s: %s users, each held %v after %v settling, seed %d\n",
			sc.Path, target.Redacted(), joinInts(levels), f.hold, f.settle, f.seed)
	}
	res, err := st.Run(ctx)
	pr.done()
	return l.finish(env, out, res, err, f.noReport)
}

// stepProgress prints a status line each second (in place on a terminal,
// every five seconds otherwise) and a line of its own per finished level.
type stepProgress struct {
	statusLine
	quiet  bool
	levels []int
	unit   string // result.UnitUsers (zero) or result.UnitRate
}

func newStepProgress(env Env, levels []int, quiet bool) *stepProgress {
	return &stepProgress{statusLine: newStatusLine(env), quiet: quiet, levels: levels}
}

func (p *stepProgress) update(t runner.Tick) {
	x := t.Step
	if x == nil {
		return
	}
	if x.Done != nil {
		l := x.Done
		dropped := ""
		if a := l.Arrivals; a != nil {
			dropped = fmt.Sprintf(", dropped %.2f%%, late %d", a.DroppedPct, a.Late)
		}
		p.event("%s level %d/%d done: %s, %.1f req/s, mean %s, p95 %s, p99 %s, errors %.2f%%, timeouts %d%s",
			clock(t.Elapsed), levelIndex(p.levels, l.Users)+1, len(p.levels), result.Amount(float64(l.Users), p.unit), l.Totals.RPS,
			ms(l.Totals.MeanMs), ms(l.Totals.P95Ms), ms(l.Totals.P99Ms), failedPct(l.Totals), l.Totals.Timeouts, dropped)
	}
	if p.quiet && p.ui == nil {
		return
	}
	var what string
	switch {
	case x.Phase == runner.PhaseStarting && p.unit == result.UnitRate:
		what = fmt.Sprintf("setting the pool up, %d users set up", t.Ready)
	case x.Phase == runner.PhaseStarting:
		what = fmt.Sprintf("starting, %d/%d users set up", t.Ready, t.Want)
	case x.Phase == runner.PhaseSettling:
		what = fmt.Sprintf("settling, %s left", clock(x.Left))
	case x.Phase == runner.PhaseHolding:
		what = fmt.Sprintf("holding, %s left", clock(x.Left))
	case x.Phase == runner.PhaseStopping:
		if !p.quiet {
			p.clear()
			fmt.Fprintf(p.w, "stopping: letting %d users finish their actions...\n", t.Users)
		}
		return
	}
	line := fmt.Sprintf("%s level %d/%d, %s: %s | req/s %.0f  p50 %s  p95 %s  errors %d  timeouts %d%s",
		clock(t.Elapsed), x.Level+1, len(p.levels), result.Amount(float64(t.Want), p.unit), what, t.Last.RPS, ms(t.Last.P50Ms), ms(t.Last.P95Ms), t.Last.Errors, t.Last.Timeouts, connectedLine(t.Last))
	if p.quiet { // --quiet --ui: the page's status only
		p.ui.Status(line)
		return
	}
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

// failedPct is the share of requests that failed (timeouts apart), in percent.
func failedPct(s metrics.Summary) float64 {
	if s.Count == 0 {
		return 0
	}
	return 100 * float64(s.Errors) / float64(s.Count)
}
