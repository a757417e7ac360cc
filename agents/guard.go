package agents

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// What a coordinator gives a peer before it has proved the token
// (docs/AGENTS.md, "Security"): anyone who can reach its port gets this
// much, and no more. Connections are bounded by the door (door.go); here,
// streams. A message is at most maxMessage (~1 MiB) either way, and a
// stream in its handshake holds one at a time: one on each stranger
// connection (maxStrangers), and maxHandshakes on connections that proved
// the token, so ~80 MiB at most whatever the peers send.
const (
	// HandshakeTimeout bounds a stream's handshake, and the life of a
	// connection on which no stream has proved the token: a peer that has
	// not proved it by then is cut off.
	HandshakeTimeout = 10 * time.Second
	// maxHandshakes bounds the streams in their handshake at once on
	// connections that proved the token (an agent resuming on the
	// connection it joined on); past it a new one is refused at once,
	// Unavailable (an agent retries).
	maxHandshakes = 16
	// maxStreams bounds the streams of one connection: an agent holds one
	// (two while it resumes on the same connection).
	maxStreams = 8
	// idleConn: a connection with no stream for this long is closed.
	idleConn = time.Minute
)

// guard holds the coordinator's bounds on streams before authentication.
type guard struct {
	slots   chan struct{} // one per stream in its handshake on a proved connection
	timeout time.Duration
}

// handshakeTimeout is HandshakeTimeout; tests shorten it.
var handshakeTimeout = HandshakeTimeout

func newGuard() *guard {
	return &guard{slots: make(chan struct{}, maxHandshakes), timeout: handshakeTimeout}
}

// serve runs join on s, a stream on the connection ctx names (connOf),
// within the bounds: a handshake slot, and the deadline for join to call
// proved (the token proved), which also makes the connection no stranger.
// Past the deadline serve returns, which ends the stream, and so join's
// wait for a frame.
func (g *guard) serve(ctx context.Context, s Stream, join func(s Stream, proved func()) error) error {
	c := connOf(ctx)
	leave, err := g.slot(c)
	if err != nil {
		return err
	}
	var once sync.Once
	release := func() { once.Do(leave) }
	defer release()
	ok := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- join(s, func() {
			if c != nil {
				c.proved()
			}
			release()
			close(ok)
		})
	}()
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

// slot takes a handshake slot for a stream on c: a stranger's own one (a
// stream at a time), or one of g.slots on a connection that proved the
// token, or on none the door knows (nil). Refused: Unavailable, Retry's
// word, as an agent may try again.
func (g *guard) slot(c *conn) (leave func(), err error) {
	if c != nil {
		switch stranger, ok := c.enter(); {
		case ok:
			return c.leave, nil
		case stranger:
			return nil, status.Error(codes.Unavailable, "agents: a handshake is under way on this connection; try again")
		}
	}
	select {
	case g.slots <- struct{}{}:
		return func() { <-g.slots }, nil
	default:
		return nil, status.Error(codes.Unavailable, "agents: too many handshakes at once; try again")
	}
}

// serverOptions are the coordinator's gRPC options: frames, the bounds
// on connections and streams, and d's tagger (each stream told its conn).
func serverOptions(d *door) []grpc.ServerOption {
	return append(ServerOptions(), grpc.StatsHandler(tagger{d}),
		grpc.MaxConcurrentStreams(maxStreams),
		grpc.ConnectionTimeout(HandshakeTimeout), // TLS and HTTP/2's own handshake
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: idleConn}))
}
