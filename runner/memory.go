package runner

import (
	"time"

	"github.com/headroom-dev/headroom/internal/memlimit"
)

// MemoryError is why headroom stopped a run whose memory passed
// Common.MaxMemory: this process's, or an agent's (its Agent says which).
type MemoryError = memlimit.Error

// watchMemory starts the memory watch of the run, if it has a limit:
// the Go runtime's soft limit is set to it too, so the collector works
// harder near it; past it, every user is cancelled at once and the run
// stops with a MemoryError. The returned function restores the soft limit.
func (s *session) watchMemory() (restore func()) {
	limit := s.c.MaxMemory
	if limit == 0 {
		return func() {}
	}
	restore = memlimit.Apply(limit, s.eng.Users)
	w := memlimit.Watch{Limit: limit, Every: s.c.memEvery, Sample: s.c.memSample}
	go func() {
		defer s.recover("the memory watch")
		w.Run(s.ctx, func(used uint64) {
			e := &MemoryError{Used: used, Limit: limit, At: time.Since(s.start), Users: s.eng.Users(), Doing: s.eng.Doing()}
			s.eng.Abort("headroom's memory passed --max-memory")
			s.abort(e)
		})
	}()
	return restore
}
