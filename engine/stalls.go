package engine

import (
	"sync"
	"time"
)

// stallLog keeps the generator's recent stalls, as its users saw them: a
// pause's timer that fired more than replayAfter late says the process
// could not run that user from when it was due until it woke (vu.wait).
// The users whose actions were in flight meanwhile ask it how much of an
// action the generator lost (vu.think). Safe for concurrent use; taken
// only on a late wake and after a stretched action, never on the quiet
// path.
type stallLog struct {
	mu   sync.Mutex
	at   [stallsKept]stall // a ring: at[next-1] the latest
	next int
	n    int // stalls kept, at most stallsKept
}

// stall is one stretch of time the generator was behind, in Unix ns.
type stall struct{ from, to int64 }

// stallsKept is how many stalls a stallLog keeps: those of the last
// stallSettle and more, however busy the machine (a stall is at least
// replayAfter long; those that touch are one).
const stallsKept = 32

// saw records that the generator was behind from from to to: a timer due
// at from fired at to. One stall wakes many users, each with its own
// from: one that touches the latest stall widens it.
func (l *stallLog) saw(from, to time.Time) {
	f, t := from.UnixNano(), to.UnixNano()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n > 0 {
		last := &l.at[(l.next+stallsKept-1)%stallsKept]
		if f <= last.to && t >= last.from {
			last.from, last.to = min(last.from, f), max(last.to, t)
			return
		}
	}
	l.at[l.next] = stall{f, t}
	l.next = (l.next + 1) % stallsKept
	l.n = min(l.n+1, stallsKept)
}

// within is how much of [from, to] the generator was stalled, as far as
// its users have seen (at most to - from).
func (l *stallLog) within(from, to time.Time) time.Duration {
	f, t := from.UnixNano(), to.UnixNano()
	l.mu.Lock()
	defer l.mu.Unlock()
	var sum int64
	for i := range l.n {
		s := l.at[i]
		sum += max(min(s.to, t)-max(s.from, f), 0)
	}
	return time.Duration(min(sum, max(t-f, 0)))
}

// stallSettle is how long a user whose action took more than replayAfter
// longer than its last waits before it asks the stallLog how much of the
// action a stall took: the users that saw that stall (woken with it,
// in any order) have told it by then. It is the first part of the
// user's pause, not an extra one.
const stallSettle = 100 * time.Millisecond
