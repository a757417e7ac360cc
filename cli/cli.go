// Package cli turns command lines into calls on headroom's packages.
// Commands parse flags into options and call a package; nothing else.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/headroom-dev/headroom/runner"
)

// Version is set at build time with -ldflags "-X .../cli.Version=...".
var Version = "0.1.0-dev"

// Exit codes (README.md, "Exit codes"; compare's 3 is ExitRegression).
const (
	ExitOK    = 0 // done
	ExitError = 1 // the run could not be done or was cut short: target unreachable, I/O error, stopped by headroom, no ceiling
	ExitUsage = 2 // bad command line, scenario, checks or --out; nothing was sent
	// ExitLeft: an agent left its coordinator's run when told to (Ctrl-C,
	// SIGTERM), every sample delivered; the run goes on without it. Not 0,
	// which would tell a Job that the agent's work is done. (compare's 3,
	// ExitRegression, is another command's.)
	ExitLeft = 3
	// ExitNothing: the run went its course but measured nothing (status
	// failed): every request failed, or no user finished setup.
	ExitNothing = 4
	// ExitInternal: headroom caught a panic of its own, a bug; a run's
	// result is written (status stopped) when the run had started.
	// A fatal runtime error, which cannot be caught, kills headroom with
	// SIGABRT instead (134 in a shell; see cmd/headroom).
	ExitInternal = 5
)

// exitCodes is the end of run's, step's and ceiling's help; one is what
// the command adds to code 1.
func exitCodes(kind, one string) string {
	return `Exit codes:
  0  done (after Ctrl-C too: the result has what ran)
  1  could not run, or cut short: target unreachable; the scenario's init
     failed (the message says whether the target or the scenario); --out not writable (at
     the end the result goes to $TMPDIR/headroom-` + kind + `-<time> instead, named on
     stderr); stopped by headroom (--max-memory)` + one + `
  2  bad flags, scenario or checks; an --out that holds a result (--force);
     more users than the open-files limit (ulimit -n) or a unique data file
     allows; a check naming a metric no --scrape endpoint exposes. Nothing was sent
  4  the run measured nothing: every request failed, or no user finished setup
  5  an internal error, a bug in headroom; the result is written (stopped)
  A fatal runtime error kills headroom with SIGABRT (134 in a shell); its
  report is in --out/crash.txt.
`
}

// Env is the outside world a command sees.
type Env struct {
	Args           []string
	Stdin          io.Reader // nil: empty (agent --token-file - reads it)
	Stdout, Stderr io.Writer
	IsTerminal     func(w io.Writer) bool // nil: never a terminal
	// Getenv reads the environment; nil reads nothing. Commands read only
	// HEADROOM_TEST_PANIC, a hook for tests (see testHook).
	Getenv func(key string) string
	// CrashOutput, if set, is called once a run's result directory exists:
	// from then on the report of a fatal runtime error also goes to a file
	// there. The returned function undoes it.
	CrashOutput func(dir string) (undo func())
	// Limits returns what this process may use; nil: nothing is known and
	// nothing is checked.
	Limits func() Limits
	// Dial, if set, makes every connection of a run (its users', its
	// scrapes') instead of the network: a test serves the target in memory
	// and runs a command in virtual time (testing/synctest;
	// internal/testing/memhttp). nil: the network.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Limits is what the machine allows this process.
type Limits struct {
	// OpenFiles is the open-files limit (ulimit -n), after Go raised the
	// soft limit to the hard one at start; 0: unknown.
	OpenFiles uint64
	// Memory is what the process may use, in bytes: the cgroup's limit,
	// else the machine's memory; 0: unknown. MemoryOf says which.
	Memory   uint64
	MemoryOf string
	// Ports is the size of the ephemeral port range
	// (net.ipv4.ip_local_port_range): how many connections one source
	// address can hold to one target; 0: unknown.
	Ports int
}

func (env Env) limits() Limits {
	if env.Limits == nil {
		return Limits{}
	}
	return env.Limits()
}

type command struct {
	name, summary string
	run           func(ctx context.Context, env Env, args []string) int
}

func commands() []command {
	return []command{
		{"run", "run a bounded load test: a fixed number of users, or an arrival rate (--rate), for a duration", runCmd},
		{"step", "hold a list of user counts in turn; a table per level and the knee", stepCmd},
		{"ceiling", "find how many users the target supports while its health checks pass", ceilingCmd},
		{"compare", "compare base and new builds' results: deltas, intervals, verdicts; gates CI", compareCmd},
		{"report", "write the Markdown + PNG and HTML report of a result, or a ceiling matrix", reportCmd},
		{"testbed", "start the built-in target server, whose capacity is known", testbedCmd},
		{"agent", "run users for a coordinator's run (--local-agents starts them for you)", agentCmd},
		{"record", "record a browser session as a HAR file: a headless Chromium takes your steps through a page", recordCmd},
		{"convert", "turn a recorded browser session (a HAR file) into a scenario, its tokens and ids correlated", convertCmd},
		{"profiler", "serve a Python or native server's CPU profiles for --profile, sampled from beside it", profilerCmd},
		{"version", "print the version", func(_ context.Context, env Env, _ []string) int {
			fmt.Fprintf(env.Stdout, "headroom %s\n", Version)
			return ExitOK
		}},
	}
}

// Main runs the command line and returns the exit code. A panic in the
// command's goroutine is caught here: ExitInternal, with the stack.
func Main(ctx context.Context, env Env) (code int) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(env.Stderr, "headroom: internal error, a bug in headroom (please report it with what follows): panic: %v\n%s", p, debug.Stack())
			code = ExitInternal
		}
	}()
	if len(env.Args) == 0 || env.Args[0] == "-h" || env.Args[0] == "--help" || env.Args[0] == "help" {
		usage(env.Stdout)
		if len(env.Args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	for _, c := range commands() {
		if c.name == env.Args[0] {
			return c.run(ctx, env, env.Args[1:])
		}
	}
	fmt.Fprintf(env.Stderr, "headroom: unknown command %q\nrun 'headroom --help' for the commands\n", env.Args[0])
	return ExitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `headroom finds how many users your system supports, and whether a release made it worse.

Usage:
  headroom <command> [flags]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Start here:
  headroom testbed --listen 127.0.0.1:8065 &
  headroom run examples/chat.star --target http://127.0.0.1:8065 --users 200 --ramp 10s --duration 60s --out runs/first

Run 'headroom <command> --help' for its flags.
`)
}

// newFlags returns a flag set whose --help (or -h) prints the given text
// and the flags to stderr. A mistake on its command line is printed by
// parse, with a one-line pointer to --help rather than the whole text.
func newFlags(env Env, name, synopsis, text string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse reports mistakes itself
	fs.Usage = func() {}
	h := &helpFlag{show: func() {
		fs.SetOutput(env.Stderr)
		defer fs.SetOutput(io.Discard)
		fmt.Fprintf(env.Stderr, "Usage:\n  headroom %s %s\n\n%s\nFlags:\n", name, synopsis, strings.TrimLeft(text, "\n"))
		fs.PrintDefaults()
	}}
	fs.Var(h, "help", "print this help (-h too)")
	return fs
}

// helpFlag is --help: set, parse prints the command's help.
type helpFlag struct {
	asked bool
	show  func()
}

func (h *helpFlag) String() string   { return "false" }
func (h *helpFlag) IsBoolFlag() bool { return true }
func (h *helpFlag) Set(s string) (err error) {
	h.asked, err = strconv.ParseBool(s)
	return err
}

// parse parses flags allowing them after positional arguments too
// ("run chat.star --users 10"), and returns the positional arguments. It
// prints --help, or a mistake (a value out of range, a duration below 0
// or above 30 days) with a pointer to --help, and then returns false and
// the exit code.
// parseNone parses the flags of a command that takes no arguments, and
// refuses any: "NAME takes no arguments".
func parseNone(env Env, fs *flag.FlagSet, args []string, name string) (int, bool) {
	pos, code, ok := parse(env, fs, args)
	switch {
	case !ok:
		return code, false
	case len(pos) > 0:
		return fail(env, ExitUsage, "%s takes no arguments, got %q", name, strings.Join(pos, " ")), false
	}
	return 0, true
}

func parse(env Env, fs *flag.FlagSet, args []string) ([]string, int, bool) {
	h := fs.Lookup("help").Value.(*helpFlag)
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) || h.asked { // -h is not defined: the flag package answers ErrHelp
			h.show()
			return nil, ExitOK, false
		}
		if err != nil {
			return nil, usageError(env, fs, "%v", err), false
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if err := checkDurations(fs); err != nil {
		return nil, usageError(env, fs, "%v", err), false
	}
	return pos, 0, true
}

// usageError prints a mistake on fs's command line, then where to read
// about the command, and returns ExitUsage.
func usageError(env Env, fs *flag.FlagSet, format string, a ...any) int {
	fail(env, ExitUsage, format, a...)
	fmt.Fprintf(env.Stderr, "run 'headroom %s --help' for its flags and examples\n", fs.Name())
	return ExitUsage
}

// fail prints a message (any password in a URL there redacted) and
// returns code.
func fail(env Env, code int, format string, a ...any) int {
	fmt.Fprintln(env.Stderr, runner.Redact(fmt.Sprintf("headroom: "+format, a...)))
	return code
}

// testHook returns, for the HEADROOM_TEST_PANIC environment variable that
// only tests set, a function to run as each action starts: "user" panics
// in a user's goroutine (a bug headroom catches: ExitInternal), "fatal"
// dies of a fatal runtime error there (one it cannot catch). nil
// otherwise.
func testHook(env Env) func(user int, action string) {
	if env.Getenv == nil {
		return nil
	}
	switch env.Getenv("HEADROOM_TEST_PANIC") {
	case "user":
		return func(int, string) { panic("HEADROOM_TEST_PANIC=user") }
	case "fatal":
		return func(int, string) {
			var mu sync.Mutex
			mu.Unlock() // fatal error: sync: unlock of unlocked mutex
		}
	}
	return nil
}

// client is the HTTP client of a run's scrapes: nil (a plain one) unless
// Dial makes the connections.
func (env Env) client() *http.Client {
	if env.Dial == nil {
		return nil
	}
	return &http.Client{Transport: &http.Transport{DialContext: env.Dial}}
}
