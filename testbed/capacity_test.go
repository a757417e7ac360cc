package testbed

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/internal/testing/memhttp"
)

// GetMe takes 1 ms before Scale, so Scale 10 makes it 10 ms.
const getMe10ms = 10.0

// TestPoolSerialisesRequests is the check over HTTP, through net/http's client and server: two
// workers, 20 concurrent requests of 10 ms each take 10 rounds of 10 ms. In virtual time, served over
// in-memory connections (memhttp), so the model's 100 ms is exact, where on loopback a busy machine
// stretched it (the bound was 90 to 400 ms); three workers would take 70 ms, one 200 ms.
func TestPoolSerialisesRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Workers: 2, Scale: getMe10ms})
		c := inMemory(t, s)
		_, alice := c.signup("alice")
		alice.do("GET", "/api/v4/users/me", nil, nil) // warm a connection

		start := time.Now()
		var wg sync.WaitGroup
		codes := make([]int, 20)
		for i := range codes {
			wg.Go(func() { codes[i], _ = alice.do("GET", "/api/v4/users/me", nil, nil) })
		}
		wg.Wait()
		took := time.Since(start)
		for i, code := range codes {
			if code != http.StatusOK {
				t.Fatalf("request %d: status %d", i, code)
			}
		}
		if took != 100*time.Millisecond {
			t.Errorf("20 requests of 10 ms on 2 workers took %v, want 100 ms", took)
		}
	})
}

// inMemory serves s to a client over memhttp's in-memory connections, for a test in virtual time.
// Call it in a synctest bubble.
func inMemory(t *testing.T, s *Server) *client {
	tr := &http.Transport{DialContext: memhttp.Dial(t, s.Handler()), MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{t: t, base: "http://testbed.invalid", hc: &http.Client{Transport: tr}}
}

// serveTo serves req with h and returns the recorder; it runs in the caller's goroutine.
func serveTo(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// loginInBubble signs up and logs in a user through h, returning its token.
func loginInBubble(t *testing.T, h http.Handler) string {
	t.Helper()
	body := `{"username":"alice","password":"secret"}`
	if rec := serveTo(h, httptest.NewRequest("POST", "/api/v4/users", strings.NewReader(body))); rec.Code != http.StatusCreated {
		t.Fatalf("CreateUser: %d %s", rec.Code, rec.Body)
	}
	body = `{"login_id":"alice","password":"secret"}`
	rec := serveTo(h, httptest.NewRequest("POST", "/api/v4/users/login", strings.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("Login: %d %s", rec.Code, rec.Body)
	}
	return rec.Header().Get("Token")
}

func getMe(token string) *http.Request {
	req := httptest.NewRequest("GET", "/api/v4/users/me", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	return req
}

// TestPoolInVirtualTime checks the model exactly, with synctest's clock: two workers, 20 requests of
// 10 ms arriving at once finish in pairs at 10, 20, ..., 100 ms.
func TestPoolInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Workers: 2, Scale: getMe10ms})
		h := s.Handler()
		tok := loginInBubble(t, h)
		if got := s.ServiceTime("GetMe"); got != 10*time.Millisecond {
			t.Fatalf("ServiceTime(GetMe) = %v, want 10ms", got)
		}

		start := time.Now()
		done := make([]time.Duration, 20)
		var wg sync.WaitGroup
		for i := range done {
			wg.Go(func() {
				if rec := serveTo(h, getMe(tok)); rec.Code != http.StatusOK {
					t.Errorf("request %d: %d %s", i, rec.Code, rec.Body)
				}
				done[i] = time.Since(start)
			})
		}
		synctest.Wait()
		if busy, queued := s.pool.busy(), s.pool.queued(); busy != 2 || queued != 18 {
			t.Fatalf("at t=0: %d busy, %d queued; want 2 and 18", busy, queued)
		}
		wg.Wait()
		count := map[time.Duration]int{}
		for _, d := range done {
			count[d]++
		}
		for k := 1; k <= 10; k++ {
			if at := time.Duration(k) * 10 * time.Millisecond; count[at] != 2 {
				t.Errorf("%d requests finished at %v, want 2 (finish times: %v)", count[at], at, count)
			}
		}
	})
}

// TestQueueOverflow: one worker, a queue of two, five requests at once: one is served, two wait, two
// are answered 503 at once and counted in mattermost_api_time.
func TestQueueOverflow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Workers: 1, Queue: 2, Scale: getMe10ms})
		h := s.Handler()
		tok := loginInBubble(t, h)

		recs := make([]*httptest.ResponseRecorder, 5)
		var wg sync.WaitGroup
		for i := range recs {
			wg.Go(func() { recs[i] = serveTo(h, getMe(tok)) })
		}
		synctest.Wait()
		if busy, queued := s.pool.busy(), s.pool.queued(); busy != 1 || queued != 2 {
			t.Errorf("%d busy and %d queued, want 1 and 2", busy, queued)
		}
		if got := gauge(t, h, "testbed_queue_length"); got != 2 {
			t.Errorf("testbed_queue_length = %v, want 2", got)
		}
		wg.Wait()
		var ok, overloaded int
		for _, rec := range recs {
			switch rec.Code {
			case http.StatusOK:
				ok++
			case http.StatusServiceUnavailable:
				overloaded++
				if body := strings.TrimSpace(rec.Body.String()); body != `{"error":"overloaded"}` {
					t.Errorf("503 body %s", body)
				}
			}
		}
		if ok != 3 || overloaded != 2 {
			t.Errorf("%d OK and %d 503, want 3 and 2", ok, overloaded)
		}
		want := `mattermost_api_time_count{handler="GetMe",method="GET",status_code="503"} 2`
		if text := scrape(t, h); !strings.Contains(text, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	})
}

// TestCancelLeavesQueue: a queued request whose client goes away leaves the queue, and a served one
// gives its worker back at once.
func TestCancelLeavesQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Workers: 1, Queue: 1, Scale: getMe10ms})
		h := s.Handler()
		tok := loginInBubble(t, h)

		ctxA, cancelA := context.WithCancel(t.Context())
		ctxB, cancelB := context.WithCancel(t.Context())
		var recA, recB *httptest.ResponseRecorder
		var wg sync.WaitGroup
		wg.Go(func() { recA = serveTo(h, getMe(tok).WithContext(ctxA)) })
		synctest.Wait()
		wg.Go(func() { recB = serveTo(h, getMe(tok).WithContext(ctxB)) })
		synctest.Wait()
		if s.pool.busy() != 1 || s.pool.queued() != 1 {
			t.Fatalf("%d busy, %d queued; want 1 and 1", s.pool.busy(), s.pool.queued())
		}
		cancelB()
		synctest.Wait()
		if s.pool.queued() != 0 {
			t.Fatalf("the cancelled request is still queued")
		}
		cancelA()
		synctest.Wait()
		if s.pool.busy() != 0 {
			t.Fatalf("the cancelled request still holds its worker")
		}
		wg.Wait()
		if recA.Body.Len() != 0 || recB.Body.Len() != 0 {
			t.Errorf("cancelled requests got bodies %q and %q", recA.Body, recB.Body)
		}
		if rec := serveTo(h, getMe(tok)); rec.Code != http.StatusOK {
			t.Errorf("after the cancellations: %d, want 200", rec.Code)
		}
	})
}
