package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/live"
	"github.com/headroom-dev/headroom/runner"
)

// statusLine is one live line on stderr: redrawn in place on a terminal,
// printed every five seconds otherwise (logs stay readable).
type statusLine struct {
	w     io.Writer
	tty   bool
	last  time.Time
	width int
	ui    *live.View // the live view (--ui), shown the same words; nil without
}

func newStatusLine(env Env) statusLine {
	return statusLine{w: env.Stderr, tty: env.IsTerminal != nil && env.IsTerminal(env.Stderr)}
}

// show draws line; always prints it off a terminal even within five seconds.
func (s *statusLine) show(line string, always bool) {
	if s.ui != nil {
		s.ui.Status(line)
	}
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

// event prints a line of its own (a decision, a level done), which the
// live view lists too.
func (s *statusLine) event(format string, args ...any) {
	s.clear()
	line := fmt.Sprintf(format, args...)
	fmt.Fprintln(s.w, line)
	if s.ui != nil {
		s.ui.Event(line)
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

func (p *progress) update(t runner.Tick) {
	x := t.Run
	if x == nil {
		return
	}
	if p.open {
		p.updateOpen(t, x)
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
		phase, clock(t.Elapsed), clock(x.Total), t.Users, t.Want, t.Ready, t.Last.RPS, ms(t.Last.P50Ms), ms(t.Last.P99Ms), errPct, x.Timeouts)
	line += connectedLine(t.Last)
	if n := t.Last.SetupErrors; n > 0 {
		line += fmt.Sprintf("  setup errors %d/s", n)
	}
	if x.Phase == "stopping" {
		line = fmt.Sprintf("stopping: letting %d users finish their actions...", t.Users)
	}
	p.show(line, x.Phase == "stopping")
}

// updateOpen is the line of a run of the open model: the arrivals the
// schedule asked for and those that started, dropped and late, and the
// latency from the intended start.
func (p *progress) updateOpen(t runner.Tick, x *runner.RunTick) {
	var line string
	switch x.Phase {
	case "stopping":
		line = fmt.Sprintf("stopping: letting %d users finish their actions...", t.Users)
	case "steady":
		errPct := 0.0
		if x.Requests > 0 {
			errPct = 100 * float64(x.Errors) / float64(x.Requests)
		}
		line = fmt.Sprintf("open %s/%s  arrivals/s %.0f of %.0f  dropped %d  late %d  pool %d users  p50 %s  p99 %s (from intended start)  errors %.2f%%  timeouts %d",
			clock(t.Elapsed), clock(x.Total), x.Started, x.Rate, x.Dropped, x.Late, t.Users, ms(t.Last.P50Ms), ms(t.Last.P99Ms), errPct, x.Timeouts)
		line += connectedLine(t.Last)
	default:
		line = fmt.Sprintf("setting up the pool %s  users %d/%d set up", clock(t.Elapsed), t.Ready, t.Want)
		if n := t.Last.SetupErrors; n > 0 {
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
