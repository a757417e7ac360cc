package runner

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/serverprof"
)

// profiling is a run's capture of the target's CPU profiles (--profile).
type profiling struct {
	cap  *serverprof.Capture
	stop func() // ends the capture and waits for it; the slice in flight is lost
}

// startProfiles begins taking the targets' CPU profiles, for the whole
// run, into the result directory's profiles/ (in memory only when the
// result goes to a file system of a test's). nil without --profile.
func (s *session) startProfiles() *profiling {
	c := s.c
	if len(c.Profile) == 0 {
		return nil
	}
	pc := &serverprof.Capture{Targets: c.Profile, Slice: c.ProfileSlice}
	if c.Warn != nil { // a target's URL may hold credentials; what is said never does
		pc.Warn = func(msg string) { c.Warn(Redact(msg)) }
	}
	if c.Out != "" && c.FS == nil {
		pc.Dir = c.Out
	}
	if c.Dial != nil {
		pc.Client = &http.Client{Transport: &http.Transport{DialContext: c.Dial}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		pc.Run(ctx)
	}()
	return &profiling{cap: pc, stop: func() { cancel(); <-done }}
}

// profilePhase is one phase of a run for the profiles: its name, bounds,
// and what its CPU is counted per (requests, or users set up).
type profilePhase struct {
	name     string
	from, to time.Time
	unit     string
	units    int64
}

// profiles stops the capture and fills res.Profiles: every slice, and
// each target's phases. A phase whose slices do not merge (the server
// came back as another build) is left out with a note.
func (s *session) profiles(p *profiling, phases ...profilePhase) {
	if p == nil {
		return
	}
	p.stop()
	at := func(t time.Time) float64 { return t.Sub(s.start).Seconds() }
	out := &result.Profiles{Targets: RedactAll(p.cap.Targets), SliceS: p.cap.Slice.Seconds(), Slices: []result.ProfileSlice{}}
	for _, sl := range p.cap.Slices() {
		out.Slices = append(out.Slices, result.ProfileSlice{Target: sl.Target, StartS: at(sl.Start), EndS: at(sl.End), File: sl.File, Error: Redact(sl.Err),
			Heap: sl.Heap, HeapError: Redact(sl.HeapErr)})
	}
	for t := range p.cap.Targets {
		for _, ph := range phases {
			got, err := p.cap.Phase(t, ph.name, ph.from, ph.to, profileTop)
			if err != nil {
				s.res.Notes = append(s.res.Notes, Redact(err.Error()))
			}
			if got == nil {
				continue
			}
			if got.Cut > 0 {
				s.res.Notes = append(s.res.Notes, fmt.Sprintf("server CPU profile of %s, target %d: %d stacks deeper than %d frames cut to their %d innermost (a profile of a Go server has 128 at most)",
					ph.name, t+1, got.Cut, serverprof.MaxDepth, serverprof.MaxDepth))
			}
			if got.LeftOut > 0 {
				s.res.Notes = append(s.res.Notes, Redact(fmt.Sprintf("server CPU profile of %s, target %d: %d of its slices left out of the merge (the first: %s); each is in profiles/, for go tool pprof",
					ph.name, t+1, got.LeftOut, got.LeftWhy)))
			}
			rp := result.ProfilePhase{Target: t, Phase: ph.name, StartS: at(ph.from), EndS: at(ph.to), Slices: got.Slices, LeftOut: got.LeftOut,
				ProfiledS: got.Covered.Seconds(), CPUSeconds: got.CPU.Seconds(), Flat: funcs(got.Flat, got.CPU), Cum: funcs(got.Cum, got.CPU), Binary: got.Binary, Flame: got.Flame}
			if rp.ProfiledS > 0 {
				rp.CPUCores = rp.CPUSeconds / rp.ProfiledS
				if span := ph.to.Sub(ph.from).Seconds(); ph.units > 0 && span > 0 {
					// the units over the phase, scaled to the part of it profiled
					rp.PerUnitMs, rp.Unit = 1000*rp.CPUSeconds/(float64(ph.units)*min(rp.ProfiledS/span, 1)), ph.unit
				}
			}
			if h := got.Heap; h != nil {
				rp.Heap = &result.ProfileHeap{AtS: at(h.At), File: h.File, InuseMB: float64(h.Inuse) / 1e6, Top: []result.FuncMem{}}
				for _, f := range h.Top {
					rp.Heap.Top = append(rp.Heap.Top, result.FuncMem{Name: f.Name, MB: float64(f.Bytes) / 1e6, Pc: 100 * float64(f.Bytes) / float64(max(h.Inuse, 1))})
				}
			}
			if p.cap.Dir != "" {
				if rel, err := got.Write(p.cap.Dir); err == nil {
					rp.File = rel
				}
			}
			out.Phases = append(out.Phases, rp)
		}
	}
	s.res.Profiles = out
}

// profileTop is how many functions a phase lists, by flat and by
// cumulative CPU.
const profileTop = 15

func funcs(fs []serverprof.Func, total time.Duration) []result.FuncCPU {
	out := []result.FuncCPU{}
	for _, f := range fs {
		fc := result.FuncCPU{Name: f.Name, FlatS: f.Flat.Seconds(), CumS: f.Cum.Seconds()}
		if total > 0 {
			fc.FlatPc, fc.CumPc = 100*float64(f.Flat)/float64(total), 100*float64(f.Cum)/float64(total)
		}
		out = append(out, fc)
	}
	return out
}

// levelPhases are a step's or a ceiling's phases for the profiles: each
// level over its held (step) or judged (ceiling) seconds, named "level N"
// ("hold N" for a ceiling's hold at its answer); a step level's CPU is
// per request.
func (s *session) levelPhases(res *result.Result) []profilePhase {
	at := func(sec float64) time.Time { return s.start.Add(time.Duration(sec * float64(time.Second))) }
	var out []profilePhase
	seen := map[string]int{}
	name := func(kind string, n int) string {
		base := fmt.Sprintf("%s %d", kind, n)
		seen[base]++
		if k := seen[base]; k > 1 { // a level held again
			return fmt.Sprintf("%s (%d)", base, k)
		}
		return base
	}
	switch {
	case res.Step != nil:
		for _, l := range res.Step.Levels {
			if l.Window.Seconds > 0 {
				out = append(out, profilePhase{name: name("level", l.Users), from: at(l.Window.Start), to: at(l.Window.End), unit: "request", units: l.Totals.Count})
			}
		}
	case res.Ceiling != nil:
		for _, l := range res.Ceiling.Levels {
			from := l.Start
			if l.JudgeStart > 0 {
				from = l.JudgeStart
			}
			kind := "level"
			if l.Hold {
				kind = "hold"
			}
			if l.End > from {
				out = append(out, profilePhase{name: name(kind, l.Users), from: at(from), to: at(l.End)})
			}
		}
	}
	return out
}
