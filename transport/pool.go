package transport

import (
	"context"
	"sync"
)

// Pool is a set of keep-alive connections to the target that many clients
// share (Options.Pool), as a service's HTTP client or a load balancer's
// makes: the open model's many arrivals over few connections. A request
// to the target takes the connection that came back last (it is the least
// likely to have been closed by the server while idle), or dials a new one
// while fewer than the pool's size are open, or else waits for one to come
// back; the wait is in the request's latency and apart in Response.Queued.
// A client's requests elsewhere, and a user's cookies and headers, stay
// the client's own. Safe for concurrent use.
type Pool struct {
	size int
	mu   sync.Mutex
	idle []*connection // most recently given back last
	open int           // connections open or being dialed
	wake chan struct{} // closed (and replaced) when a connection comes back or goes
	shut bool
}

// NewPool returns a pool of at most size connections (at least 1).
func NewPool(size int) *Pool {
	return &Pool{size: max(size, 1), wake: make(chan struct{})}
}

// Size is the most connections the pool opens.
func (p *Pool) Size() int { return p.size }

// Open is how many connections are open or being dialed now.
func (p *Pool) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
}

// take returns an idle connection, or else reserves a place for a new one
// (dial true: the caller dials, and gives the place back with gone if
// that fails), or else waits until one of those is possible or ctx ends;
// waited says it did.
func (p *Pool) take(ctx context.Context) (conn *connection, dial, waited bool, err error) {
	for ; ; waited = true {
		p.mu.Lock()
		if n := len(p.idle); n > 0 {
			conn = p.idle[n-1]
			p.idle[n-1] = nil
			p.idle = p.idle[:n-1]
			p.mu.Unlock()
			return conn, false, waited, nil
		}
		if p.open < p.size && !p.shut {
			p.open++
			p.mu.Unlock()
			return nil, true, waited, nil
		}
		wake := p.wake
		p.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, false, true, ctx.Err()
		}
	}
}

// put gives a connection back, for the next request to take.
func (p *Pool) put(conn *connection) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shut {
		p.open--
		conn.Close()
		return
	}
	p.idle = append(p.idle, conn)
	p.signal()
}

// gone frees the place of a connection that was closed (or never dialed).
func (p *Pool) gone() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open--
	p.signal()
}

// signal wakes every waiter to look again. Under p.mu.
func (p *Pool) signal() {
	close(p.wake)
	p.wake = make(chan struct{})
}

// Close closes the idle connections; those in use are closed as they come
// back. Requests after it wait for a connection until their deadline.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shut = true
	for _, c := range p.idle {
		c.Close()
		p.open--
	}
	p.idle = nil
	p.signal()
}
