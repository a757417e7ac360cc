package engine

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario"
)

// syncTarget is a long-poll server on loopback: POST /login?user=N sets the cookie session=uN; GET
// /sync holds the request for hold (forever when 0) or until the client goes, and answers 401 without
// the user's cookie and token; GET /act counts the acts that arrive while their user's /sync is held;
// POST /register fails its first `fail` calls, once a /sync is held.
type syncTarget struct {
	url                     *url.URL
	hold                    time.Duration
	fail                    int64
	registers               atomic.Int64
	syncs, overlaps, denied atomic.Int64
	mu                      sync.Mutex
	held                    map[string]int // by session
	once                    sync.Once
	firstSync               chan struct{} // closed when a /sync is first held
}

func newSyncTarget(t *testing.T, hold time.Duration, fail int64) *syncTarget {
	t.Helper()
	st := &syncTarget{hold: hold, fail: fail, held: map[string]int{}, firstSync: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(st.serve))
	t.Cleanup(srv.Close)
	st.url, _ = url.Parse(srv.URL)
	return st
}

func (st *syncTarget) serve(w http.ResponseWriter, r *http.Request) {
	session := ""
	if c, err := r.Cookie("session"); err == nil {
		session = c.Value
	}
	switch r.URL.Path {
	case "/login":
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "u" + r.URL.Query().Get("user")})
	case "/register":
		if st.registers.Add(1) <= st.fail {
			select { // the attempt's sync first: it is the one to cut
			case <-st.firstSync:
			case <-r.Context().Done():
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	case "/act":
		st.mu.Lock()
		if st.held[session] > 0 {
			st.overlaps.Add(1)
		}
		st.mu.Unlock()
	case "/sync":
		if session == "" || r.Header.Get("Authorization") != "Bearer "+session {
			st.denied.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		st.syncs.Add(1)
		st.mu.Lock()
		st.held[session]++
		st.mu.Unlock()
		st.once.Do(func() { close(st.firstSync) })
		defer func() {
			st.mu.Lock()
			st.held[session]--
			st.mu.Unlock()
		}()
		var wait <-chan time.Time
		if st.hold > 0 {
			wait = time.After(st.hold)
		}
		select {
		case <-wait:
			w.Write([]byte(`{"next_batch": "n"}`))
		case <-r.Context().Done():
		}
	}
}

// inFlight is how many /sync requests the server holds now.
func (st *syncTarget) inFlight() (n int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, k := range st.held {
		n += k
	}
	return n
}

const syncScenario = `
def sync(user):
    r = user.http.get("/sync?since=" + user.state.get("since", ""), name="GET /sync", long_poll=True, timeout="5m")
    user.state["since"] = r.json()["next_batch"]

def beat(user):
    user.http.put("/presence", name="PUT /presence")

def setup(user):
    user.http.post("/login?user=%d" % user.id)
    user.http.headers["Authorization"] = "Bearer u%d" % user.id
    user.background(sync, name="sync")
    user.every("50ms", beat, name="presence")
    user.http.post("/register")

def act(user):
    user.http.get("/act", name="GET /act")

actions = [action("Act", act)]
think_time = think.constant("20ms")
`

func laneEngine(t *testing.T, target *url.URL, grace time.Duration) (*Engine, *metrics.Recorder) {
	t.Helper()
	sc, err := scenario.Load(context.Background(), "sync.star", []byte(syncScenario), scenario.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rec := metrics.NewRecorder(2, nil, time.Now)
	e := New(Config{Scenario: sc, Target: target, Seed: 1, Grace: grace, Recorder: rec, Spread: -1})
	t.Cleanup(e.Stop) // a test that failed early leaves no lane holding the server
	return e, rec
}

// laneGoroutines counts the goroutines running a background lane.
func laneGoroutines() int {
	buf := make([]byte, 8<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "scenario.(*lane).run(")
}

// TestBackgroundLoopRunsBesideActions: each user's /sync long poll runs in its own lane, with the
// session and token setup got, while the user acts; its calls, and an every lane's requests, are
// recorded under their names.
func TestBackgroundLoopRunsBesideActions(t *testing.T) {
	st := newSyncTarget(t, 100*time.Millisecond, 0)
	e, rec := laneEngine(t, st.url, time.Second)
	e.SetUsers(2)
	snap := metrics.NewSnapshot()
	waitFor(t, "syncs, beats and acts during syncs", func() bool {
		rec.Drain(snap)
		s, b := snap.Actions[scenario.LaneAction("sync")], snap.Requests["PUT /presence"]
		return s != nil && s.Count >= 6 && b != nil && b.Count >= 6 && st.overlaps.Load() >= 4
	})
	e.Stop()
	rec.Drain(snap)
	if n := st.denied.Load(); n > 0 {
		t.Errorf("%d syncs came without the user's cookie and token", n)
	}
	s, b := snap.Actions[scenario.LaneAction("sync")], snap.Actions[scenario.LaneAction("presence")]
	if s.Errors+s.Timeouts != 0 || b.Errors+b.Timeouts != 0 {
		t.Errorf("lane calls failed: sync %v, presence %v", s.Messages, b.Messages)
	}
	if s.NoRequest != 0 || s.Count > st.syncs.Load() {
		t.Errorf("%d sync calls (%d without a request) for %d syncs served", s.Count, s.NoRequest, st.syncs.Load())
	}
	if a := snap.Actions["Act"]; a == nil || a.Errors != 0 {
		t.Errorf("acts: %+v", a)
	}
	waitFor(t, "no lane goroutine left after Stop", func() bool { return laneGoroutines() == 0 })
}

// TestStopCutsALongPollInFlight: the run's end cuts each user's long poll at once (the server would hold
// it forever), records it as cancelled, and Stop returns with no lane left. A Stop that waited out the
// grace (1 min) or the poll's timeout (5 min) would go far past the 20 s bound; a correct one takes
// milliseconds.
func TestStopCutsALongPollInFlight(t *testing.T) {
	st := newSyncTarget(t, 0, 0)
	e, rec := laneEngine(t, st.url, time.Minute)
	e.SetUsers(2)
	waitFor(t, "both users' syncs held", func() bool { return st.inFlight() == 2 })
	start := time.Now()
	e.Stop()
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("Stop took %v with long polls in flight, want them cut at once (the grace is for actions)", took)
	}
	// Stop has waited for the lanes (their WaitGroup); their goroutines may
	// still be returning from run, past its deferred Done, for a moment.
	waitFor(t, "no lane goroutine left after Stop", func() bool { return laneGoroutines() == 0 })
	waitFor(t, "the server to see the polls go", func() bool { return st.inFlight() == 0 })
	snap := metrics.NewSnapshot()
	rec.Drain(snap)
	// A call that began while its user set up is setup's: which one is a race with the rest of setup.
	var canceled, other int64
	for _, sn := range []*metrics.Snapshot{snap, snap.Setup} {
		if s := sn.Actions[scenario.LaneAction("sync")]; s != nil {
			canceled, other = canceled+s.Canceled, other+s.Count
		}
	}
	if canceled != 2 || other != 0 {
		t.Errorf("%d sync calls cancelled and %d others, want 2 and none", canceled, other)
	}
}

// TestRetriedSetupStopsItsLanes: a setup that fails after starting its lanes is retried from a clean
// user: the failed attempt's long poll is cut, and only the retry's goes on.
func TestRetriedSetupStopsItsLanes(t *testing.T) {
	st := newSyncTarget(t, 0, 1)
	e, _ := laneEngine(t, st.url, time.Second)
	e.SetUsers(1)
	waitFor(t, "the retried setup", func() bool { return e.SetUp() == 1 })
	waitFor(t, "the first attempt's poll cut", func() bool { return st.syncs.Load() == 2 && st.inFlight() == 1 })
	// The failed attempt's lanes were waited for (their WaitGroup), but their goroutines may still be
	// returning from run, past its deferred Done: wait for them to go. A lane left running stays.
	waitFor(t, "the retry's 2 lanes alone (sync and presence)", func() bool { return laneGoroutines() == 2 })
	e.Stop()
	waitFor(t, "no lane goroutine left after Stop", func() bool { return laneGoroutines() == 0 })
}
