package agents

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// What a coordinator gives a peer before it has proved the token
// (docs/AGENTS.md, "Security"): anyone who can reach its port gets this
// much, and no more. A message is at most maxMessage (~1 MiB) either way,
// so at most maxHandshakes of them are held at once before the token is
// proved: ~64 MiB, whatever the peers send.
const (
	// HandshakeTimeout bounds a stream's handshake: a peer that has not
	// proved the token by then is cut off.
	HandshakeTimeout = 10 * time.Second
	// maxHandshakes bounds the streams in their handshake at once; past
	// it a new stream is refused at once, Unavailable (an agent retries).
	maxHandshakes = 64
	// maxConns bounds the connections open at once; past it a new one is
	// closed as it is accepted. A run of 75 agents holds 75.
	maxConns = 1024
	// maxStreams bounds the streams of one connection: an agent holds one
	// (two while it resumes on the same connection).
	maxStreams = 8
	// idleConn: a connection with no stream for this long is closed.
	idleConn = time.Minute
)

// guard holds the coordinator's bounds before authentication.
type guard struct {
	slots   chan struct{} // one per stream in its handshake
	timeout time.Duration
}

// handshakeTimeout is HandshakeTimeout; tests shorten it.
var handshakeTimeout = HandshakeTimeout

func newGuard() *guard {
	return &guard{slots: make(chan struct{}, maxHandshakes), timeout: handshakeTimeout}
}

// serve runs join on s within the bounds: a handshake slot, and the
// deadline for join to call proved (the token proved). Past the deadline
// serve returns, which ends the stream, and so join's wait for a frame.
func (g *guard) serve(s Stream, join func(s Stream, proved func()) error) error {
	select {
	case g.slots <- struct{}{}:
	default:
		return status.Error(codes.Unavailable, "agents: too many handshakes at once; try again") // Retry's word
	}
	var once sync.Once
	release := func() { once.Do(func() { <-g.slots }) }
	defer release()
	ok := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- join(s, func() { release(); close(ok) }) }()
	t := time.NewTimer(g.timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-ok:
		return <-done
	case <-t.C:
		select {
		case <-ok: // proved just now
			return <-done
		default:
		}
		return status.Errorf(codes.DeadlineExceeded, "agents: no handshake within %v", g.timeout)
	}
}

// serverOptions are the coordinator's gRPC options: frames, and the
// bounds on connections and streams.
func serverOptions() []grpc.ServerOption {
	return append(ServerOptions(),
		grpc.MaxConcurrentStreams(maxStreams),
		grpc.ConnectionTimeout(HandshakeTimeout), // TLS and HTTP/2's own handshake
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: idleConn}))
}

// capped is a listener that closes connections past maxConns as it
// accepts them, rather than leave them waiting (which would hold an
// agent's dial as long as someone else held the slots).
type capped struct {
	net.Listener
	open atomic.Int64
	max  int64
}

func (l *capped) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			c.Close()
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

type countedConn struct {
	net.Conn
	l    *capped
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}
