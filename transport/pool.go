package transport

import (
	"context"
	"sync"
)

// Pool is a set of keep-alive connections to the target that many clients
// share (Options.Pool), as a service's HTTP client or a load balancer's
// makes: the open model's many arrivals over few connections.
//
// An HTTP/1.1 connection carries one request at a time: a request to the
// target takes the one that came back last (the least likely to have been
// closed by the server while idle), or dials a new one while fewer than
// the pool's size are open, or else waits for one to come back.
//
// An HTTP/2 connection carries many clients' requests at once, each a
// stream, as a gRPC channel or a proxy's upstream does: a request takes an
// HTTP/2 connection with no stream open, or else dials while the pool has
// room, or else takes the one with the fewest streams open below the
// server's SETTINGS_MAX_CONCURRENT_STREAMS, or else waits for a stream to
// end. One that can take no more (a GOAWAY) gives its place to a new one
// and closes when its last stream ends.
//
// A wait is in the request's latency and apart in Response.Queued. A
// client's requests elsewhere, and a user's cookies and headers, stay the
// client's own. Safe for concurrent use.
type Pool struct {
	size    int
	mu      sync.Mutex
	idle    []*connection // HTTP/1.1 ones given back, most recently last
	mux     []*connection // HTTP/2 ones, shared whatever their streams
	open    int           // connections open or being dialed (not those retired)
	waiting []chan grant  // requests waiting for a connection, oldest first
	shut    bool
}

// grant is what a waiting request is handed: a connection (given back, or
// an HTTP/2 one's stream), or the place of one that closed, to dial.
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

// take returns a connection (an idle HTTP/1.1 one, or a stream of an
// HTTP/2 one), or else reserves a place for a new one (dial true: the
// caller dials, then shares it if it speaks HTTP/2, and gives the place
// back with gone if the dial fails), or else waits, in turn (first come,
// first served: a client that gives a connection back does not take it
// again ahead of those waiting), until one is handed to it or ctx ends;
// waited says it waited.
func (p *Pool) take(ctx context.Context) (conn *connection, dial, waited bool, err error) {
	p.mu.Lock()
	if len(p.waiting) == 0 {
		if conn = p.stream(false); conn != nil {
			p.mu.Unlock()
			return conn, false, false, nil
		}
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
		if conn = p.stream(true); conn != nil {
			p.mu.Unlock()
			return conn, false, false, nil
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

// stream opens a stream on the HTTP/2 connection with the fewest open,
// below its server's limit; with busy false, only on one with none open.
// Connections that can take no new stream are retired on the way. Under
// p.mu.
func (p *Pool) stream(busy bool) *connection {
	var best *connection
	for i := 0; i < len(p.mux); i++ {
		c := p.mux[i]
		if !c.h2.CanTakeNewRequest() {
			p.retire(c)
			i--
			continue
		}
		if (best == nil || c.streams < best.streams) && (c.streams == 0 || busy && c.streams < maxStreams(c)) {
			best = c
		}
	}
	if best != nil {
		best.streams++
	}
	return best
}

// maxStreams is how many streams the server lets conn open at once:
// x/net's 100 until its SETTINGS say otherwise.
func maxStreams(conn *connection) int {
	if n := conn.h2.State().MaxConcurrentStreams; n > 0 {
		return int(min(n, 1<<20))
	}
	return 100
}

// share adds conn, just dialed by a request that took a place for it, to
// the HTTP/2 connections shared (its first stream the dialer's), and hands
// streams on it to those waiting.
func (p *Pool) share(conn *connection) {
	p.mu.Lock()
	defer p.mu.Unlock()
	conn.streams, conn.muxed = 1, true
	p.mux = append(p.mux, conn)
	p.handOut(conn)
}

// handOut gives those waiting streams on conn while it has room. Under
// p.mu.
func (p *Pool) handOut(conn *connection) {
	for len(p.waiting) > 0 && conn.streams < maxStreams(conn) {
		conn.streams++
		p.next() <- grant{conn: conn}
	}
}

// retire takes an HTTP/2 connection that can take no new stream out of
// the shared ones: its place goes to a new one (to the oldest waiting, to
// dial), and it closes when its last stream ends. Under p.mu.
func (p *Pool) retire(conn *connection) {
	for i, c := range p.mux {
		if c == conn {
			p.mux = append(p.mux[:i], p.mux[i+1:]...)
			break
		}
	}
	conn.muxed = false
	if conn.streams == 0 {
		conn.Close()
	}
	p.freed()
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

// put gives a connection back: an HTTP/1.1 one to the oldest waiting
// request, or to the idle ones; an HTTP/2 one's stream to the oldest
// waiting, or closed.
func (p *Pool) put(conn *connection) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if conn.h2 != nil {
		conn.streams--
		switch {
		case !conn.muxed: // retired, or gone
			if conn.streams == 0 {
				conn.Close()
			}
		case p.shut || !conn.h2.CanTakeNewRequest():
			p.retire(conn)
		default:
			p.handOut(conn)
		}
		return
	}
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

// fail closes an HTTP/2 connection on which a request failed with the
// connection (not its stream alone, nor refused), and frees its place
// once: the first of the requests on it that fail retires it.
func (p *Pool) fail(conn *connection) {
	p.mu.Lock()
	defer p.mu.Unlock()
	conn.streams--
	if conn.muxed {
		p.retire(conn)
	}
	conn.Close()
}

// gone frees the place of an HTTP/1.1 connection that was closed (nil:
// one never dialed): the oldest waiting request dials in its place. An
// HTTP/2 one's is freed as it is retired (put, fail).
func (p *Pool) gone() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.freed()
}

// freed gives a place that was freed to the oldest waiting request, to
// dial. Under p.mu.
func (p *Pool) freed() {
	p.open--
	if len(p.waiting) > 0 && !p.shut {
		p.open++
		p.next() <- grant{dial: true}
	}
}

// Close closes the idle connections and the HTTP/2 ones with no stream
// open; those in use are closed as they come back. Requests after it, and
// those waiting, wait until their deadline.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shut = true
	for _, c := range p.idle {
		c.Close()
		p.open--
	}
	p.idle = nil
	for _, c := range append([]*connection(nil), p.mux...) {
		p.retire(c)
	}
}
