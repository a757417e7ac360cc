package engine

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario"
	"github.com/mccutchen/go-httpbin/v2/httpbin"
)

// setup makes an engine of src against go-httpbin on loopback, whose
// /delay/N takes up to 2 minutes (the tests' slow requests are far longer
// than their bounds). The sync.Map holds the ids of the users that began an
// action; the count, the requests to /delay/ that reached the server.
func setup(t *testing.T, src string, grace time.Duration) (*Engine, *metrics.Recorder, *sync.Map, *atomic.Int64) {
	t.Helper()
	delays := &atomic.Int64{}
	bin := httpbin.New(httpbin.WithMaxDuration(2 * time.Minute)).Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/delay/") {
			delays.Add(1)
		}
		bin.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	sc, err := scenario.Load(context.Background(), "e.star", []byte(src), scenario.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rec := metrics.NewRecorder(2, nil, time.Now)
	seen := &sync.Map{} // user id -> true once it acted
	e := New(Config{Scenario: sc, Target: u, Seed: 1, Grace: grace, Recorder: rec, Spread: -1,
		OnAction: func(user int, _ string) { seen.Store(user, true) }})
	return e, rec, seen, delays
}

// waitFor polls cond until it holds. Its deadline only ends a test whose
// event never comes: what it waits for takes milliseconds, but can take
// seconds on a busy machine under -race.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRemovalTakesTheNewestUsers(t *testing.T) {
	e, _, _, _ := setup(t, "def a(user):\n    user.http.get('/get')\nactions = [action('A', a)]\nthink_time = think.constant('20ms')\n", time.Second)
	e.SetUsers(5)
	e.SetUsers(2)
	e.mu.Lock()
	ids := []int{e.users[0].id, e.users[1].id}
	e.mu.Unlock()
	if ids[0] != 1 || ids[1] != 2 {
		t.Errorf("after removing 3 of 5, users %v remain; want the first two, 1 and 2", ids)
	}
	e.SetUsers(3)
	e.mu.Lock()
	newest := e.users[2].id
	e.mu.Unlock()
	if newest != 6 {
		t.Errorf("a re-added user got id %d, want a fresh 6 (ids are never reused, so streams stay distinct)", newest)
	}
	e.Stop()
	if e.Users() != 0 {
		t.Errorf("%d users after Stop", e.Users())
	}
}

// TestRemovedUserFinishesItsRequestWithinGrace: Stop lets the request in
// flight end, then ends the user at once. The margin is by construction: a
// Stop that waited out the grace (1 min) or the think time (1 h) would take a
// minute or more; a correct one takes the 0.3 s request, far under 20 s.
func TestRemovedUserFinishesItsRequestWithinGrace(t *testing.T) {
	e, rec, _, delays := setup(t, "def a(user):\n    user.http.get('/delay/0.3', name='slow')\nactions = [action('A', a)]\nthink_time = think.constant('1h')\n", time.Minute)
	e.SetUsers(1)
	waitFor(t, "the request to reach the server", func() bool { return delays.Load() == 1 })
	start := time.Now()
	e.Stop()
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("Stop took %v for a 0.3 s request with a 1 min grace and 1 h think time", el)
	}
	snap := metrics.NewSnapshot()
	rec.Drain(snap)
	st := snap.Requests["slow"]
	if st == nil || st.Count != 1 || st.Canceled != 0 || st.Errors != 0 {
		t.Fatalf("the request in flight should complete normally: %+v", st)
	}
}

// TestRemovedUserIsCanceledAfterGrace: a request still in flight at the
// grace's end is cancelled. Stop cannot end before its 200 ms grace (a
// timer); a Stop that waited for the 60 s request instead would go far
// past the 20 s bound.
func TestRemovedUserIsCanceledAfterGrace(t *testing.T) {
	e, rec, _, delays := setup(t, "def a(user):\n    user.http.get('/delay/60', name='slow')\nactions = [action('A', a)]\n", 200*time.Millisecond)
	e.SetUsers(1)
	waitFor(t, "the request to reach the server", func() bool { return delays.Load() == 1 })
	start := time.Now()
	e.Stop()
	if el := time.Since(start); el < 150*time.Millisecond || el > 20*time.Second {
		t.Errorf("Stop took %v; want the 200 ms grace, then a prompt cancel (not the 60 s request)", el)
	}
	snap := metrics.NewSnapshot()
	rec.Drain(snap)
	st := snap.Requests["slow"]
	if st == nil || st.Canceled != 1 || st.Count != 0 || st.Errors != 0 || st.Timeouts != 0 {
		t.Fatalf("a cancelled request must be counted as canceled only: %+v", st)
	}
	if a := snap.Actions["A"]; a == nil || a.Canceled != 1 || a.Errors != 0 {
		t.Errorf("the cancelled action: %+v", a)
	}
}

// TestUserStates: users that think stop at once. A Stop that waited out
// the grace (1 min) or the think time (1 h) would go far past the 20 s bound;
// a correct one takes milliseconds.
func TestUserStates(t *testing.T) {
	e, _, seen, _ := setup(t, "def setup(user):\n    pass\ndef a(user):\n    user.http.get('/get')\nactions = [action('A', a)]\nthink_time = think.constant('1h')\n", time.Minute)
	e.SetUsers(3)
	waitFor(t, "three users acting", func() bool {
		n := 0
		seen.Range(func(_, _ any) bool { n++; return true })
		return n == 3
	})
	waitFor(t, "three users thinking", func() bool { return e.States()[Thinking] == 3 })
	start := time.Now()
	e.Stop() // thinking users stop at once: nothing to finish
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("stopping thinking users took %v", el)
	}
}

// A panic in a user's goroutine (here in OnAction, headroom's code) is
// recovered: the engine reports it, that user is done, the others go on
// and stop as usual.
func TestPanicInAUserIsRecovered(t *testing.T) {
	srv := httptest.NewServer(httpbin.New().Handler())
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	sc, err := scenario.Load(context.Background(), "e.star", []byte("def a(user):\n    user.http.get('/get')\nactions = [action('A', a)]\nthink_time = think.constant('10ms')\n"), scenario.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var acted sync.Map
	got := make(chan *PanicError, 10)
	e := New(Config{Scenario: sc, Target: u, Seed: 1, Grace: time.Second, Recorder: metrics.NewRecorder(2, nil, time.Now),
		OnAction: func(user int, _ string) {
			if user == 2 {
				panic("boom")
			}
			acted.Store(user, true)
		},
		OnPanic: func(p *PanicError) { got <- p }})
	e.SetUsers(3)
	var p *PanicError
	select {
	case p = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("no panic reported")
	}
	if p.Where != "user 2" || p.Value != "boom" || !strings.Contains(string(p.Stack), "engine_test.go") || e.Panicked() != p {
		t.Errorf("panic reported as %q %v, stack:\n%s", p.Where, p.Value, p.Stack)
	}
	waitFor(t, "users 1 and 3 to go on acting", func() bool {
		_, a := acted.Load(1)
		_, b := acted.Load(3)
		return a && b
	})
	if n := e.States()[Done]; n != 1 {
		t.Errorf("%d users done, want the one that panicked", n)
	}
	e.Stop()
}

// Credentials in the target URL are sent as basic authentication to the
// target, unless a request brings its own Authorization.
func TestTargetCredentialsAreSent(t *testing.T) {
	got := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.URL.Path + " " + r.Header.Get("Authorization")
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("ann", "s3cret")
	sc, err := scenario.Load(context.Background(), "e.star", []byte(`
def a(user):
    user.http.get('/plain')
    user.http.get('/own', headers={'Authorization': 'Bearer t'})
actions = [action('A', a)]
think_time = think.constant('1h')
`), scenario.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	e := New(Config{Scenario: sc, Target: u, Seed: 1, Grace: time.Second, Recorder: metrics.NewRecorder(1, nil, time.Now), Spread: -1})
	e.SetUsers(1)
	defer e.Stop()
	for _, want := range []string{"/plain Basic YW5uOnMzY3JldA==", "/own Bearer t"} {
		select {
		case h := <-got:
			if h != want {
				t.Errorf("server saw %q, want %q", h, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no request")
		}
	}
}

func TestSetUsersByAddsInBatches(t *testing.T) {
	e, _, _, _ := setup(t, "def a(user):\n    pass\nactions = [action('A', a)]\nthink_time = think.constant('1h')\n", time.Second)
	for i, want := range []int{100, 200, 250, 250} {
		if got := e.SetUsersBy(250, 100); got != want || e.Users() != want {
			t.Fatalf("call %d: %d users (Users %d), want %d", i+1, got, e.Users(), want)
		}
	}
	if got := e.SetUsersBy(10, 1); got != 10 {
		t.Errorf("removal is not batched: %d users left, want 10", got)
	}
	e.Stop()
}

// Abort cancels every user at once, whether it waits on a request, runs a
// long Starlark loop or is already stopping, and adds no user after it. A
// user Abort missed would end with the grace (1 min) or its 60 s request,
// far past the 20 s bound; Abort and Stop take milliseconds.
func TestAbortCancelsEveryUserAtOnce(t *testing.T) {
	e, rec, seen, _ := setup(t, `
def slow(user):
    user.http.get('/delay/60', name='slow')
def spin(user):
    n = 0
    for i in range(100000000):
        n += i
actions = [action('Slow', slow), action('Spin', spin)]
`, time.Minute)
	e.SetUsers(6)
	waitFor(t, "every user acting", func() bool {
		n := 0
		seen.Range(func(_, _ any) bool { n++; return true })
		return n == 6
	})
	waitFor(t, "every user inside its action", func() bool { d := e.Doing(); return d["Slow"]+d["Spin"] == 6 })
	if d := e.Doing(); d["Slow"]+d["Spin"] != 6 {
		t.Errorf("Doing = %v, want 6 users in Slow or Spin", d)
	}
	e.SetUsers(4) // two of them stopping, with a 1 min grace
	start := time.Now()
	e.Abort("memory")
	e.SetUsers(10)
	if n := e.Users(); n != 4 {
		t.Errorf("%d users after Abort and SetUsers(10), want the 4 running", n)
	}
	e.Stop()
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("Abort and Stop took %v", el)
	}
	snap := metrics.NewSnapshot()
	rec.Drain(snap)
	c := int64(0)
	for _, st := range snap.Actions {
		c += st.Canceled
	}
	if c < 6 {
		t.Errorf("%d actions canceled, want every one in flight (6)", c)
	}
}
