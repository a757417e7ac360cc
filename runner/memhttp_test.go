package runner

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/headroom-dev/headroom/testbed"
)

// inMemory serves h to Common.Dial's connections for a test in virtual
// time (testing/synctest): each connection is a net.Pipe whose other end
// an http.Server serves, so the users' requests and WebSockets go
// through headroom's real clients, and the scrape through net/http's,
// with no socket in between (a goroutine blocked on a socket would stop
// the bubble's clock). What h sleeps, the bubble's clock counts. The
// server is closed when the test ends. Call it in a synctest bubble.
func inMemory(t *testing.T, h http.Handler) func(ctx context.Context, network, addr string) (net.Conn, error) {
	l := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		client, server := net.Pipe()
		select {
		case l.conns <- server:
			return client, nil
		case <-l.done:
			return nil, net.ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// pipeListener hands the server ends of inMemory's pipes to its server.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, errors.New("closed")
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "testbed.invalid:80" }

// testbedInMemory is the testbed with a capacity model, served in memory:
// the target to give Common, and its Dial. Call it in a synctest bubble.
func testbedInMemory(t *testing.T, cfg testbed.Config) (*testbed.Server, *url.URL, func(context.Context, string, string) (net.Conn, error)) {
	srv := testbed.New(cfg)
	return srv, &url.URL{Scheme: "http", Host: "testbed.invalid"}, inMemory(t, srv.Handler())
}
