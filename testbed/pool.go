package testbed

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errOverloaded is returned by pool.acquire when every worker is busy and the queue is full.
var errOverloaded = errors.New("overloaded")

// maxCatchUp bounds how far in the past a queued request's service may start (see pool.acquire): the
// lateness of the runtime's timers is made up for, but a worker that fell behind by more than this (a
// starved CPU) does not serve a burst above capacity to catch up.
const maxCatchUp = 10 * time.Millisecond

// pool is the worker pool: at most size requests hold a worker, at most queue wait for one, and they
// are served in arrival order. It is safe for concurrent use.
//
// A free worker is a value in the free channel: the time it became free, or was due to. Handing that
// time from one request to the next is what keeps the pool's throughput at exactly size per service
// time: timers fire late (by about 0.5 ms on a loaded Linux machine), and if each request's service
// started when its goroutine was woken up, that lateness would add up, request after request.
type pool struct {
	free  chan time.Time
	queue int
	now   func() time.Time

	mu      sync.Mutex
	waiting int
}

func newPool(size, queue int, now func() time.Time) *pool {
	p := &pool{free: make(chan time.Time, size), queue: queue, now: now}
	for range size {
		p.free <- time.Time{}
	}
	return p
}

// acquire takes a worker, waiting in the queue if all are busy, and returns when the request's service
// starts: now for a request that found a worker free; for one that waited, the moment its worker was
// due to be free (but not before it arrived, nor more than maxCatchUp ago). That start may thus be a
// little in the past. acquire returns errOverloaded at once if the queue is full, or ctx's error if
// ctx is done first (the request then leaves the queue).
func (p *pool) acquire(ctx context.Context) (time.Time, error) {
	arrived := p.now()
	select {
	case <-p.free:
		return arrived, nil
	default:
	}
	p.mu.Lock()
	if p.waiting >= p.queue {
		p.mu.Unlock()
		return time.Time{}, errOverloaded
	}
	p.waiting++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.waiting--
		p.mu.Unlock()
	}()
	select {
	case freeAt := <-p.free:
		return latest(freeAt, arrived, p.now().Add(-maxCatchUp)), nil
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// release gives back a worker taken by acquire; freeAt is when it was due to be free (the end of the
// service time), or now for a request cut short.
func (p *pool) release(freeAt time.Time) { p.free <- freeAt }

// busy returns the number of workers held.
func (p *pool) busy() int { return cap(p.free) - len(p.free) }

// size returns the number of workers.
func (p *pool) size() int { return cap(p.free) }

// queued returns the number of requests waiting for a worker.
func (p *pool) queued() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiting
}

func latest(t time.Time, more ...time.Time) time.Time {
	for _, u := range more {
		if u.After(t) {
			t = u
		}
	}
	return t
}
