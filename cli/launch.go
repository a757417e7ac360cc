package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/report"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/runner"
	"github.com/headroom-dev/headroom/scenario"
)

// outDir is the result directory of a run about to start: --out, or a
// new runs/<time> reserved for it. If the run never starts, release
// removes the directory when this run created it and left it empty.
type outDir struct {
	path    string
	created bool
	undo    func() // of Env.CrashOutput
}

// reserve creates the result directory: --out, checked writable, or a new
// runs/<time>. The report of a fatal runtime error goes there from now on.
func (f *loadFlags) reserve(env Env) (*outDir, int, bool) {
	o := &outDir{path: f.out, undo: func() {}}
	if f.out == "" {
		dir, err := result.Writer{}.NewDir("runs", "", time.Now())
		if err != nil {
			return nil, fail(env, ExitError, "cannot create a result directory under runs/: %v\n  hint: give one with --out", err), false
		}
		o.path, o.created = dir, true
	} else {
		_, err := os.Stat(f.out)
		o.created = errors.Is(err, os.ErrNotExist)
		if err := (result.Writer{}).Probe(f.out); err != nil {
			o.release()
			return nil, fail(env, ExitError, "cannot write the result to %s: %v\n  hint: choose another --out, or make room there", f.out, err), false
		}
	}
	if env.CrashOutput != nil {
		o.undo = env.CrashOutput(o.path)
	}
	return o, 0, true
}

// release undoes reserve for a run that never started.
func (o *outDir) release() {
	if o.undo != nil {
		o.undo()
	}
	if o.created {
		_ = os.Remove(o.path) // only if empty
	}
}

// launched is what a run's command starts beside its runner: the fleet
// (--local-agents, --agents), headroom's /metrics (--metrics-listen,
// --out-remote-write) and the live page (--ui).
type launched struct {
	ui   *liveUI
	stop func() // the metrics, then the fleet
}

// launch starts, in the order every run kind needs them, the fleet, the
// metrics and the live page, all fed by c. On failure it has stopped what
// it started and released out, and code is the exit code.
func (f *loadFlags) launch(ctx context.Context, env Env, kind string, sc *scenario.Scenario, c *runner.Common, target *url.URL, out *outDir) (l *launched, code int, ok bool) {
	closeFleet, code, ok := f.attachFleet(ctx, env, sc, c, target)
	if !ok {
		out.release()
		return nil, code, false
	}
	stop, err := f.serveMetrics(env, c)
	if err != nil {
		closeFleet()
		out.release()
		return nil, fail(env, ExitUsage, "%v", err), false
	}
	ui, err := f.startUI(env, kind, c)
	if err != nil {
		stop()
		closeFleet()
		out.release()
		return nil, fail(env, ExitUsage, "%v", err), false
	}
	return &launched{ui: ui, stop: func() { stop(); closeFleet() }}, 0, true
}

// abandon ends a launch whose run will not start (its checks refused):
// the live page stopped, out released. The caller's l.stop ends the rest.
func (l *launched) abandon(env Env, out *outDir) {
	l.ui.end(env, nil)
	out.release()
}

// finish ends a run that returned: its summary, result and report
// (finish), then the live page turned into the report; the exit code.
// The fleet and metrics stop when the caller's deferred l.stop runs.
func (l *launched) finish(env Env, out *outDir, res *result.Result, err error, noReport bool) int {
	code := finish(env, out, res, err, noReport)
	l.ui.end(env, res)
	return code
}

// finish reports a run that went its course: its summary (the report's
// words, as text), where the result is, the report, and the exit code.
// err is Run's error; a run that returned no result never started.
func finish(env Env, out *outDir, res *result.Result, err error, noReport bool) int {
	if res == nil {
		out.release()
		return fail(env, ExitError, "%v", err)
	}
	defer out.undo()
	_ = report.Text(env.Stdout, report.Summary(res))
	where := out.path
	var we *runner.WriteError
	if errors.As(err, &we) {
		where = we.Fallback
	}
	if where != "" {
		fmt.Fprintf(env.Stdout, "\nresult: %s\n", filepath.Join(where, result.ResultFile))
		writeReports(env, where, res, noReport)
	}
	code := ExitOK
	switch res.Status {
	case result.Failed:
		code = ExitNothing
		for _, n := range res.Notes {
			if strings.HasPrefix(n, "the run measured nothing") {
				fmt.Fprintf(env.Stderr, "headroom: %s\n", n)
			}
		}
	case result.Stopped:
		code = ExitError
		if len(res.Notes) > 0 && !errors.As(err, new(*engine.PanicError)) {
			why := strings.TrimPrefix(res.Notes[len(res.Notes)-1], "headroom stopped the run: ")
			fmt.Fprintf(env.Stderr, "headroom: the run stopped early: %s\n", why)
		}
	}
	var pe *engine.PanicError
	switch {
	case errors.As(err, &pe):
	case we != nil:
		code = fail(env, ExitError, "%v", we)
	case err != nil:
		code = fail(env, ExitError, "%v", err)
	}
	if pe != nil {
		code = fail(env, ExitInternal, "internal error, a bug in headroom (please report it with what follows): %v\n%s", pe, pe.Stack)
	}
	return code
}
