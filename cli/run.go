package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/runner"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

var runHelp = `
Runs a bounded load test: --users users, added linearly over --ramp, then
held for --duration; or, with --rate, arrivals at a rate (the open model,
below). Each user runs the scenario's setup once, then weighted actions with
think time between them, over its own keep-alive connection.

Live progress goes to stderr; the per-request table goes to stdout at the
end, and everything to --out/result.json. Ctrl-C stops the run gracefully
and still writes the result; a second Ctrl-C quits at once.

The measured window starts once the ramp is over and every user has finished
its setup (logins never count in it; --setup-timeout bounds the wait) and
lasts --duration: the table covers it only. Setup is reported apart (time to
set up a user, its requests, its failures), and so are requests that end
during the ramp or while users stop. Users added together start within
100 ms of each other and first act after their own part of a think time, so
they never act in lockstep.

The open model (--rate, docs/OPEN.md): instead of users that wait for their
answers, actions start at an arrival rate whatever the target does, each on a
free user of a pool (--max-users, default the peak rate x 1 s, at least 10; all
set up before the window unless --pre-users says fewer). Requests are timed
from the arrival's intended start, a wait for a user included, and beside it
as service time from the actual send; the tables show both, labelled. An
arrival that finds no user free within --max-wait (default 10ms: the lateness
it may start with) is dropped and counted, one that starts over 10 ms late is counted late: the
ARRIVALS table at the end, and the live line, show both. A ramp of rates is
k6-like stages (--rate-stages), each moving the rate linearly to its target
over its duration; their sum is the window. The think time is not used. On
agents (--local-agents, --agents) the pool is split by their cores and each
agent takes its share of the schedule's arrivals.

Setup capacity (--setup-only, docs/CEILING.md): the users run their setup
(sign-up, login) and no action, and the run ends once all are set up: the
answer is how fast the target set them up (users a second), the time to set
up one, and the setups' failures by message. Ramp faster than the server can
log users in (--ramp 0 adds them all at once) and give their requests the
time a queue of logins takes (--timeout). Compare two such runs with
headroom compare: a slower login is a setup regression.

At the end of a closed-model run, a warning says when the target held users
up much longer than their think time (coordinated omission: the requests they
did not send meanwhile are never measured) and points to --rate.

Examples:
  headroom run examples/chat.star --target http://127.0.0.1:8065 --users 200 --ramp 10s --duration 60s --out runs/first
  headroom run my.star --target http://127.0.0.1:8080 --users 50 --duration 2m --seed 7 --metrics-listen 127.0.0.1:9465
  headroom run examples/chat.star --target http://127.0.0.1:8065 --users 300 --setup-only --timeout 1m
  headroom run api.star --target http://127.0.0.1:8080 --rate 500/s --duration 60s
  headroom run api.star --target http://127.0.0.1:8080 --rate 30/m --duration 10m --arrivals poisson
  headroom run api.star --target http://127.0.0.1:8080 --rate-stages "100/s:30s,500/s:60s,500/s:5m" --max-users 2000 --max-wait 500ms

` + exitCodes("run", "")

type runFlags struct {
	loadFlags
	open           openFlags
	users          int
	ramp, duration time.Duration
	setupTimeout   time.Duration
	setupOnly      bool
}

func runCmd(ctx context.Context, env Env, args []string) int {
	var f runFlags
	fs := newFlags(env, "run", "SCENARIO.star --target URL [flags]", runHelp)
	f.register(fs)
	fs.IntVar(&f.users, "users", 10, "number of users to run after the ramp")
	fs.DurationVar(&f.ramp, "ramp", 0, "time over which users are added linearly, e.g. 10s (0 = all at once)")
	fs.DurationVar(&f.duration, "duration", time.Minute, "how long to hold all users once they are set up: the measured window")
	fs.DurationVar(&f.setupTimeout, "setup-timeout", time.Minute, "how long after the ramp the window waits for every user to finish setup; past it, it begins without them (with a note)")
	fs.BoolVar(&f.setupOnly, "setup-only", false, "run the users' setup and no action, and end once all are set up: the target's setup capacity (logins a second), measured alone; --duration is not used")
	f.open.register(fs)
	path, target, code, ok := f.start(env, fs, "run", args)
	if !ok {
		return code
	}
	switch {
	case f.users < 1:
		return fail(env, ExitUsage, "--users must be at least 1, got %d", f.users)
	case f.ramp < 0 || f.duration <= 0:
		return fail(env, ExitUsage, "--ramp must be >= 0 and --duration > 0")
	case f.setupTimeout <= 0:
		return fail(env, ExitUsage, "--setup-timeout must be positive")
	}
	open, err := f.open.resolve(fs, f.duration)
	if err != nil {
		return usageError(env, fs, "%v", err)
	}
	if f.setupOnly && open != nil {
		return usageError(env, fs, "--setup-only measures how fast users are set up: give --users, not --rate (the open model's pool is set up on demand)")
	}
	users, what := f.users, fmt.Sprintf("--users %d", f.users)
	if open != nil {
		users, what = open.MaxUsers, fmt.Sprintf("--max-users %d", open.MaxUsers)
	}
	sc, out, code, ok := f.prepare(ctx, env, path, target, users, what)
	if !ok {
		return code
	}
	b := &runner.Bounded{Common: f.common(env, "run", args, sc, target, out.path), Users: f.users, Ramp: f.ramp, Duration: f.duration,
		SetupTimeout: f.setupTimeout, Open: open}
	b.SetupOnly = f.setupOnly
	l, code, ok := f.launch(ctx, env, "run", sc, &b.Common, target, out)
	if !ok {
		return code
	}
	defer l.stop()
	var pr *progress
	if !f.quiet || l.ui != nil {
		pr = newProgress(f.progressEnv(env))
		pr.open = open != nil
		l.ui.watch(&pr.statusLine, &b.Common, pr.update)
	}
	if open != nil {
		fmt.Fprintf(env.Stderr, "running %s against %s: %s; seed %d\n", sc.Path, target.Redacted(), describeOpen(open), f.seed)
	} else if f.setupOnly {
		fmt.Fprintf(env.Stderr, "setting up %d users of %s against %s, ramp %v, no action (--setup-only), seed %d\n", f.users, sc.Path, target.Redacted(), f.ramp, f.seed)
	} else {
		fmt.Fprintf(env.Stderr, "running %s against %s: %d users, ramp %v, hold %v, seed %d\n", sc.Path, target.Redacted(), f.users, f.ramp, f.duration, f.seed)
	}
	res, err := b.Run(ctx)
	if pr != nil {
		pr.done()
	}
	return l.finish(env, out, res, err, f.noReport)
}

func parseTarget(s string) (*url.URL, error) {
	if s == "" {
		return nil, errors.New("--target is required, e.g. --target http://127.0.0.1:8065")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--target %q is not an http(s) URL; write e.g. http://127.0.0.1:8065", s)
	}
	return u, nil
}

func serveMetrics(addr string, p *metrics.Prom) (func(), error) {
	return serveGatherer(addr, p.Gather)
}

// serveGatherer serves what gather returns at addr's /metrics.
func serveGatherer(addr string, gather prometheus.GathererFunc) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(gather, promhttp.HandlerOpts{}))
	// HEADROOM_PPROF=1 adds Go's profiler at /debug/pprof/, so a benchmark
	// can profile a run's steady seconds only (bench/chat-cpu.sh); off by
	// default, since a profile costs CPU and shows the scenario's internals.
	if os.Getenv("HEADROOM_PPROF") == "1" {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return func() { srv.Close() }, nil
}

// checkProfileURL refuses a --profile that is not an http(s) URL, or that
// names a profile rather than the pprof base it is taken from.
func checkProfileURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return errors.New("want the server's pprof base URL, e.g. http://127.0.0.1:8067/debug/pprof")
	case strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/profile"):
		return errors.New("give the pprof base (…/debug/pprof), not …/profile: headroom asks for the slices itself")
	}
	return nil
}
