package transport

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPoolSharesFewConnectionsAmongManyClients: 20 clients, each with
// its own cookies, send 10 requests each at once through a pool of 3: the
// server sees at most 3 connections, every request succeeds, the waits
// for a connection are counted in Queued (and in Latency), in turn (a
// client that gives a connection back does not take it again ahead of
// those waiting, so most requests wait a little rather than a few for
// long), and each client's cookies stay its own.
func TestPoolSharesFewConnectionsAmongManyClients(t *testing.T) {
	var inFlight, most atomic.Int64
	u, conns := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	var wg sync.WaitGroup
	var queued, waited atomic.Int64
	var failed atomic.Int64
	for i := range 20 {
		wg.Go(func() {
			c := NewClient(Options{Target: u, Pool: pool})
			defer c.Close()
			user := string(rune('a' + i))
			var r Response
			c.Do(&Request{Method: "GET", URL: "/login?u=" + user}, &r)
			for range 10 {
				c.Do(&Request{Method: "GET", URL: "/x?u=" + user}, &r)
				if r.Err != nil || r.Status != 200 {
					failed.Add(1)
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
}

// TestPoolWaitEndsAtTheDeadlineOrCancel: with the pool's one connection
// held by a slow request, another client's request waits for it and
// times out at its own deadline; a third one waiting is cut by Cancel at
// once. The held connection then comes back and serves the next request.
func TestPoolWaitEndsAtTheDeadlineOrCancel(t *testing.T) {
	release := make(chan struct{})
	u, conns := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
	}))
	pool := NewPool(1)
	defer pool.Close()
	slow := NewClient(Options{Target: u, Pool: pool})
	done := make(chan Response, 1)
	go func() {
		var r Response
		slow.Do(&Request{Method: "GET", URL: "/slow"}, &r)
		done <- r
	}()
	for pool.Open() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // the slow request holds the connection

	waiter := NewClient(Options{Target: u, Pool: pool, Timeout: 100 * time.Millisecond})
	var r Response
	waiter.Do(&Request{Method: "GET", URL: "/x"}, &r)
	if !r.Timeout || r.Queued < 90*time.Millisecond || r.BytesOut != 0 {
		t.Errorf("waiting for the pool's one busy connection: timeout %v, queued %v, sent %d bytes; want a timeout after ~100 ms, nothing sent", r.Timeout, r.Queued, r.BytesOut)
	}

	cut := NewClient(Options{Target: u, Pool: pool})
	got := make(chan Response, 1)
	go func() {
		var r Response
		cut.Do(&Request{Method: "GET", URL: "/x"}, &r)
		got <- r
	}()
	time.Sleep(20 * time.Millisecond)
	t0 := time.Now()
	cut.Cancel()
	select {
	case r := <-got:
		if !r.Canceled || time.Since(t0) > time.Second {
			t.Errorf("Cancel of a request waiting for the pool: canceled %v after %v", r.Canceled, time.Since(t0))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a request waiting for the pool was not cut by Cancel")
	}

	close(release)
	if r := <-done; r.Err != nil {
		t.Fatalf("the slow request: %v", r.Err)
	}
	next := NewClient(Options{Target: u, Pool: pool})
	next.Do(&Request{Method: "GET", URL: "/x"}, &r)
	if r.Err != nil || r.Queued != 0 || conns.Load() != 1 {
		t.Errorf("after the slow request: %v, queued %v, %d connections; want the one connection back, at once", r.Err, r.Queued, conns.Load())
	}
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
