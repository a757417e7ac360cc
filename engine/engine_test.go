package engine

import (
	"context"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario"
	"github.com/mccutchen/go-httpbin/v2/httpbin"
)

func setup(t *testing.T, src string, grace time.Duration) (*Engine, *metrics.Recorder, *sync.Map) {
	t.Helper()
	srv := httptest.NewServer(httpbin.New().Handler())
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	sc, err := scenario.Load(context.Background(), "e.star", []byte(src), scenario.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rec := metrics.NewRecorder(2, nil, time.Now)
	seen := &sync.Map{} // user id -> true once it acted
	e := New(Config{Scenario: sc, Target: u, Seed: 1, Grace: grace, Recorder: rec,
		OnAction: func(user int, _ string) { seen.Store(user, true) }})
	return e, rec, seen
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRemovalTakesTheNewestUsers(t *testing.T) {
	e, _, _ := setup(t, "def a(user):\n    user.http.get('/get')\nactions = [action('A', a)]\nthink_time = think.constant('20ms')\n", time.Second)
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

func TestRemovedUserFinishesItsRequestWithinGrace(t *testing.T) {
	e, rec, seen := setup(t, "def a(user):\n    user.http.get('/delay/0.3', name='slow')\nactions = [action('A', a)]\nthink_time = think.constant('1s')\n", 2*time.Second)
	e.SetUsers(1)
	waitFor(t, "the user to start its action", func() bool { _, ok := seen.Load(1); return ok })
	start := time.Now()
	e.Stop()
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Errorf("Stop took %v for a 0.3 s request with a 2 s grace", el)
	}
	snap := metrics.NewSnapshot()
	rec.Drain(snap)
	st := snap.Requests["slow"]
	if st == nil || st.Count != 1 || st.Canceled != 0 || st.Errors != 0 {
		t.Fatalf("the request in flight should complete normally: %+v", st)
	}
}

func TestRemovedUserIsCanceledAfterGrace(t *testing.T) {
	e, rec, seen := setup(t, "def a(user):\n    user.http.get('/delay/5', name='slow')\nactions = [action('A', a)]\n", 200*time.Millisecond)
	e.SetUsers(1)
	waitFor(t, "the user to start its action", func() bool { _, ok := seen.Load(1); return ok })
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	e.Stop()
	if el := time.Since(start); el < 150*time.Millisecond || el > 2*time.Second {
		t.Errorf("Stop took %v; want the 200 ms grace, then a prompt cancel", el)
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

func TestUserStates(t *testing.T) {
	e, _, seen := setup(t, "def setup(user):\n    pass\ndef a(user):\n    user.http.get('/get')\nactions = [action('A', a)]\nthink_time = think.constant('10s')\n", time.Second)
	e.SetUsers(3)
	waitFor(t, "three users acting", func() bool {
		n := 0
		seen.Range(func(_, _ any) bool { n++; return true })
		return n == 3
	})
	waitFor(t, "three users thinking", func() bool { return e.States()[Thinking] == 3 })
	start := time.Now()
	e.Stop() // thinking users stop at once: nothing to finish
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Errorf("stopping thinking users took %v", el)
	}
}
