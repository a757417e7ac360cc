package engine

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/internal/testing/memhttp"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario"
)

// seenRequest is what the target saw of one request.
type seenRequest struct {
	path, cookie, auth, state, remote string
	at                                time.Time
}

// registerTarget is registerHandler's target on loopback.
func registerTarget(t *testing.T, fail int64) (*url.URL, func() []seenRequest) {
	t.Helper()
	h, seen := registerHandler(fail)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u, seen
}

// registerHandler is a target whose /register fails the first `fail`
// times; /login sets a cookie. It keeps every request it saw.
func registerHandler(fail int64) (http.Handler, func() []seenRequest) {
	var mu sync.Mutex
	var seen []seenRequest
	var registers atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, seenRequest{r.URL.Path, r.Header.Get("Cookie"), r.Header.Get("Authorization"), r.Header.Get("X-State"), r.RemoteAddr, time.Now()})
		mu.Unlock()
		switch r.URL.Path {
		case "/login":
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1"})
		case "/register":
			if registers.Add(1) <= fail {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}
	})
	return h, func() []seenRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]seenRequest(nil), seen...)
	}
}

// A setup that logs in (a cookie), sets a header and state, then fails to
// register.
const registerScenario = `
def setup(user):
    user.http.post("/login", headers={"X-State": str(sorted(user.state.keys()))})
    user.state["token"] = "t1"
    user.http.headers["Authorization"] = "Bearer t1"
    user.http.post("/register")
def a(user):
    user.http.get("/act")
actions = [action("A", a)]
think_time = think.constant("%s")
`

// retryEngine makes an engine of registerScenario with this think time;
// cfg gives the target (and its Dial) and the grace.
func retryEngine(t *testing.T, cfg Config, think string) (*Engine, *metrics.Recorder) {
	t.Helper()
	sc, err := scenario.Load(context.Background(), "e.star", []byte(fmt.Sprintf(registerScenario, think)), scenario.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Scenario, cfg.Seed, cfg.Recorder = sc, 1, metrics.NewRecorder(1, nil, time.Now)
	return New(cfg), cfg.Recorder
}

func TestRetriedSetupStartsFromACleanUser(t *testing.T) {
	target, seen := registerTarget(t, 1)
	e, rec := retryEngine(t, Config{Target: target, Grace: time.Second}, "10ms")
	e.SetUsers(1)
	waitFor(t, "the user past its second setup", func() bool { return e.SetUp() == 1 })
	e.Stop()

	var logins []seenRequest
	for _, r := range seen() {
		if r.path == "/login" {
			logins = append(logins, r)
		}
	}
	if len(logins) != 2 {
		t.Fatalf("the target saw %d logins, want 2 (one failed setup, one retry): %+v", len(logins), seen())
	}
	first, retry := logins[0], logins[1]
	if retry.cookie != "" || retry.auth != "" || retry.state != "[]" {
		t.Errorf("the retried setup's login carried cookie %q, Authorization %q, state keys %s: want none of the failed attempt's",
			retry.cookie, retry.auth, retry.state)
	}
	if retry.remote == first.remote {
		t.Errorf("the retry used the failed attempt's connection (%s), want a new one", first.remote)
	}
	// What the attempt itself set is still sent within it.
	for _, r := range seen() {
		if r.path == "/register" && (r.cookie != "session=s1" || r.auth != "Bearer t1") {
			t.Errorf("register carried cookie %q and Authorization %q, want the attempt's own session=s1 and Bearer t1", r.cookie, r.auth)
		}
	}
	snap := metrics.NewSnapshot()
	rec.Drain(snap)
	if st := snap.Setup.Actions[scenario.SetupAction]; st == nil || st.Count != 2 || st.Errors != 1 {
		t.Errorf("setup: %+v, want 2 attempts, 1 failed", st)
	}
}

// A user cancelled while its setup keeps failing and being retried, each
// time from a new runtime and client, stops at once (run with -race: cancel
// reads what the retries replace). A Stop that waited out the grace (1 min)
// would go far past the 20 s bound; that the backoff's pause is cut, not
// waited out, TestSetupRetriesBackOff checks exactly, in virtual time.
func TestCancelWhileSetupRetries(t *testing.T) {
	target, seen := registerTarget(t, 1<<40)
	e, _ := retryEngine(t, Config{Target: target, Grace: time.Minute}, "0s")
	e.SetUsers(2)
	waitFor(t, "a retry", func() bool { return len(seen()) >= 8 }) // two attempts each: now in a backoff's pause
	start := time.Now()
	e.Abort("test")
	e.Stop()
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("stopping users in their setup retries took %v", el)
	}
	if e.Users() != 0 || e.SetUp() != 0 {
		t.Errorf("after Stop: %d users, %d ever set up; want 0 and 0", e.Users(), e.SetUp())
	}
}

// Failed setups back off: the pause before each retry doubles from the
// think time (at least half a second), up to 30 s, jittered by half either
// way; the retries of a user whose setup keeps failing thin out, and Abort
// cuts the pause.
func TestSetupRetriesBackOff(t *testing.T) {
	for _, c := range []struct {
		think time.Duration
		n     int
		want  time.Duration // at jitter 0.5: the middle
	}{
		{0, 1, 500 * time.Millisecond}, {0, 2, time.Second}, {0, 3, 2 * time.Second},
		{2 * time.Second, 1, 2 * time.Second}, {2 * time.Second, 4, 16 * time.Second}, {2 * time.Second, 5, 30 * time.Second},
		{time.Second, 100, 30 * time.Second}, {time.Minute, 1, 30 * time.Second},
	} {
		if got := setupBackoff(c.think, c.n, 0.5); got != c.want {
			t.Errorf("think %v, retry %d: %v, want %v", c.think, c.n, got, c.want)
		}
		lo, hi := setupBackoff(c.think, c.n, 0), setupBackoff(c.think, c.n, 0.999999)
		if lo != c.want/2 || hi < c.want*3/2-time.Millisecond || hi >= c.want*3/2 {
			t.Errorf("think %v, retry %d: jitter spans [%v, %v], want [%v, %v)", c.think, c.n, lo, hi, c.want/2, c.want*3/2)
		}
	}
	// A user whose setup always fails, against the target in memory in
	// virtual time, where an attempt takes no time: each gap between its
	// attempts is the backoff, within the jitter's span; Abort then ends
	// the user in its pause with no time passing.
	synctest.Test(t, func(t *testing.T) {
		h, seen := registerHandler(1 << 40)
		e, _ := retryEngine(t, Config{Target: &url.URL{Scheme: "http", Host: "target.invalid"}, Dial: memhttp.Dial(t, h), Grace: time.Minute}, "0s")
		e.SetUsers(1)
		time.Sleep(10 * time.Second) // the first attempt within the spread (0.1 s), then pauses of at most 0.75, 1.5 and 3 s
		synctest.Wait()              // the user in its next pause
		var at []time.Time
		for _, r := range seen() {
			if r.path == "/login" {
				at = append(at, r.at)
			}
		}
		if len(at) < 4 {
			t.Fatalf("%d setup attempts in 10 s, want at least 4", len(at))
		}
		for i := 1; i < 4; i++ {
			if gap, lo, hi := at[i].Sub(at[i-1]), setupBackoff(0, i, 0), setupBackoff(0, i, 1); gap < lo || gap >= hi {
				t.Errorf("retry %d came %v after the attempt before, want the backoff, in [%v, %v)", i, gap, lo, hi)
			}
		}
		start := time.Now()
		e.Abort("test")
		e.Stop()
		if el := time.Since(start); el != 0 {
			t.Errorf("Abort and Stop of a user in its backoff's pause took %v, want no time: the pause cut", el)
		}
	})
}

// A user removed while its setup is in flight is cancelled at once, not
// after the grace period, and its login's connection closed: the server
// sees the request end. A controller stepping down from a level whose
// logins overloaded the server leaves it no backlog (issue 31, item 3).
func TestRemovedUserSetupIsCancelledAtOnce(t *testing.T) {
	began, ended := make(chan struct{}, 4), make(chan time.Time, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/login" {
			began <- struct{}{}
			select {
			case <-r.Context().Done(): // the client closed the connection
				ended <- time.Now()
			case <-time.After(30 * time.Second):
			}
		}
	}))
	t.Cleanup(srv.Close)
	target, _ := url.Parse(srv.URL)
	sc, err := scenario.Load(context.Background(), "e.star", []byte(`
def setup(user):
    user.http.post("/login")
def a(user):
    user.http.get("/act")
actions = [action("A", a)]
`), scenario.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	e := New(Config{Scenario: sc, Target: target, Seed: 1, Grace: 20 * time.Second, Recorder: metrics.NewRecorder(1, nil, time.Now)})
	e.SetUsers(1)
	select {
	case <-began:
	case <-time.After(10 * time.Second):
		t.Fatal("the user's login never reached the server")
	}
	removed := time.Now()
	e.SetUsers(0)
	select {
	case at := <-ended:
		// The grace period is 20 s: anything near it would be the old way.
		if d := at.Sub(removed); d > 5*time.Second {
			t.Errorf("the login ended %v after the user was removed, want at once", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the removed user's login was still in flight 15 s later (grace 20 s): not cancelled at once")
	}
	e.Stop()
	if e.Users() != 0 || e.SetUp() != 0 {
		t.Errorf("after Stop: %d users, %d set up; want 0 and 0", e.Users(), e.SetUp())
	}
}

// A user whose setup keeps failing retries it SetupRetries times, then
// gives up: recorded once, never set up, still one of the engine's users
// until removed; negative SetupRetries never retries. In virtual time.
func TestSetupRetriesAreCapped(t *testing.T) {
	sc, err := scenario.Load(context.Background(), "f.star", []byte(`
def setup(user):
    fail("the server says no")
def a(user):
    pass
actions = [action("A", a)]
`), scenario.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse("http://127.0.0.1:1") // no request is sent
	for _, c := range []struct{ retries, attempts int64 }{{3, 4}, {-1, 1}, {0, 1 + DefaultSetupRetries}} {
		synctest.Test(t, func(t *testing.T) {
			rec := metrics.NewRecorder(1, nil, time.Now)
			e := New(Config{Scenario: sc, Target: target, Seed: 1, Recorder: rec, SetupRetries: int(c.retries)})
			e.SetUsers(1)
			time.Sleep(time.Hour) // past every backoff
			synctest.Wait()
			users, ready := e.Users(), e.Ready()
			e.Stop()
			snap := metrics.NewSnapshot()
			rec.Drain(snap)
			attempts, gaveUp := snap.Setup.Actions[scenario.SetupAction], snap.Setup.Actions[scenario.GaveUpAction]
			if attempts == nil || attempts.Count != c.attempts || gaveUp == nil || gaveUp.Count != 1 || users != 1 || ready != 0 {
				t.Errorf("SetupRetries %d: attempts %v, gave up %v, %d users, %d ready; want %d attempts, 1 gave up, 1 user, 0 ready",
					c.retries, attempts, gaveUp, users, ready, c.attempts)
			}
		})
	}
}
