// Package memlimit is --max-memory: the watch that samples headroom's
// memory and reports the first sample past the limit, and the error that
// says so. The runner watches the process that runs users; so does each
// agent, and its coordinator stops the run with the agent's error.
package memlimit

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Error is why headroom stopped a run whose memory passed its limit:
// what it used, and what the users were doing then.
type Error struct {
	Used, Limit uint64        // bytes
	At          time.Duration // since the run (or the agent's part of it) started
	Users       int
	Doing       map[string]int // users by the action (or setup) they were running
	Agent       string         // the agent whose memory it was, e.g. "agent 1 (local-1)"; "": this process
}

func (e *Error) Error() string {
	on := ""
	if e.Agent != "" {
		on = " on " + e.Agent
	}
	return fmt.Sprintf("headroom's memory%s reached %s, past its limit of %s (--max-memory), %v into the run",
		on, mib(e.Used), mib(e.Limit), e.At.Round(100*time.Millisecond))
}

// Note is the result's note: what happened and what likely used the memory.
func (e *Error) Note() string {
	var doing []string
	for name, n := range e.Doing {
		doing = append(doing, fmt.Sprintf("%s (%d)", name, n))
	}
	sort.Strings(doing)
	what := "no user was running an action then"
	if len(doing) > 0 {
		what = "the users running an action then: " + strings.Join(doing, ", ")
	}
	users := fmt.Sprintf("%d users", e.Users)
	if e.Users == 1 {
		users = "1 user"
	}
	return fmt.Sprintf("headroom stopped the run: %v, with %s; %s. "+
		"Likely a scenario that builds large values (a string or list grown in a loop, response bodies kept in user.state); "+
		"raise --max-memory only if the users need that much", e, users, what)
}

func mib(b uint64) string { return fmt.Sprintf("%d MiB", b>>20) }

// Watch samples headroom's memory every so often and reports the first
// sample past the limit.
type Watch struct {
	Limit  uint64        // bytes
	Every  time.Duration // between samples; 0: 20 ms
	Sample func() uint64 // bytes in use; nil: Used
}

// Run samples until ctx ends or a sample passes the limit; it then calls
// over with the sample and returns.
func (w Watch) Run(ctx context.Context, over func(used uint64)) {
	if w.Every <= 0 {
		w.Every = 20 * time.Millisecond
	}
	if w.Sample == nil {
		w.Sample = Used
	}
	t := time.NewTicker(w.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if used := w.Sample(); used > w.Limit {
				over(used)
				return
			}
		}
	}
}

// Used is the memory the Go runtime holds from the system, as its own
// memory limit counts it (debug.SetMemoryLimit): everything mapped but
// what was returned. runtime/metrics reads it without stopping the world.
func Used() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}

// Apply readies the process for a watch of limit: what it no longer uses
// goes back to the system first (init's garbage, a data file read and
// parsed: the soft limit would reclaim it only eventually, and the
// watch's first samples would count it against the users), then the Go
// runtime's soft limit is set to limit, so the collector works harder
// near it, and the collector is paced by the allocation rate (GCFloor)
// up to FloorPerUser for each of users(), an eighth of limit and
// MaxFloor. The returned function restores both.
func Apply(limit uint64, users func() int) (restore func()) {
	debug.FreeOSMemory()
	prev := debug.SetMemoryLimit(-1)
	debug.SetMemoryLimit(min(prev, int64(min(limit, 1<<62))))
	stop := GCFloor(func() uint64 { return min(uint64(max(users(), 0))*FloorPerUser, limit/8, MaxFloor) })
	return func() {
		stop()
		debug.SetMemoryLimit(prev)
	}
}

// The most Apply lets GCFloor let be allocated between cycles beyond
// GOGC's own goal: for each user (a few users reading large bodies keep
// GOGC's own goal, and so the memory their bodies need), and in all;
// FloorSpan is the allocation it aims to let through.
const (
	FloorPerUser = 64 << 10
	MaxFloor     = 128 << 20
	FloorSpan    = 15 * time.Second
)

// GCFloor paces the collector by the allocation rate until the returned
// stop. Go's default (GOGC=100) lets the heap grow by its live part: a
// small heap that allocates fast, a load generator's at a few thousand
// users (~40 MB live at 2,000 chat users, ~9 MB allocated a second), is
// then collected every few seconds, and each cycle costs its whole mark
// (~20 ms of CPU there, every ~4 s: 7% of headroom's CPU at that load).
// Every second GCFloor sets GOGC so that the next goal is the live heap
// plus FloorSpan of the last second's allocation, at most most(), when
// that is more than GOGC's own goal. Users who hold connections and allocate
// nothing (once ramped up) keep GOGC's own goal, and so their memory;
// a soft memory limit (Apply) still bounds the heap. A GOGC set in the
// environment is the user's, and left alone.
// One process paces once: a second GCFloor (two runs in one process, as
// in tests) leaves the first's alone.
func GCFloor(most func() uint64) (stop func()) {
	if os.Getenv("GOGC") != "" || !pacing.CompareAndSwap(false, true) {
		return func() {}
	}
	p := newPacer(most)
	if p.base < 0 { // off
		pacing.Store(false)
		return func() {}
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				p.apply(now)
			}
		}
	}()
	return sync.OnceFunc(func() {
		close(done)
		<-exited
		debug.SetGCPercent(p.base)
		pacing.Store(false)
	})
}

// pacing is whether a GCFloor runs.
var pacing atomic.Bool

// pacer is GCFloor's state: GOGC as the environment set it, as it is now,
// and the allocation at the last tick.
type pacer struct {
	most          func() uint64 // the floor's bound
	base, percent int
	allocs        uint64
	at            time.Time
}

func newPacer(most func() uint64) *pacer {
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	allocs, _ := heapStats()
	return &pacer{most: most, base: base, percent: base, allocs: allocs, at: time.Now()}
}

// apply sets GOGC for the allocation since the last tick, now.
func (p *pacer) apply(now time.Time) {
	allocs, live := heapStats()
	span := now.Sub(p.at)
	if span <= 0 {
		return
	}
	rate := float64(allocs-p.allocs) / span.Seconds()
	p.allocs, p.at = allocs, now
	floor := uint64(min(rate*FloorSpan.Seconds(), float64(p.most())))
	if pc := floorPercent(live, floor, p.base); pc != p.percent {
		debug.SetGCPercent(pc)
		p.percent = pc
	}
}

// floorPercent is the GOGC whose goal is floor bytes past the live heap,
// for live bytes the collector scans (GOGC is a share of those), or base
// if that gives more. It is at most the GOGC whose minimum heap (the
// runtime's 4 MiB at GOGC=100, scaled by GOGC) is floor: a live heap
// smaller than that is collected at the minimum.
func floorPercent(live, floor uint64, base int) int {
	p := floor * 100 / max(live, 1)
	p = min(p, floor*100/minHeap, math.MaxInt32)
	if p <= uint64(base) {
		return base
	}
	return int(p)
}

// minHeap is the Go runtime's minimum heap goal at GOGC=100.
const minHeap = 4 << 20

// heapStats reads the bytes allocated on the heap since the process
// started, and what GOGC is a share of: the heap the last cycle of the
// collector marked live, the goroutines' stacks and the globals.
func heapStats() (allocs, scanned uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/live:bytes"},
		{Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64() + s[2].Value.Uint64() + s[3].Value.Uint64()
}
