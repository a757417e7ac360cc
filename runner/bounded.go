// Package runner drives runs: it owns the clock of a run, tells the engine
// how many users to run, collects the metrics every second and writes the
// result. A bounded run is a fixed number of users, reached by a linear
// ramp, held for a duration; a ceiling run lets a controller choose the
// user count from health checks.
package runner

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/server"
)

// Bounded configures a bounded run.
type Bounded struct {
	Common
	Users    int           // > 0
	Ramp     time.Duration // users are added linearly over the ramp
	Duration time.Duration // how long all users are held after the ramp; the measured window
	Progress func(Progress)
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

// Run runs until the duration is over or ctx is done, and returns the
// result (also written to Out). A cancelled ctx gives an "interrupted"
// result with what ran, not an error.
func (b *Bounded) Run(ctx context.Context) (*result.Result, error) {
	if b.Users <= 0 {
		return nil, fmt.Errorf("users must be at least 1, got %d", b.Users)
	}
	s, err := b.open("run")
	if err != nil {
		return nil, err
	}
	res := s.res
	res.Config.Users, res.Config.RampS, res.Config.DurationS = b.Users, b.Ramp.Seconds(), b.Duration.Seconds()
	ramp, steady := metrics.NewSnapshot(), metrics.NewSnapshot()
	total := b.Ramp + b.Duration
	nextTick, nextSave := s.start.Add(b.Tick), s.start.Add(b.Save)
	var from *server.Mark // the server's state when the measured window began
	marked, prev := false, s.start

	tick := func(now time.Time, want int, phase string) {
		p := s.collect()
		if s.interval.Start.Sub(s.start) >= b.Ramp-b.Tick/2 {
			if !marked { // the window began at the previous tick, with its scrape
				from, marked = s.mark(prev), true
			}
			steady.Merge(s.interval)
		} else {
			ramp.Merge(s.interval)
		}
		s.scrape(ctx, now)
		prev = now
		if b.Progress != nil {
			tot := s.all.Total(metrics.Request, s.scratch)
			b.Progress(Progress{Elapsed: now.Sub(s.start), Total: total, Phase: phase, Users: s.eng.Users(), Want: want,
				Last: p, Requests: tot.Count, Errors: tot.Errors, Timeouts: tot.Timeouts})
		}
	}
	interrupted := ticks(ctx, min(b.Tick, 100*time.Millisecond), func(now time.Time) bool {
		el := now.Sub(s.start)
		if el >= total {
			return false
		}
		want, phase := b.Users, "steady"
		if el < b.Ramp {
			want = int(math.Ceil(float64(b.Users) * el.Seconds() / b.Ramp.Seconds()))
			phase = "ramp"
		}
		s.setUsers(want)
		if !now.Before(nextTick) {
			tick(now, want, phase)
			nextTick = nextTick.Add(b.Tick)
		}
		if !now.Before(nextSave) {
			b.finish(s, steady, ramp, result.Running)
			s.server(from, s.mark(now))
			s.checkpoint(func(w result.Writer, dir string) error { return w.Write(dir, res, steady) })
			nextSave = nextSave.Add(b.Save)
		}
		return true
	})
	status := result.Completed
	if interrupted {
		status = result.Interrupted
	}
	if b.Progress != nil {
		b.Progress(Progress{Elapsed: time.Since(s.start), Total: total, Phase: "stopping", Users: s.eng.Users()})
	}
	s.stop()
	steady.Merge(s.interval) // what finished while stopping was started in the window
	b.finish(s, steady, ramp, status)
	s.server(from, s.mark(time.Now()))
	if status == result.Interrupted && steady.Start.IsZero() {
		res.Notes = append(res.Notes, "interrupted during the ramp: the measured window is empty; ramp_totals has what ran")
	}
	return res, s.save(func(w result.Writer, dir string) error { return w.Write(dir, res, steady) })
}

// finish fills the figures of the result from the snapshots.
func (b *Bounded) finish(s *session, steady, ramp *metrics.Snapshot, status string) {
	res := s.res
	res.Status, res.EndedAt = status, time.Now()
	win := steady.End.Sub(steady.Start)
	if !steady.Start.IsZero() {
		res.Window = result.Window{Start: steady.Start.Sub(res.StartedAt).Seconds(), End: steady.End.Sub(res.StartedAt).Seconds(), Seconds: win.Seconds()}
	}
	scratch := metrics.NewStat()
	res.Totals = steady.Total(metrics.Request, scratch).Summarize("all requests", win)
	res.RampTotals = ramp.Total(metrics.Request, scratch).Summarize("ramp", ramp.End.Sub(ramp.Start))
	res.Requests = steady.Summaries(metrics.Request, win)
	res.Actions = steady.Summaries(metrics.Action, win)
	res.Notes = nil
	if note := s.generator(sumCounts(res.Actions)); note != "" {
		res.Notes = append(res.Notes, note)
	}
	if note := s.namesNote(); note != "" {
		res.Notes = append(res.Notes, note)
	}
}
