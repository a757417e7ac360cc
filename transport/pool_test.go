package transport

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/internal/testing/hostile"
	"github.com/headroom-dev/headroom/internal/testing/memhttp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
)

// inMemory serves h over memhttp's in-memory pipes, for a test in
// virtual time: the options that reach it, and a count of the connections
// it was dialed. Call it in a synctest bubble.
func inMemory(t *testing.T, h http.Handler) (Options, *atomic.Int64) {
	dial, conns := memhttp.Dial(t, h), new(atomic.Int64)
	return Options{Target: &url.URL{Scheme: "http", Host: "target.invalid"},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conns.Add(1)
			return dial(ctx, network, addr)
		}}, conns
}

// TestPoolSharesFewConnectionsAmongManyClients: 20 clients, each with
// its own cookies, send 10 requests each at once through a pool of 3: the
// server sees at most 3 connections, every request succeeds, the waits
// for a connection are counted in Queued (and in Latency), in turn (a
// client that gives a connection back does not take it again ahead of
// those waiting, so most requests wait a little rather than a few for
// long), and each client's cookies stay its own. In virtual time, against
// the server in memory: a client's own work takes no time, so how many
// requests wait is the pool's doing alone, not a busy machine's (on
// loopback, clients slowed down could find a connection free).
func TestPoolSharesFewConnectionsAmongManyClients(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var inFlight, most atomic.Int64
		opt, conns := inMemory(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			if r.URL.Path == "/login" {
				http.SetCookie(w, &http.Cookie{Name: "who", Value: r.URL.Query().Get("u")})
				return
			}
			if c, err := r.Cookie("who"); err != nil || c.Value != r.URL.Query().Get("u") {
				http.Error(w, "cookie of another client", http.StatusConflict)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}))
		pool := NewPool(3)
		defer pool.Close()
		opt.Pool = pool
		var wg sync.WaitGroup
		var queued, waited atomic.Int64
		for i := range 20 {
			wg.Go(func() {
				c := NewClient(opt)
				defer c.Close()
				user := string(rune('a' + i))
				var r Response
				c.Do(&Request{Method: "GET", URL: "/login?u=" + user}, &r)
				for range 10 {
					c.Do(&Request{Method: "GET", URL: "/x?u=" + user}, &r)
					if r.Err != nil || r.Status != 200 {
						t.Errorf("client %s: status %d, %v", user, r.Status, r.Err)
					}
					if r.Queued > r.Latency {
						t.Errorf("queued %v is more than the latency %v", r.Queued, r.Latency)
					}
					queued.Add(int64(r.Queued))
					if r.Queued > 0 {
						waited.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if n := conns.Load(); n > 3 || n < 1 {
			t.Errorf("the server saw %d connections, want 1 to 3 (the pool's size)", n)
		}
		if m := most.Load(); m > 3 {
			t.Errorf("%d requests were at the server at once through a pool of 3", m)
		}
		if n := waited.Load(); n < 100 {
			t.Errorf("%d of 200 requests of 5 ms from 20 clients on 3 connections waited for one (%v in all): want most, in turn", n, time.Duration(queued.Load()))
		}
		if pool.Open() > 3 {
			t.Errorf("pool open %d", pool.Open())
		}
	})
}

// TestPoolWaitEndsAtTheDeadlineOrCancel: with the pool's one connection
// held by a slow request, another client's request waits for it and
// times out at its own deadline; a third one waiting is cut by Cancel at
// once. The held connection then comes back and serves the next request.
// In virtual time, so the wait is the deadline's to the 1% the client may
// be late, and Cancel takes no time at all.
func TestPoolWaitEndsAtTheDeadlineOrCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		opt, conns := inMemory(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				<-release
			}
		}))
		pool := NewPool(1)
		defer pool.Close()
		opt.Pool = pool
		slow := NewClient(opt)
		defer slow.Close()
		done := make(chan Response, 1)
		go func() {
			var r Response
			slow.Do(&Request{Method: "GET", URL: "/slow"}, &r)
			done <- r
		}()
		synctest.Wait() // the slow request holds the connection, at the server
		if pool.Open() != 1 {
			t.Fatalf("the slow request holds %d connections, want the pool's one", pool.Open())
		}

		wopt := opt
		wopt.Timeout = 100 * time.Millisecond
		waiter := NewClient(wopt)
		defer waiter.Close()
		var r Response
		waiter.Do(&Request{Method: "GET", URL: "/x"}, &r)
		if !r.Timeout || r.Queued < 100*time.Millisecond || r.Queued > 101*time.Millisecond || r.BytesOut != 0 {
			t.Errorf("waiting for the pool's one busy connection: timeout %v, queued %v, sent %d bytes; want a timeout after 100 ms, nothing sent", r.Timeout, r.Queued, r.BytesOut)
		}

		cut := NewClient(opt)
		defer cut.Close()
		got := make(chan Response, 1)
		go func() {
			var r Response
			cut.Do(&Request{Method: "GET", URL: "/x"}, &r)
			got <- r
		}()
		synctest.Wait() // cut waits for the pool
		t0 := time.Now()
		cut.Cancel()
		// A Cancel that did not reach the wait would leave it blocked: the
		// bubble's deadlock, or the client's timeout, fails the test.
		if r := <-got; !r.Canceled || time.Since(t0) != 0 {
			t.Errorf("Cancel of a request waiting for the pool: canceled %v after %v", r.Canceled, time.Since(t0))
		}

		close(release)
		if r := <-done; r.Err != nil {
			t.Fatalf("the slow request: %v", r.Err)
		}
		next := NewClient(opt)
		defer next.Close()
		next.Do(&Request{Method: "GET", URL: "/x"}, &r)
		if r.Err != nil || r.Queued != 0 || conns.Load() != 1 {
			t.Errorf("after the slow request: %v, queued %v, %d connections; want the one connection back, at once", r.Err, r.Queued, conns.Load())
		}
	})
}

// TestPoolReplacesAConnectionTheServerClosed: a response with
// Connection: close takes its connection out of the pool, and the next
// request dials a new one in its place.
func TestPoolReplacesAConnectionTheServerClosed(t *testing.T) {
	u, conns := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bye" {
			w.Header().Set("Connection", "close")
		}
	}))
	pool := NewPool(1)
	defer pool.Close()
	c := NewClient(Options{Target: u, Pool: pool})
	for _, path := range []string{"/x", "/bye", "/x", "/x"} {
		var r Response
		c.Do(&Request{Method: "GET", URL: path}, &r)
		if r.Err != nil || r.Status != 200 {
			t.Fatalf("%s: %d %v", path, r.Status, r.Err)
		}
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2: the first until /bye, then one more", n)
	}
	if pool.Open() != 1 {
		t.Errorf("pool open %d, want 1", pool.Open())
	}
}

// TestPoolMultiplexesHTTP2, in virtual time, over HTTP/2 (h2c) on
// in-memory connections: a pool's connections carry many clients'
// requests at once, each a stream. 40 clients send a request each at once
// through a pool of 2, to a server that answers none until all 40 are
// there: they are, on 2 connections. Then, where the server allows 3
// streams a connection, 12 clients' requests of 20 ms are at the server 6
// at most, the rest wait in the pool (Queued), and all succeed. Last, a
// user's Cancel ends its own stream, not the connection it shares.
func TestPoolMultiplexesHTTP2(t *testing.T) {
	// x/net/http2's server keeps channels in a sync.Pool (errChanPool): one
	// made in this bubble and taken by a later test's server outside it kills
	// the test binary ("select on synctest channel from outside bubble",
	// golang/go#75674; once in about six runs of the package beside two busy
	// loops). Two collections after the bubble empty every sync.Pool.
	defer func() { runtime.GC(); runtime.GC() }()
	synctest.Test(t, func(t *testing.T) {
		var inFlight, most atomic.Int64
		all, hung := make(chan struct{}), make(chan struct{}, 1)
		var once sync.Once
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			switch r.URL.Path {
			case "/hang":
				hung <- struct{}{}
				<-r.Context().Done()
				return
			case "/together":
				if n == 40 {
					once.Do(func() { close(all) })
				}
				select {
				case <-all:
				case <-time.After(10 * time.Second):
					http.Error(w, "not all 40 requests came at once", http.StatusGatewayTimeout)
					return
				}
			default:
				time.Sleep(20 * time.Millisecond)
			}
			w.Write([]byte(r.Proto))
		})
		set, _ := Config{H2C: true}.Settings()
		// serve serves handler over h2c, at most streams streams a
		// connection (0: x/net's default), and counts its connections.
		serve := func(streams uint32) (Options, *atomic.Int64) {
			dial := memhttp.Dial(t, h2c.NewHandler(handler, &http2.Server{MaxConcurrentStreams: streams}))
			conns := new(atomic.Int64)
			return Options{Target: &url.URL{Scheme: "http", Host: "target.invalid"}, Settings: set, Timeout: 20 * time.Second,
				Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
					conns.Add(1)
					return dial(ctx, network, addr)
				}}, conns
		}

		at := func(opt Options, clients, each int, path string) (queued int) {
			t.Helper()
			pool := NewPool(2)
			defer pool.Close()
			opt.Pool = pool
			var wg sync.WaitGroup
			var waited, bytesIn, bodies atomic.Int64
			for range clients {
				wg.Go(func() {
					c := NewClient(opt)
					defer c.Close()
					for range each {
						var r Response
						c.Do(&Request{Method: "GET", URL: path}, &r)
						if r.Err != nil || r.Status != 200 || !r.HTTP2 {
							t.Errorf("GET %s: %d %q, HTTP2 %v, err %v", path, r.Status, r.Body, r.HTTP2, r.Err)
						}
						bytesIn.Add(r.BytesIn)
						bodies.Add(int64(len(r.Body)))
						if r.Queued > 0 {
							waited.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if n := pool.Open(); n != 2 {
				t.Errorf("%s: %d connections open in the pool of 2 after the requests, want 2", path, n)
			}
			if n := pool.inUse(); n != 0 {
				t.Errorf("%s: %d streams still taken after the requests", path, n)
			}
			// Each request is given what moved on its connection since the
			// last one there ended: the shares are rough, the total is not.
			if in, b := bytesIn.Load(), bodies.Load(); in < b+int64(clients*each)*9 {
				t.Errorf("%s: %d bytes in for %d bytes of bodies: want those and a frame head each at least", path, in, b)
			}
			return int(waited.Load())
		}

		opt, conns := serve(0)
		at(opt, 40, 1, "/together")
		if n, m := conns.Load(), most.Load(); n != 2 || m != 40 {
			t.Errorf("40 clients through a pool of 2: %d connections, %d requests at the server at once; want 2 and 40", n, m)
		}

		opt, conns = serve(3)
		most.Store(0)
		waited := at(opt, 12, 5, "/slow")
		if n, m := conns.Load(), most.Load(); n != 2 || m > 6 {
			t.Errorf("12 clients through a pool of 2 connections of 3 streams: %d connections, %d requests at the server at once; want 2, at most 6", n, m)
		}
		if waited == 0 {
			t.Error("12 clients on 6 streams: no request waited in the pool for one")
		}

		opt, conns = serve(3)
		pool := NewPool(1)
		defer pool.Close()
		opt.Pool = pool
		a, b := NewClient(opt), NewClient(opt)
		defer a.Close()
		defer b.Close()
		done := make(chan Response)
		go func() {
			var r Response
			a.Do(&Request{Method: "GET", URL: "/hang"}, &r)
			done <- r
		}()
		<-hung
		a.Cancel()
		if r := <-done; !r.Canceled {
			t.Errorf("a canceled stream: canceled %v, err %v", r.Canceled, r.Err)
		}
		var r Response
		if b.Do(&Request{Method: "GET", URL: "/slow"}, &r); r.Err != nil || conns.Load() != 1 {
			t.Errorf("after another user's Cancel on the shared connection: %d, err %v, %d connections (want the one)", r.Status, r.Err, conns.Load())
		}
	})
}

// TestPoolGoAwayLeavesEarlierStreams: two users' streams share a pooled
// HTTP/2 connection; the server sends a GOAWAY that names the first stream
// as the last it processes. The second stream, refused, goes again on a
// new connection; the first is answered on the old one, which is not
// closed under it, and then closes.
func TestPoolGoAwayLeavesEarlierStreams(t *testing.T) {
	srv, err := hostile.Start(hostile.H2GoAwayBetween("ok"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	pool := NewPool(1)
	defer pool.Close()
	set, _ := Config{H2C: true}.Settings()
	rs := make([]Response, 2)
	var wg sync.WaitGroup
	for i := range rs {
		wg.Go(func() {
			c := NewClient(Options{Target: srv.URL, Pool: pool, Settings: set, Timeout: 5 * time.Second})
			defer c.Close()
			c.Do(&Request{Method: "GET", URL: "/"}, &rs[i])
		})
	}
	wg.Wait()
	for i, r := range rs {
		if r.Err != nil || r.Status != 200 || string(r.Body) != "ok" {
			t.Errorf("user %d: %d %q, err %v; want 200 \"ok\" (the first on the old connection, the second sent again)", i, r.Status, r.Body, r.Err)
		}
	}
	if n, open, taken := srv.Conns.Load(), pool.Open(), pool.inUse(); n != 2 || open != 1 || taken != 0 {
		t.Errorf("%d connections made, %d open in the pool, %d streams taken; want 2 (one retired by the GOAWAY), 1, 0", n, open, taken)
	}
}
