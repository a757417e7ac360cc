package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/control"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/prom"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/runner"
	"github.com/headroom-dev/headroom/scenario"
)

var ceilingHelp = `
Finds the ceiling: how many users the target supports while every health
check stays under its threshold.

The search controller (default) grows the load geometrically while every
level is healthy, then bisects between the highest healthy level and the
lowest unhealthy one until they are within --precision. Each level is held
until every user has finished setup and the checks' windows see only that
level (--settle), then judged over --judge by majority, so one blip does not
end the search; a level with mixed evaluations is judged until its majority
is decided at --confidence (at most --max-judge), else it is undecided and
the interval is widened past it. A level whose users cannot all set up
within --setup-timeout is unhealthy. The supported level is held again for
--measure and judged: an unhealthy hold sends the search below it. The linear
controller is the reference coordinator's: +8 users every 2 s while healthy,
-8 when a check fires, done when the count is flat over --linear-window.

Health checks are PromQL. The defaults are the reference's: client mean
latency > 0.1 s, p99 > 2 s, 5xx > 0.025%, timeouts > 0.025%, plus the server
5xx rate, CPU and memory once a --scrape target exposes a latency family with
a status (Mattermost, Synapse, Spring Boot, Django, FastAPI) or node_exporter
metrics. checks = [...] in the scenario replaces them; --checks FILE adds to
them (a check named as a default replaces it); --only-checks FILE uses the
file's alone. $window in a query is --window. A check whose query fails or
returns nothing counts as firing; with --scrape, one naming a metric no
endpoint exposes is refused before any traffic.

No level is judged on untrue load: every second headroom measures how late
its own starts fired and how bunched they were (a stall of its process, a
busy machine). An evaluation that fires while the checks' windows see a late
or bunched second is kept out, counted at its level ("(N kept out)"), not
blamed on the target; the answer is NOT TRUSTWORTHY when a level bounding it
kept out as many as it judged (docs/CEILING.md).

They run on an embedded Prometheus engine fed by headroom's own metrics and
by the --scrape endpoints every second, or on a real server with
--prometheus (which must scrape headroom's --metrics-listen address and your
targets itself; docs/HEALTH.md has the scrape config; --scrape endpoints then
only feed the result's server figures: CPU, memory, time by handler).

A fresh server is not the server of a second search: its users' first
setups create what it keeps (accounts signed up, caches filled), and a
search that is the first to set users up measures the server while that
state grows. --warm-up N sets N users up before the search (more than it
will reach: twice the ceiling you expect), judges nothing there, and then
searches from --start-users: the search's levels re-add users set up once,
as a second search would (docs/CEILING.md, "A fresh server"). --repeat N
runs N searches one after another (each into --out's repeat-K) and says the
range their answers span together and how far the answer moved from the
first to the last.

The open model (--open, docs/OPEN.md): the search's levels are arrival
rates instead of user counts (whole arrivals per second, from --start-rate up
to --max-rate), each a constant rate on one pool of users (--max-users bounds
it; --pre-users are set up first, the rest on demand). The answer is the
supported arrival rate. Latencies count from each arrival's intended start,
and the check "dropped arrivals (%)" > 1 joins the defaults.

Examples:
  headroom ceiling examples/api.star --target http://127.0.0.1:8065 --open
  headroom ceiling examples/chat.star --target http://127.0.0.1:8065 --scrape http://127.0.0.1:8065/metrics --out runs/ceil
  headroom ceiling my.star --target http://127.0.0.1:8080 --prometheus http://127.0.0.1:9090 --metrics-listen 127.0.0.1:9465
  headroom ceiling my.star --target http://127.0.0.1:8080 --controller linear --linear-window 5m
  headroom ceiling examples/mattermost.star --target http://127.0.0.1:8065 --warm-up 240 --repeat 2 --max-duration 15m
  headroom ceiling examples/matrix.star --target http://127.0.0.1:8008 --scrape http://127.0.0.1:9008/_synapse/metrics --checks checks.star

` + exitCodes("ceiling", `, or no ceiling
     found within --max-users and --max-duration`)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

type ceilingFlags struct {
	loadFlags
	checks, onlyChecks, prometheus     string
	controller                         string
	precision                          percent
	maxUsers, startUsers, warmUp       int
	repeat                             int
	maxDuration, window, settle, judge time.Duration
	measure, setupTimeout, maxJudge    time.Duration
	confidence                         float64
	rampRate                           float64
	lin                                control.LinearConfig
	open                               bool // --open: levels are arrival rates
	startRate, maxRate                 int
	pool                               poolFlags
}

func ceilingCmd(ctx context.Context, env Env, args []string) int {
	f := ceilingFlags{precision: 0.05}
	fs := newFlags(env, "ceiling", "SCENARIO.star --target URL [flags]", ceilingHelp)
	f.register(fs)
	fs.StringVar(&f.prometheus, "prometheus", "", "evaluate the checks on this Prometheus server instead of the embedded engine, e.g. http://127.0.0.1:9090")
	fs.StringVar(&f.checks, "checks", "", "a Starlark file with checks = [check(name, query, threshold), ...] to add to the defaults (or to the scenario's checks); one named as a default replaces it")
	fs.StringVar(&f.onlyChecks, "only-checks", "", "like --checks, but the file's checks are the only ones: no defaults, not the scenario's")
	fs.DurationVar(&f.window, "window", 10*time.Second, "range window of the default checks, and what $window stands for in yours (the reference uses 1m)")
	fs.StringVar(&f.controller, "controller", "search", "search (fast, default) or linear (the reference coordinator)")
	fs.Var(&f.precision, "precision", "search: stop when the interval is this narrow, relative to its low end")
	fs.IntVar(&f.startUsers, "start-users", 10, "search: the first level")
	fs.IntVar(&f.maxUsers, "max-users", 10000, "never run more users than this")
	fs.IntVar(&f.repeat, "repeat", 1, "run the search this many times, one after another, each into --out's repeat-K, and say the range they span together and how far the answer moved (repeats.json)")
	fs.IntVar(&f.warmUp, "warm-up", 0, "search: set this many users up before the search (sign-ups, logins, setup actions), held idle, judge nothing, then search from --start-users; for a fresh server whose first setups create state (0: none)")
	fs.DurationVar(&f.maxDuration, "max-duration", 30*time.Minute, "stop the search after this long, with a result that says whether the ceiling was found")
	fs.DurationVar(&f.settle, "settle", 0, "search: time a level is held before it is judged (default: the checks' longest window + 1s)")
	fs.DurationVar(&f.judge, "judge", control.DefaultJudge, "search: time over which a level is judged (longer when its evaluations are mixed: see --max-judge)")
	fs.DurationVar(&f.maxJudge, "max-judge", 0, "search: a level whose evaluations are mixed is judged until its majority is decided at --confidence, at most this long (default: 4 x --judge); then it is undecided and the interval is widened past it")
	numberVar(fs, &f.confidence, "confidence", 0.9, 0.5, 0.999, false, "a confidence between 0.5 and 0.999, e.g. 0.9", "search: confidence at which a level's majority must be decided")
	fs.DurationVar(&f.setupTimeout, "setup-timeout", time.Minute, "search: a level whose users have not all finished setup this long after its ramp is unhealthy for that reason")
	fs.DurationVar(&f.measure, "measure", 20*time.Second, "once found, hold the supported users this long for the per-request table (0: no)")
	numberVar(fs, &f.rampRate, "ramp-rate", 50, 0, 1e6, true, "a number of users per second above 0, e.g. 50", "search: users added per second at most (logins are costly)")
	lin := control.DefaultLinear
	fs.IntVar(&f.lin.Inc, "linear-inc", lin.Inc, "linear: users added per step while healthy")
	fs.IntVar(&f.lin.Dec, "linear-dec", lin.Dec, "linear: users removed per step when a check fires")
	fs.DurationVar(&f.lin.Rest, "linear-rest", lin.Rest, "linear: time between steps")
	fs.DurationVar(&f.lin.Window, "linear-window", lin.Window, "linear: the user count must be flat this long after the first alert")
	fs.BoolVar(&f.open, "open", false, "the open model: find the supported arrival rate instead of users; --max-users then bounds the pool of users that run the arrivals (docs/OPEN.md)")
	fs.IntVar(&f.startRate, "start-rate", 10, "with --open: the first level, arrivals per second")
	fs.IntVar(&f.maxRate, "max-rate", 100000, "with --open: never ask for more arrivals per second than this")
	f.pool.register(fs, "--open", "(default: --start-rate × 1 s, at least 10; the rest are set up on demand, during a level's settling)")
	path, target, code, ok := f.start(env, fs, "ceiling", args)
	if !ok {
		return code
	}
	if err := f.validate(fs); err != nil {
		return fail(env, ExitUsage, "%v", err)
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	maxSet := set["max-users"]
	checked := 0 // a default --max-users is lowered to fit, not refused
	if !maxSet {
		f.maxUsers = maxUsersFor(env, f.maxUsers)
	} else {
		checked = f.maxUsers
	}
	var open *runner.OpenLevels
	if f.open {
		var err error
		if open, err = f.openLevels(set); err != nil {
			return fail(env, ExitUsage, "%v", err)
		}
	} else if err := f.pool.refuseClosed(set, "--open", "start-rate", "max-rate"); err != nil {
		return fail(env, ExitUsage, "%v", err)
	}
	sc, out, code, ok := f.prepare(ctx, env, path, target, checked, fmt.Sprintf("--max-users %d", f.maxUsers))
	if !ok {
		return code
	}
	if !maxSet {
		f.maxUsers = maxUsersForData(env, sc, f.maxUsers)
		if open != nil {
			open.MaxUsers = f.maxUsers
			open.PreUsers = min(open.PreUsers, f.maxUsers)
		}
	}
	if f.repeat > 1 {
		return f.repeatSearch(ctx, env, args, sc, target, out, open)
	}
	return f.run(ctx, env, args, sc, target, out, open)
}

// openLevels checks ceiling --open's flags and resolves its pool.
func (f *ceilingFlags) openLevels(set map[string]bool) (*runner.OpenLevels, error) {
	for _, name := range []string{"start-users", "ramp-rate"} {
		if set[name] {
			return nil, fmt.Errorf("--%s is the closed model's: with --open the levels are rates (--start-rate, --max-rate), each started at once", name)
		}
	}
	switch {
	case f.controller != "search":
		return nil, errors.New("--open takes the search controller: the linear one steps users as the reference's coordinator does")
	case f.startRate < 1 || f.maxRate < f.startRate:
		return nil, fmt.Errorf("--start-rate (%d) must be at least 1 and --max-rate (%d) at least --start-rate: whole arrivals per second", f.startRate, f.maxRate)
	}
	return f.pool.levels(set, f.maxUsers, runner.DefaultMaxUsers(float64(f.startRate)))
}

// run is the part of ceilingCmd that runs once --out is reserved: it
// releases --out whenever it returns before the run starts.
func (f *ceilingFlags) run(ctx context.Context, env Env, args []string, sc *scenario.Scenario, target *url.URL, out *outDir, open *runner.OpenLevels) int {
	c := &runner.Ceiling{Common: f.common(env, "ceiling", args, sc, target, out.path), MaxDuration: f.maxDuration, Open: open}
	c.Prom = metrics.NewProm()
	l, code, ok := f.launch(ctx, env, "ceiling", sc, &c.Common, target, out)
	if !ok {
		return code
	}
	defer l.stop()
	code, ok = f.evaluation(ctx, env, c, sc)
	if !ok {
		l.abandon(env, out)
		return code
	}
	f.control(c, open)
	if open != nil {
		fmt.Fprintf(env.Stderr, "finding the supported arrival rate of %s with %s (open model, %s), %d checks on the %s engine:\n",
			target.Redacted(), sc.Path, describePool(open.Arrivals, open.MaxUsers, open.PreUsers, open.MaxWait, open.Connections), len(c.Checks), c.EvaluatorName)
	} else {
		fmt.Fprintf(env.Stderr, "finding the ceiling of %s with %s (%s), %d checks on the %s engine:\n", target.Redacted(), sc.Path, f.controller, len(c.Checks), c.EvaluatorName)
	}
	printChecks(env.Stderr, c.Checks)
	if !f.quiet || l.ui != nil {
		pr := newCeilingProgress(f.progressEnv(env))
		if open != nil {
			pr.unit = result.UnitRate
		}
		l.ui.watch(&pr.statusLine, &c.Common, pr.update)
	}
	res, err := c.Run(ctx)
	code = l.finish(env, out, res, err, f.noReport)
	if code == ExitOK && !res.Ceiling.SupportedUsers.Found {
		return ExitError
	}
	return code
}

// evaluation wires c's checks (runner.NewEvaluation) from the flags and
// the scenario: where they run, which they are, refused before any
// traffic when wrong.
func (f *ceilingFlags) evaluation(ctx context.Context, env Env, c *runner.Ceiling, sc *scenario.Scenario) (code int, ok bool) {
	e, err := runner.NewEvaluation(ctx, runner.CheckSource{
		Prometheus: f.prometheus, Scrape: f.scrape, ServerLatency: f.serverLatency,
		Window: f.window, Open: f.open, Scenario: sc.Checks, Add: f.checks, Only: f.onlyChecks, Client: env.client(),
		Warn: func(msg string) { fmt.Fprintf(env.Stderr, "warning: %s\n", msg) },
	})
	if err == nil {
		c.Evaluation = *e
		return 0, true
	}
	var ee *runner.EvaluationError
	switch {
	case !errors.As(err, &ee) || ee.Of == "": // the Prometheus server did not answer
		return fail(env, ExitError, "%v", err), false
	case ee.Of == "checks": // the error names the file and line
		fmt.Fprintln(env.Stderr, err)
		return ExitUsage, false
	}
	return fail(env, ExitUsage, "--%s: %v", ee.Of, err), false
}

// control gives c its controller, from the flags: the search (users, or
// arrival rates with --open) or the linear one.
func (f *ceilingFlags) control(c *runner.Ceiling, open *runner.OpenLevels) {
	c.Measure = f.measure
	if f.controller == "linear" {
		f.lin.Max = f.maxUsers
		c.UseLinear(f.lin)
		return
	}
	cfg := control.SearchConfig{Start: f.startUsers, Warm: f.warmUp, Max: f.maxUsers, Precision: float64(f.precision),
		Settle: f.settle, Judge: f.judge, RampRate: f.rampRate, SetupTimeout: f.setupTimeout,
		Confidence: f.confidence, MaxJudge: f.maxJudge}
	if open != nil {
		cfg.Start, cfg.Max = f.startRate, f.maxRate
	}
	c.UseSearch(cfg)
}

func (f *ceilingFlags) validate(fs *flag.FlagSet) error {
	switch {
	case f.controller != "search" && f.controller != "linear":
		return fmt.Errorf("--controller %q: want search or linear", f.controller)
	case f.maxUsers < 1 || f.startUsers < 1:
		return errors.New("--max-users and --start-users must be at least 1")
	case f.repeat < 1 || f.repeat > 20:
		return fmt.Errorf("--repeat %d: want 1 to 20 searches", f.repeat)
	case f.warmUp < 0 || f.warmUp > f.maxUsers:
		return fmt.Errorf("--warm-up %d: want 0 (none) up to --max-users %d", f.warmUp, f.maxUsers)
	case f.warmUp > 0 && (f.fleet.local > 0 || f.fleet.remote > 0):
		return errors.New("--warm-up holds users idle past their setup, which agents cannot do yet: run it without --local-agents and --agents")
	case f.warmUp > 0 && (f.open || f.controller != "search"):
		return errors.New("--warm-up sets users up before a search of users: not with --open (its pool is set up first anyway: --pre-users) or --controller linear")
	case f.lin.Inc < 1 || f.lin.Dec < 1:
		return errors.New("--linear-inc and --linear-dec must be at least 1")
	case f.checks != "" && f.onlyChecks != "":
		return errors.New("--checks adds to the defaults and --only-checks replaces them: give one of them (put every check in the --only-checks file)")
	case f.maxDuration <= 0 || f.window <= 0 || f.judge <= 0 || f.setupTimeout <= 0:
		return errors.New("--max-duration, --window, --judge and --setup-timeout must be positive")
	case f.maxJudge != 0 && f.maxJudge < f.judge:
		return fmt.Errorf("--max-judge %v is shorter than --judge %v: give at least --judge, or 0 for 4 x --judge", f.maxJudge, f.judge)
	case f.prometheus != "" && f.metricsAddr == "" && f.fleet.remote == 0: // with --agents it may scrape them
		return fmt.Errorf("--prometheus needs --metrics-listen so Prometheus can scrape headroom; its scrape config:\n%s"+
			"(on agents, Prometheus scrapes this or the agents, never both: docs/PROMETHEUS.md)", prom.ScrapeConfig("127.0.0.1:9465"))
	}
	return nil
}
