package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/runner"
	"github.com/headroom-dev/headroom/scenario"
	"github.com/headroom-dev/headroom/serverstats"
	"github.com/headroom-dev/headroom/transport"
)

// loadFlags are the flags of every command that runs users.
type loadFlags struct {
	target, out, metricsAddr, label string
	ui                              string
	seed                            uint64
	timeout, grace                  time.Duration
	quiet, noReport                 bool
	client                          transport.Config // --insecure, --no-tls-resume, --no-compression; --ca, --cert, --key read in start
	caFile, certFile, keyFile       string
	freshSessions                   bool
	profile                         multi
	profileSlice                    time.Duration
	setupRetries                    int
	force                           bool
	scrape                          multi
	serverLatency                   families
	memory                          memory
	maxBody                         size
	sources                         sourceAddrs
	maxSteps                        uint64
	loadTimeout                     time.Duration
	vars                            scenarioVars
	fleet                           fleetFlags
	remoteWrite                     remoteWriteFlags
}

func (f *loadFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.target, "target", "", "base URL that request paths are joined to, e.g. http://127.0.0.1:8065 (required)")
	fs.StringVar(&f.out, "out", "", "result directory to write (result.json, histograms.json); default runs/<time>, always a new directory")
	fs.BoolVar(&f.force, "force", false, "overwrite the result --out holds already (without it, an --out that holds a result is refused)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of every user's random streams: same seed, same sequence of actions")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "per-request timeout, dial included; a request past it counts as a timeout, not an error (it fires up to 1% late)")
	fs.DurationVar(&f.grace, "grace", 5*time.Second, "time a stopping user may finish its action before it is cancelled")
	fs.StringVar(&f.metricsAddr, "metrics-listen", "", "serve headroom's Prometheus metrics at this address, e.g. 127.0.0.1:9465 (off by default)")
	f.remoteWrite.register(fs)
	fs.BoolVar(&f.client.Insecure, "insecure", false, "do not verify TLS certificates of an https target")
	fs.StringVar(&f.caFile, "ca", "", "a PEM file of the certificates to trust (a private CA's) for https targets and wss:// WebSockets, in place of the system's roots")
	fs.StringVar(&f.certFile, "cert", "", "a PEM file of the client certificate (and its chain) users show a server that asks for one (mutual TLS); with --key")
	fs.StringVar(&f.keyFile, "key", "", "a PEM file of --cert's private key")
	fs.BoolVar(&f.client.NoResume, "no-tls-resume", false, "a full TLS handshake on every new connection; by default each user resumes its own TLS sessions, as a browser does")
	fs.BoolVar(&f.client.HTTP1, "http1", false, "HTTP/1.1 only; by default users offer HTTP/2 to an https target by ALPN, as browsers do, and speak what the server picks")
	fs.BoolVar(&f.client.H2C, "h2c", false, "HTTP/2 with prior knowledge on an http:// target (cleartext h2c), for a server that speaks HTTP/2 without TLS")
	fs.BoolVar(&f.client.NoCompression, "no-compression", false, "send no Accept-Encoding; by default users ask for gzip, deflate, br and zstd, as browsers do, and decode what comes (r.text, r.json()): bytes_in counts the wire, body_bytes_in the decoded bodies")
	fs.IntVar(&f.setupRetries, "setup-retries", engine.DefaultSetupRetries, "how often a user retries a failed setup (after a doubling, jittered pause from its think time to 30 s: about 3 minutes at the default) before it gives up, unset up, and the result counts it; 0: never retry")
	fs.Var(&f.profile, "profile", "a Go pprof endpoint of the system under test (its /debug/pprof base, repeatable), e.g. http://127.0.0.1:8067/debug/pprof: its CPU profiles are taken in slices through the run and kept in profiles/, merged by phase (users' setup and the window; each step or ceiling level), with the functions that spent most in the result and report (docs/PROFILES.md)")
	fs.DurationVar(&f.profileSlice, "profile-slice", 10*time.Second, "the length of one --profile CPU profile (whole seconds); a phase is the merge of the slices that lie in it, so a shorter slice covers more of a short phase")
	fs.BoolVar(&f.freshSessions, "fresh-sessions", false, "start every user's user.session empty; by default a user added in the place of one removed (a ceiling stepping down and up) starts with what that one kept there, a token, and need not log in again (docs/SCENARIOS.md)")
	fs.BoolVar(&f.quiet, "quiet", false, "no live progress")
	fs.StringVar(&f.ui, "ui", "", uiFlagHelp)
	fs.BoolVar(&f.noReport, "no-report", false, "do not write report.md (+ PNG charts) and report.html into the result directory")
	fs.StringVar(&f.label, "label", "", `what this run is, for reports and matrices, e.g. "v1.5, 2 app nodes, ES on"`)
	f.memory = memory{flagText{"50%"}}
	fs.Var(&f.memory, "max-memory", "memory headroom may use, e.g. 4GiB, or a share of the machine's (its cgroup's limit, if lower), e.g. 50%; past it every user is cancelled and the run stops (status stopped), its result written; 0: no limit")
	f.maxBody = size{flagText{"64MiB"}, 64 << 20}
	fs.Var(&f.maxBody, "max-body", "largest response body a request may read, e.g. 1MiB or 256MiB; a larger one is an error. Each user holds at most this much of a response at a time")
	fs.Var(&f.sources, "source-addrs", "local addresses to connect from, users spread over them, e.g. 127.0.0.1-127.0.0.4 (any 127.x.y.z for a loopback target): one address holds only about half the ephemeral port range of connections to one target")
	fs.Uint64Var(&f.maxSteps, "max-steps", scenario.DefaultMaxSteps, "Starlark steps one call of setup, an action or teardown may take (about 1-3 s of CPU at the default) before it fails, so a runaway loop cannot take a user over")
	fs.Var(&f.vars, "var", `a value the scenario reads as vars["NAME"] (a string), as NAME=VALUE (repeatable), e.g. --var members=200; recorded in result.json's command, so pass no secrets this way`)
	fs.DurationVar(&f.loadTimeout, "load-timeout", scenario.DefaultLoadTimeout, "time the scenario's top level may take to load before it is refused")
	fs.Var(&f.scrape, "scrape", "a Prometheus endpoint of the system under test to scrape every second (repeatable), e.g. its /metrics or a node_exporter: CPU, memory, goroutines and the server's time by handler go into the result (and, for ceiling, into the embedded engine)")
	f.fleet.register(fs)
	fs.Var(&f.serverLatency, "server-latency", "a latency histogram or summary of a --scrape endpoint to report by one label, as FAMILY:LABEL (repeatable), e.g. myapp_rpc_duration_seconds:method; Mattermost, Synapse, Spring Boot, Django and FastAPI's are read without it")
}

// scenarioVars is --var: NAME=VALUE pairs for the scenario's vars.
type scenarioVars map[string]string

func (v *scenarioVars) String() string {
	if v == nil {
		return ""
	}
	var parts []string
	for k, val := range *v {
		parts = append(parts, k+"="+val)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func (v *scenarioVars) Set(s string) error {
	name, val, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("%q has no =: write NAME=VALUE, e.g. members=200", s)
	}
	if err := scenario.CheckVarName(name); err != nil {
		return err
	}
	if _, dup := (*v)[name]; dup {
		return fmt.Errorf("%s is given twice", name)
	}
	if *v == nil {
		*v = scenarioVars{}
	}
	(*v)[name] = val
	return nil
}

// families is --server-latency: latency families of the target to read
// besides the ones headroom knows.
type families []serverstats.Family

func (fs *families) String() string {
	if fs == nil {
		return ""
	}
	var parts []string
	for _, f := range *fs {
		parts = append(parts, f.Metric+":"+f.Label)
	}
	return strings.Join(parts, ",")
}

func (fs *families) Set(s string) error {
	f, err := serverstats.ParseFamily(s)
	if err != nil {
		return err
	}
	*fs = append(*fs, f)
	return nil
}

// readClient reads --ca, --cert and --key into f.client and checks them.
func (f *loadFlags) readClient() error {
	for _, x := range []struct {
		flag, path string
		into       *[]byte
	}{{"--ca", f.caFile, &f.client.CA}, {"--cert", f.certFile, &f.client.Cert}, {"--key", f.keyFile, &f.client.Key}} {
		if x.path == "" {
			continue
		}
		b, err := os.ReadFile(x.path)
		if err != nil {
			return fmt.Errorf("%s: %v", x.flag, err)
		}
		*x.into = b
	}
	_, err := f.client.Settings()
	return err
}

// start parses the command line of cmd: one scenario file and the flags.
// It returns the scenario path and the target, or an exit code.
func (f *loadFlags) start(env Env, fs *flag.FlagSet, cmd string, args []string) (string, *url.URL, int, bool) {
	pos, code, ok := parse(env, fs, args)
	if !ok {
		return "", nil, code, false
	}
	if len(pos) != 1 {
		return "", nil, usageError(env, fs, "%s needs exactly one scenario file, got %d arguments: %s", cmd, len(pos), strings.Join(pos, " ")), false
	}
	target, err := parseTarget(f.target)
	if err != nil {
		return "", nil, fail(env, ExitUsage, "%v", err), false
	}
	if err := f.readClient(); err != nil {
		return "", nil, fail(env, ExitUsage, "%v", err), false
	}
	if f.timeout <= 0 || f.grace < 0 {
		return "", nil, fail(env, ExitUsage, "--timeout must be > 0 and --grace >= 0"), false
	}
	if f.maxSteps == 0 || f.loadTimeout <= 0 {
		return "", nil, fail(env, ExitUsage, "--max-steps and --load-timeout must be more than 0"), false
	}
	if f.setupRetries < 0 {
		return "", nil, fail(env, ExitUsage, "--setup-retries must be 0 (never retry) or more, got %d", f.setupRetries), false
	}
	if f.profileSlice < time.Second {
		return "", nil, fail(env, ExitUsage, "--profile-slice must be 1s or more: a Go server profiles in whole seconds"), false
	}
	for _, p := range f.profile {
		if err := checkProfileURL(p); err != nil {
			return "", nil, fail(env, ExitUsage, "--profile %s: %v", p, err), false
		}
	}
	if err := f.sources.check(target); err != nil {
		return "", nil, fail(env, ExitUsage, "%v", err), false
	}
	if len(f.serverLatency) > 0 && len(f.scrape) == 0 {
		return "", nil, fail(env, ExitUsage, "--server-latency reads a --scrape endpoint: give the target's metrics endpoint with --scrape"), false
	}
	if err := f.fleet.check(f.metricsAddr); err != nil {
		return "", nil, fail(env, ExitUsage, "%v", err), false
	}
	if err := f.remoteWrite.check(); err != nil {
		return "", nil, fail(env, ExitUsage, "%v", err), false
	}
	return pos[0], target, 0, true
}

// load reads the scenario (Ctrl-C, through ctx, interrupts its top level)
// and checks --out, reporting a mistake in either as a usage error. It
// writes nothing.
func (f *loadFlags) load(ctx context.Context, env Env, path string) (*scenario.Scenario, int, bool) {
	sc, err := scenario.LoadFile(ctx, path, scenario.Limits{MaxSteps: f.maxSteps, LoadTimeout: f.loadTimeout, Vars: f.vars})
	if err != nil {
		fmt.Fprintln(env.Stderr, err)
		return nil, ExitUsage, false
	}
	if f.out == "" {
		return sc, 0, true
	}
	err = result.CheckOut(f.out, f.force)
	var exists *result.ExistsError
	switch {
	case errors.As(err, &exists):
		return nil, fail(env, ExitUsage, "--out %v\n  fix: --force to overwrite it, or another --out (the default, runs/<time>, is always a new directory)", err), false
	case err != nil:
		return nil, fail(env, ExitUsage, "--out %v; choose another", err), false
	}
	return sc, 0, true
}

// common is what every run gets from these flags.
func (f *loadFlags) common(env Env, cmd string, args []string, sc *scenario.Scenario, target *url.URL, out string) runner.Common {
	return runner.Common{
		Scenario: sc, Target: target, Seed: f.seed, Timeout: f.timeout, Grace: f.grace, Client: f.client, Out: out, Scrape: f.scrape, Label: f.label,
		FreshSessions: f.freshSessions, SetupRetries: retries(f.setupRetries), Profile: f.profile, ProfileSlice: f.profileSlice, ServerLatency: f.serverLatency, Command: append([]string{"headroom", cmd}, args...), Version: Version,
		Print:     func(user int, msg string) { fmt.Fprintf(env.Stderr, "[user %d] %s\n", user, msg) },
		Warn:      func(msg string) { fmt.Fprintf(env.Stderr, "warning: %s\n", msg) },
		OnAction:  testHook(env),
		MaxMemory: f.maxMemory(env),
		MaxBody:   int(f.maxBody.bytes), SourceAddrs: f.sources.addrs,
		Dial: env.Dial,
	}
}

// prepare does what every run does before any traffic, in order: checks
// that users users (what names them in messages; 0: no check) can run
// from this process, loads the scenario, checks that its data files hold
// a row for each of them, and reserves --out. It returns an exit code
// when one of them fails.
func (f *loadFlags) prepare(ctx context.Context, env Env, path string, target *url.URL, users int, what string) (*scenario.Scenario, *outDir, int, bool) {
	if users > 0 && !f.fleet.on() { // agents' users are not this process's
		if code, ok := f.checkUsers(env, users, target, what); !ok {
			return nil, nil, code, false
		}
	}
	sc, code, ok := f.load(ctx, env, path)
	if !ok {
		return nil, nil, code, false
	}
	if code, ok := checkData(env, sc, users, what); !ok {
		return nil, nil, code, false
	}
	out, code, ok := f.reserve(env)
	if !ok {
		return nil, nil, code, false
	}
	return sc, out, 0, true
}

// checkUsers checks, before any traffic, that users users can run from
// this process: it refuses more than the open files allow and warns when
// their connections are more than the source addresses hold.
func (f *loadFlags) checkUsers(env Env, users int, target *url.URL, what string) (int, bool) {
	if code, ok := checkOpenFiles(env, users, what); !ok {
		return code, false
	}
	checkPorts(env, users, len(f.sources.addrs), target, what)
	return 0, true
}

// checkData refuses, before any traffic, a run of more users than a
// dataset of the scenario that holds a row per running user
// (pick="unique") has rows: the rest could never set up.
func checkData(env Env, sc *scenario.Scenario, users int, what string) (int, bool) {
	for _, d := range sc.Unique() {
		if users > d.Rows() {
			return fail(env, ExitUsage, "%s: %s (pick=\"unique\", %s:%d) has %d rows, one per running user\n"+
				"  fix: add rows to it, or run at most %d users", what, d.What(), filepath.Base(sc.Path), d.Line, d.Rows(), d.Rows()), false
		}
	}
	return 0, true
}

// maxUsersForData lowers a default --max-users to the rows of the
// scenario's smallest dataset that holds a row per running user, saying
// so; it returns max unchanged when they are enough.
func maxUsersForData(env Env, sc *scenario.Scenario, max int) int {
	for _, d := range sc.Unique() {
		if d.Rows() < max {
			fmt.Fprintf(env.Stderr, "note: --max-users lowered from %d to %d: %s (pick=\"unique\") has a row for that many users\n", max, d.Rows(), d.What())
			max = d.Rows()
		}
	}
	return max
}

// serveMetrics serves headroom's Prometheus metrics at --metrics-listen
// and sends them to --out-remote-write, if given, creating c.Prom when
// the run has none yet. stop is never nil: it sends the last of them.
func (f *loadFlags) serveMetrics(env Env, c *runner.Common) (stop func(), err error) {
	stopWrite := f.remoteWrite.start(env, c)
	if f.metricsAddr == "" {
		return stopWrite, nil
	}
	if c.Prom == nil {
		c.Prom = metrics.NewProm()
	}
	stopServe, err := serveMetrics(f.metricsAddr, c.Prom)
	if err != nil {
		stopWrite()
		return nil, fmt.Errorf("--metrics-listen: %v", err)
	}
	fmt.Fprintf(env.Stderr, "metrics at http://%s/metrics\n", f.metricsAddr)
	if who, local := exposure(f.metricsAddr); who != "" {
		fmt.Fprintf(env.Stderr, "warning: --metrics-listen %s serves headroom's metrics (request names, rates, latencies, users) %s: "+
			"anyone who can reach this machine can read them; --metrics-listen %s keeps them on this machine\n", f.metricsAddr, who, local)
	}
	return func() { stopServe(); stopWrite() }, nil
}

// exposure says where besides this machine a listen address is reachable
// ("on every interface", "on 10.0.0.5"), with its loopback equivalent;
// "" for a loopback address.
func exposure(addr string) (who, local string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", ""
	}
	local = net.JoinHostPort("127.0.0.1", port)
	switch ip := net.ParseIP(host); {
	case host == "localhost" || (ip != nil && ip.IsLoopback()):
		return "", ""
	case host == "" || (ip != nil && ip.IsUnspecified()):
		return "on every interface", local
	}
	return "on " + host + ", not a loopback address", local
}

// retries is --setup-retries as engine.Config.SetupRetries: 0 there is the
// default, so never retrying is negative.
func retries(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}
