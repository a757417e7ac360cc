// Package runner drives runs: it owns the clock of a run, tells the engine
// how many users to run, collects the metrics every second and writes the
// result. A bounded run is a fixed number of users, reached by a linear
// ramp, held for a duration.
package runner

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/scenario"
)

// Bounded configures a bounded run.
type Bounded struct {
	Scenario *scenario.Scenario
	Target   *url.URL
	Users    int           // > 0
	Ramp     time.Duration // users are added linearly over the ramp
	Duration time.Duration // how long all users are held after the ramp; the measured window
	Seed     uint64
	Timeout  time.Duration // per request
	Grace    time.Duration // for users to finish their action when stopped
	Insecure bool
	Out      string   // result directory; "" writes nothing
	Command  []string // the command line, for the result
	Version  string

	Prom     *metrics.Prom     // optional: live Prometheus exposition
	Progress func(Progress)    // optional: called once a second
	Print    func(int, string) // optional: where scenario print() goes
	OnAction func(int, string) // optional: see engine.Config
	Tick     time.Duration     // collection period; default 1 s
	Save     time.Duration     // checkpoint period; default 10 s
}

// Progress is what a run reports once a second.
type Progress struct {
	Elapsed, Total time.Duration
	Phase          string // "ramp", "steady", "stopping"
	Users, Want    int
	Last           metrics.Point // the last second
	Requests       int64         // so far
	Errors         int64
	Timeouts       int64
}

// CheckTarget fails when nothing accepts connections at target.
func CheckTarget(target *url.URL, timeout time.Duration) error {
	host := target.Host
	if target.Port() == "" {
		port := "80"
		if target.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(target.Hostname(), port)
	}
	c, err := net.DialTimeout("tcp", host, timeout)
	if err != nil {
		return fmt.Errorf("cannot reach target %s: %v\n  hint: start the server first (e.g. headroom testbed), or fix --target", target, err)
	}
	return c.Close()
}

// Run runs until the duration is over or ctx is done, and returns the
// result (also written to Out). A cancelled ctx gives an "interrupted"
// result with what ran, not an error.
func (b *Bounded) Run(ctx context.Context) (*result.Result, error) {
	if b.Users <= 0 {
		return nil, fmt.Errorf("users must be at least 1, got %d", b.Users)
	}
	if b.Tick <= 0 {
		b.Tick = time.Second
	}
	if b.Save <= 0 {
		b.Save = 10 * time.Second
	}
	if err := CheckTarget(b.Target, 3*time.Second); err != nil {
		return nil, err
	}
	rec := metrics.NewRecorder(0, observer(b.Prom), time.Now)
	eng := engine.New(engine.Config{
		Scenario: b.Scenario, Target: b.Target, Seed: b.Seed, Timeout: b.Timeout, Grace: b.Grace,
		Insecure: b.Insecure, Recorder: rec, Print: b.Print, OnAction: b.OnAction,
	})
	res := b.newResult()
	cpu0 := cpuTime()
	start := time.Now()
	res.StartedAt = start

	interval, ramp, steady, all := metrics.NewSnapshot(), metrics.NewSnapshot(), metrics.NewSnapshot(), metrics.NewSnapshot()
	scratch := metrics.NewStat()
	total := b.Ramp + b.Duration
	ticker := time.NewTicker(min(b.Tick, 100*time.Millisecond))
	defer ticker.Stop()
	nextTick, nextSave := start.Add(b.Tick), start.Add(b.Save)
	status := result.Completed

	collect := func(now time.Time, want int, phase string) {
		interval.Reset()
		rec.Drain(interval)
		all.Merge(interval)
		if interval.Start.Sub(start) >= b.Ramp-b.Tick/2 {
			steady.Merge(interval)
		} else {
			ramp.Merge(interval)
		}
		p := metrics.PointOf(interval, start, eng.Users(), scratch)
		res.Timeline = append(res.Timeline, p)
		if b.Progress != nil && phase != "stopping" {
			tot := all.Total(metrics.Request, scratch)
			b.Progress(Progress{Elapsed: now.Sub(start), Total: total, Phase: phase, Users: eng.Users(), Want: want,
				Last: p, Requests: tot.Count, Errors: tot.Errors, Timeouts: tot.Timeouts})
		}
	}

loop:
	for {
		select {
		case <-ctx.Done():
			status = result.Interrupted
			break loop
		case now := <-ticker.C:
			el := now.Sub(start)
			if el >= total {
				break loop
			}
			want := b.Users
			phase := "steady"
			if el < b.Ramp {
				want = int(math.Ceil(float64(b.Users) * el.Seconds() / b.Ramp.Seconds()))
				phase = "ramp"
			}
			eng.SetUsers(want)
			if b.Prom != nil {
				b.Prom.SetUsers(eng.Users())
			}
			if !now.Before(nextTick) {
				collect(now, want, phase)
				nextTick = nextTick.Add(b.Tick)
			}
			if b.Out != "" && !now.Before(nextSave) {
				b.finish(res, steady, ramp, result.Running, eng, cpu0)
				_ = result.Write(b.Out, res, steady) // a failed checkpoint is retried at the next one and at the end
				nextSave = nextSave.Add(b.Save)
			}
		}
	}
	if b.Progress != nil {
		b.Progress(Progress{Elapsed: time.Since(start), Total: total, Phase: "stopping", Users: eng.Users()})
	}
	eng.Stop()
	if b.Prom != nil {
		b.Prom.SetUsers(0)
	}
	collect(time.Now(), 0, "stopping")
	b.finish(res, steady, ramp, status, eng, cpu0)
	if status == result.Interrupted && steady.Start.IsZero() {
		res.Notes = append(res.Notes, "interrupted during the ramp: the measured window is empty; ramp_totals has what ran")
	}
	if b.Out != "" {
		if err := result.Write(b.Out, res, steady); err != nil {
			return res, err
		}
	}
	return res, nil
}

func observer(p *metrics.Prom) metrics.Observer {
	if p == nil {
		return nil
	}
	return p
}

func (b *Bounded) newResult() *result.Result {
	host, _ := os.Hostname()
	r := &result.Result{
		Kind: "run", Headroom: b.Version,
		Config: result.Config{
			Command: b.Command, Scenario: b.Scenario.Path, ScenarioHash: b.Scenario.Hash, Target: b.Target.String(),
			Users: b.Users, RampS: b.Ramp.Seconds(), DurationS: b.Duration.Seconds(), Seed: b.Seed,
			TimeoutS: b.Timeout.Seconds(), GraceS: b.Grace.Seconds(), Think: b.Scenario.ThinkSrc,
			Connections: "per-user keep-alive",
		},
		Generator: result.Generator{Host: host, GOMAXPROCS: runtime.GOMAXPROCS(0)},
	}
	for _, a := range b.Scenario.Actions {
		r.Config.Actions = append(r.Config.Actions, result.ActionWeight{Name: a.Name, Weight: a.Weight})
	}
	return r
}

// finish fills the figures of res from the snapshots.
func (b *Bounded) finish(res *result.Result, steady, ramp *metrics.Snapshot, status string, eng *engine.Engine, cpu0 time.Duration) {
	now := time.Now()
	res.Status, res.EndedAt = status, now
	win := steady.End.Sub(steady.Start)
	if !steady.Start.IsZero() {
		res.Window = result.Window{Start: steady.Start.Sub(res.StartedAt).Seconds(), End: steady.End.Sub(res.StartedAt).Seconds(), Seconds: win.Seconds()}
	}
	scratch := metrics.NewStat()
	res.Totals = steady.Total(metrics.Request, scratch).Summarize("all requests", win)
	res.RampTotals = ramp.Total(metrics.Request, scratch).Summarize("ramp", ramp.End.Sub(ramp.Start))
	res.Requests = steady.Summaries(metrics.Request, win)
	res.Actions = steady.Summaries(metrics.Action, win)

	g := &res.Generator
	cpu := cpuTime() - cpu0
	g.CPUSeconds = cpu.Seconds()
	if el := now.Sub(res.StartedAt).Seconds(); el > 0 {
		g.CPUPercent = 100 * cpu.Seconds() / el
	}
	g.LateWakeups = eng.Late()
	g.PeakRSSMB = peakRSSMB()
	actions := int64(0)
	for _, a := range res.Actions {
		actions += a.Count
	}
	// Late wake-ups happen now and then on any shared machine; one in
	// twenty actions starting late means users are off their schedule.
	g.Overloaded = g.CPUPercent > 90*float64(g.GOMAXPROCS) || (actions > 100 && g.LateWakeups*20 > actions)
	res.Notes = nil
	if g.Overloaded {
		res.Notes = append(res.Notes, fmt.Sprintf("the generator was overloaded (CPU %.0f%% of %d cores, %d late wake-ups): latencies may be headroom's, not the target's",
			g.CPUPercent, g.GOMAXPROCS, g.LateWakeups))
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func peakRSSMB() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024 // Linux reports KiB
}
