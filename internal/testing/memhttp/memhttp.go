// Package memhttp serves an http.Handler over in-memory pipes, for tests
// that run headroom's real clients in virtual time (testing/synctest):
// runner.Common.Dial and engine.Config.Dial take its Dial. For tests only.
package memhttp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
)

// Dial serves h to the connections it makes, for a test in virtual
// time (testing/synctest): each connection is a net.Pipe whose other end
// an http.Server serves, so the users' requests and WebSockets go
// through headroom's real clients, and the scrape through net/http's,
// with no socket in between (a goroutine blocked on a socket would stop
// the bubble's clock). What h sleeps, the bubble's clock counts. The
// server is closed when the test ends. Call it in a synctest bubble.
func Dial(t testing.TB, h http.Handler) func(ctx context.Context, network, addr string) (net.Conn, error) {
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

// pipeListener hands the server ends of Dial's pipes to its server.
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
