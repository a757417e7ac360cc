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
	size    int
	mu      sync.Mutex
	idle    []*connection // most recently given back last
	open    int           // connections open or being dialed
	waiting []chan grant  // requests waiting for a connection, oldest first
	shut    bool
}

// grant is what a waiting request is handed: a connection given back, or
// the place of one that closed, to dial.
type grant struct {
	conn *connection
	dial bool
}

// NewPool returns a pool of at most size connections (at least 1).
func NewPool(size int) *Pool { return &Pool{size: max(size, 1)} }

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
// that fails), or else waits, in turn (first come, first served: a client
// that gives a connection back does not take it again ahead of those
// waiting), until one is handed to it or ctx ends; waited says it waited.
func (p *Pool) take(ctx context.Context) (conn *connection, dial, waited bool, err error) {
	p.mu.Lock()
	if len(p.waiting) == 0 {
		if n := len(p.idle); n > 0 {
			conn = p.idle[n-1]
			p.idle[n-1] = nil
			p.idle = p.idle[:n-1]
			p.mu.Unlock()
			return conn, false, false, nil
		}
		if p.open < p.size && !p.shut {
			p.open++
			p.mu.Unlock()
			return nil, true, false, nil
		}
	}
	ch := make(chan grant, 1)
	p.waiting = append(p.waiting, ch)
	p.mu.Unlock()
	select {
	case g := <-ch:
		return g.conn, g.dial, true, nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	for i, w := range p.waiting {
		if w == ch {
			p.waiting = append(p.waiting[:i], p.waiting[i+1:]...)
			p.mu.Unlock()
			return nil, false, true, ctx.Err()
		}
	}
	p.mu.Unlock()
	// Handed something as the wait ended: pass it on.
	if g := <-ch; g.conn != nil {
		p.put(g.conn)
	} else {
		p.gone()
	}
	return nil, false, true, ctx.Err()
}

// next takes the oldest waiting request off the queue, if any. Under p.mu.
func (p *Pool) next() chan grant {
	if len(p.waiting) == 0 {
		return nil
	}
	ch := p.waiting[0]
	p.waiting[0] = nil
	p.waiting = p.waiting[1:]
	return ch
}

// put gives a connection back: to the oldest waiting request, or to the
// idle ones.
func (p *Pool) put(conn *connection) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.shut:
		p.open--
		conn.Close()
	case len(p.waiting) > 0:
		p.next() <- grant{conn: conn}
	default:
		p.idle = append(p.idle, conn)
	}
}

// gone frees the place of a connection that was closed (or never
// dialed): the oldest waiting request dials in its place.
func (p *Pool) gone() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open--
	if len(p.waiting) > 0 && !p.shut {
		p.open++
		p.next() <- grant{dial: true}
	}
}

// Close closes the idle connections; those in use are closed as they come
// back. Requests after it, and those waiting, wait until their deadline.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shut = true
	for _, c := range p.idle {
		c.Close()
		p.open--
	}
	p.idle = nil
}
