package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/headroom-dev/headroom/internal/rusage"
	"github.com/headroom-dev/headroom/live"
	"github.com/headroom-dev/headroom/report"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/runner"
)

// uiFlagHelp is --ui's help, the same on run, step and ceiling.
const uiFlagHelp = "serve a live view of the run at this address, a port or HOST:PORT (a bare port is 127.0.0.1's), e.g. --ui 8089: " +
	"one page, read-only, that shows users, requests/s, the last 10 s's latencies per request, the checks against their thresholds, " +
	"the controller's decisions and the agents as the run goes, then becomes the run's report (docs/LIVE.md)"

// liveUI is a run's live view and its server; a nil one does nothing.
type liveUI struct {
	view *live.View
	srv  *live.Server
	cpu0 time.Duration // this process's CPU when it began
}

// startUI serves the live view at --ui, if given, and hands it c's ticks.
func (f *loadFlags) startUI(env Env, kind string, c *runner.Common) (*liveUI, error) {
	if f.ui == "" {
		return nil, nil
	}
	addr, warn, err := live.Addr(f.ui)
	if err != nil {
		return nil, err
	}
	v := live.New()
	title := fmt.Sprintf("headroom %s: %s against %s (live)", kind, filepath.Base(c.Scenario.Path), c.Target.Redacted())
	srv, err := live.Serve(v, addr, title)
	if err != nil {
		return nil, err
	}
	c.OnTick = v.Tick
	fmt.Fprintf(env.Stderr, "live view: %s\n", srv.URL)
	if warn != "" {
		fmt.Fprintf(env.Stderr, "warning: %s; --ui %s keeps it on this machine\n", warn, "127.0.0.1:PORT")
	}
	return &liveUI{view: v, srv: srv, cpu0: rusage.CPU()}, nil
}

// progressEnv is env for the progress printers: with --quiet and --ui,
// they still feed the page, and print nothing.
func (f *loadFlags) progressEnv(env Env) Env {
	if f.quiet {
		env.Stderr, env.IsTerminal = io.Discard, nil
	}
	return env
}

// watch has l's page show what s prints, and has show, the terminal's
// progress, read c's ticks before the page does (the page shows the
// line the tick printed).
func (l *liveUI) watch(s *statusLine, c *runner.Common, show func(runner.Tick)) {
	page := c.OnTick
	c.OnTick = show
	if l == nil {
		return
	}
	s.ui = l.view
	c.OnTick = func(t runner.Tick) {
		show(t)
		page(t)
	}
}

// end turns the page into the run's report (when there is a result),
// stops the server once the viewers have it, or after 3 s, and says what
// the page cost.
func (l *liveUI) end(env Env, res *result.Result) {
	if l == nil {
		return
	}
	defer func() {
		n, spent := l.view.Cost()
		if cpu := rusage.CPU() - l.cpu0; n > 0 && cpu > 0 {
			fmt.Fprintf(env.Stderr, "live view: %d updates, %v building and sending them: %.1f%% of headroom's CPU over the run\n",
				n, spent.Round(time.Millisecond), 100*spent.Seconds()/cpu.Seconds())
		}
	}()
	if res != nil {
		if page, err := report.HTML(report.ForResult(res)); err == nil {
			l.view.Finish(page)
		}
	}
	l.srv.Close(3 * time.Second)
}
