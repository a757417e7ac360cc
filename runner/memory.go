package runner

import (
	"context"
	"fmt"
	"runtime/debug"
	"runtime/metrics"
	"sort"
	"strings"
	"time"
)

// MemoryError is why headroom stopped a run whose memory passed
// Common.MaxMemory: what it used, and what the users were doing then.
type MemoryError struct {
	Used, Limit uint64        // bytes
	At          time.Duration // since the run started
	Users       int
	Doing       map[string]int // users by the action (or setup) they were running
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("headroom's memory reached %s, past its limit of %s (--max-memory), %v into the run",
		mib(e.Used), mib(e.Limit), e.At.Round(100*time.Millisecond))
}

// note is the result's note: what happened and what likely used the memory.
func (e *MemoryError) note() string {
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

// memWatch samples headroom's memory every so often and reports the
// first sample past the limit.
type memWatch struct {
	limit  uint64        // bytes
	every  time.Duration // between samples
	sample func() uint64 // bytes in use
}

// run samples until ctx ends or a sample passes the limit; it then calls
// over with the sample and returns.
func (m memWatch) run(ctx context.Context, over func(used uint64)) {
	t := time.NewTicker(m.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if used := m.sample(); used > m.limit {
				over(used)
				return
			}
		}
	}
}

// goMemory is the memory the Go runtime holds from the system, as its own
// memory limit counts it (debug.SetMemoryLimit): everything mapped but
// what was returned. runtime/metrics reads it without stopping the world.
func goMemory() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}

// watchMemory starts the memory watch of the run, if it has a limit:
// the Go runtime's soft limit is set to it too, so the collector works
// harder near it; past it, every user is cancelled at once and the run
// stops with a MemoryError. The returned function restores the soft limit.
func (s *session) watchMemory() (restore func()) {
	limit := s.c.MaxMemory
	if limit == 0 {
		return func() {}
	}
	// What init left for the collector (a data file read and parsed, the
	// scenario compiled) goes back to the system first: the soft limit
	// would reclaim it only eventually, and the watch's first samples
	// would count it against the users.
	debug.FreeOSMemory()
	prev := debug.SetMemoryLimit(-1)
	debug.SetMemoryLimit(min(prev, int64(min(limit, 1<<62))))
	w := memWatch{limit: limit, every: s.c.memEvery, sample: s.c.memSample}
	if w.every <= 0 {
		w.every = 20 * time.Millisecond
	}
	if w.sample == nil {
		w.sample = goMemory
	}
	go func() {
		defer s.recover("the memory watch")
		w.run(s.ctx, func(used uint64) {
			e := &MemoryError{Used: used, Limit: limit, At: time.Since(s.start), Users: s.eng.Users(), Doing: s.eng.Doing()}
			s.eng.Abort("headroom's memory passed --max-memory")
			s.abort(e)
		})
	}()
	return func() { debug.SetMemoryLimit(prev) }
}
