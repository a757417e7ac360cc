package runner

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/scenario"
	"github.com/headroom-dev/headroom/testbed"
	"github.com/headroom-dev/headroom/transport"
	"github.com/mccutchen/go-httpbin/v2/httpbin"
)

// httpbinServer starts go-httpbin, a real third-party server, on loopback.
func httpbinServer(t *testing.T) *url.URL {
	t.Helper()
	srv := httptest.NewServer(httpbin.New(httpbin.WithMaxDuration(10 * time.Second)).Handler())
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u
}

func load(t *testing.T, src string) *scenario.Scenario {
	t.Helper()
	path := filepath.Join(t.TempDir(), "test.star")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.LoadFile(context.Background(), path, scenario.Limits{})
	if err != nil {
		t.Fatalf("load scenario: %v", err)
	}
	return sc
}

func run(t *testing.T, b *Bounded) *result.Result {
	t.Helper()
	if b.Timeout == 0 {
		b.Timeout = 5 * time.Second
	}
	if b.Grace == 0 {
		b.Grace = time.Second
	}
	res, err := b.Run(context.Background())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

func request(t *testing.T, r *result.Result, name string) metrics.Summary {
	t.Helper()
	for _, s := range r.Requests {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no request %q in %+v", name, r.Requests)
	return metrics.Summary{}
}

func TestDelayIsMeasuredToTheEndOfTheBody(t *testing.T) {
	t.Parallel()
	target := httpbinServer(t)
	sc := load(t, `
def wait(user):
    user.http.get("/delay/0.2", name="delay")
actions = [action("Wait", wait)]
think_time = think.constant(0)
`)
	res := run(t, &Bounded{Common: Common{Scenario: sc, Target: target}, Users: 4, Duration: 2 * time.Second})
	s := request(t, res, "delay")
	if s.Count < 12 {
		t.Fatalf("only %d requests in 2 s with 4 users", s.Count)
	}
	// Never under the 200 ms the server waits; above it by no more than
	// a busy machine's scheduling (a few ms here, tens at worst).
	if s.P50Ms < 200 || s.P50Ms > 350 {
		t.Errorf("p50 of /delay/0.2 = %.1f ms, want 200-350", s.P50Ms)
	}
	if s.Errors != 0 || s.Timeouts != 0 {
		t.Errorf("errors %d timeouts %d, want none", s.Errors, s.Timeouts)
	}
}

func TestStatusErrorsAndTimeoutsAreCountedApart(t *testing.T) {
	t.Parallel()
	target := httpbinServer(t)
	sc := load(t, `
def unavailable(user):
    r = user.http.get("/status/503", name="503")
    if r.status != 503:
        fail("got %d" % r.status)
def slow(user):
    r = user.http.get("/delay/2", name="slow", timeout="300ms")
    if r.error == None:
        fail("no timeout")
def teapot_ok(user):
    user.http.get("/status/418", name="418-expected", expect=[418])
actions = [action("Unavailable", unavailable), action("Slow", slow), action("Teapot", teapot_ok)]
think_time = think.constant("20ms")
`)
	res := run(t, &Bounded{Common: Common{Scenario: sc, Target: target}, Users: 3, Duration: 2 * time.Second})

	s503 := request(t, res, "503")
	if s503.Count == 0 || s503.Errors != s503.Count || s503.Timeouts != 0 {
		t.Errorf("503: count %d errors %d timeouts %d; want every one an error, no timeouts", s503.Count, s503.Errors, s503.Timeouts)
	}
	if s503.Status["503"] != s503.Count {
		t.Errorf("503: status counts %v, want all under 503", s503.Status)
	}
	slow := request(t, res, "slow")
	if slow.Count == 0 || slow.Timeouts != slow.Count || slow.Errors != 0 {
		t.Errorf("slow: count %d timeouts %d errors %d; want every one a timeout and none an error", slow.Count, slow.Timeouts, slow.Errors)
	}
	if slow.P50Ms < 290 || slow.P50Ms > 450 {
		t.Errorf("slow: p50 %.1f ms, want about the 300 ms timeout", slow.P50Ms)
	}
	tea := request(t, res, "418-expected")
	if tea.Count == 0 || tea.Errors != 0 {
		t.Errorf("418 with expect=[418]: count %d errors %d, want no errors", tea.Count, tea.Errors)
	}
	for _, a := range res.Actions {
		switch a.Name {
		case "Unavailable":
			if a.Errors != a.Count || a.Messages["503: status 503"] != a.Count {
				t.Errorf("action Unavailable: %d of %d failed, messages %v", a.Errors, a.Count, a.Messages)
			}
		case "Slow":
			if a.Timeouts != a.Count {
				t.Errorf("action Slow: %d of %d timed out", a.Timeouts, a.Count)
			}
		}
	}
}

func TestActionExceptionIsAnErrorNotACrash(t *testing.T) {
	t.Parallel()
	target := httpbinServer(t)
	sc := load(t, `
def broken(user):
    user.http.get("/get", name="get")
    x = {}["missing"]
def fine(user):
    user.http.get("/get", name="get")
actions = [action("Broken", broken), action("Fine", fine)]
think_time = think.constant("10ms")
`)
	res := run(t, &Bounded{Common: Common{Scenario: sc, Target: target}, Users: 2, Duration: time.Second})
	var broken, fine metrics.Summary
	for _, a := range res.Actions {
		switch a.Name {
		case "Broken":
			broken = a
		case "Fine":
			fine = a
		}
	}
	if broken.Count == 0 || broken.Errors != broken.Count {
		t.Fatalf("Broken: %d of %d failed, want all", broken.Errors, broken.Count)
	}
	if fine.Count == 0 || fine.Errors != 0 {
		t.Errorf("Fine: %d of %d failed, want none (the run must go on)", fine.Errors, fine.Count)
	}
	want := `test.star:4: key "missing" not in dict`
	if broken.Messages[want] != broken.Count {
		t.Errorf("Broken messages = %v, want %q", broken.Messages, want)
	}
}

func TestWeightsGiveTheirShare(t *testing.T) {
	t.Parallel()
	target := httpbinServer(t)
	sc := load(t, `
def a(user):
    user.http.get("/get", name="a")
def b(user):
    user.http.get("/get", name="b")
actions = [action("A", a, weight=8), action("B", b, weight=2)]
think_time = think.constant("2ms")
`)
	res := run(t, &Bounded{Common: Common{Scenario: sc, Target: target}, Users: 8, Duration: 2 * time.Second})
	var na, nb int64
	for _, s := range res.Actions {
		switch s.Name {
		case "A":
			na = s.Count
		case "B":
			nb = s.Count
		}
	}
	// The share of n weighted draws has a standard deviation of
	// sqrt(0.8*0.2/n): the bound is 5 of them, however many actions the
	// machine managed (~0.06 at 1,000, ~0.14 at 200), and still far from
	// the 0.5 of weights ignored.
	n := na + nb
	if n < 200 {
		t.Fatalf("only %d actions; too few to check a split", n)
	}
	share, sd := float64(na)/float64(n), math.Sqrt(0.8*0.2/float64(n))
	if math.Abs(share-0.8) > 5*sd {
		t.Errorf("A's share = %.3f of %d actions, want 0.80 ± %.3f (5 standard deviations)", share, n, 5*sd)
	}
}

func TestSameSeedSameActions(t *testing.T) {
	t.Parallel()
	target := httpbinServer(t)
	sc := load(t, `
def a(user):
    user.http.get("/get", name="a")
def b(user):
    user.http.get("/get", name="b")
def c(user):
    user.http.get("/get", name="c")
actions = [action("A", a, weight=5), action("B", b, weight=3), action("C", c, weight=1)]
think_time = think.exponential("5ms")
`)
	sequences := func(seed uint64) map[int][]string {
		var mu sync.Mutex
		seq := map[int][]string{}
		run(t, &Bounded{Common: Common{Scenario: sc, Target: target, Seed: seed,
			OnAction: func(user int, action string) {
				mu.Lock()
				seq[user] = append(seq[user], action)
				mu.Unlock()
			}}, Users: 4, Duration: time.Second})
		return seq
	}
	first, second, other := sequences(42), sequences(42), sequences(43)
	same, differ := 0, 0
	for user, s1 := range first {
		s2, s3 := second[user], other[user]
		n := min(len(s1), len(s2), len(s3))
		if n < 20 {
			t.Fatalf("user %d made only %d actions", user, n)
		}
		for i := range n {
			if s1[i] != s2[i] {
				t.Fatalf("user %d: action %d is %s with seed 42 and %s with seed 42 again", user, i, s1[i], s2[i])
			}
			same++
			if s1[i] != s3[i] {
				differ++
			}
		}
	}
	if differ == 0 {
		t.Errorf("seed 43 made the same %d actions as seed 42: the seed does not reach the users", same)
	}
}

func TestUnreachableTargetFailsBeforeTraffic(t *testing.T) {
	sc := load(t, "def a(user):\n    pass\nactions = [action(\"A\", a)]\n")
	u, _ := url.Parse("http://127.0.0.1:1")
	out := filepath.Join(t.TempDir(), "out")
	_, err := (&Bounded{Common: Common{Scenario: sc, Target: u, Out: out}, Users: 1, Duration: time.Second}).Run(context.Background())
	if err == nil {
		t.Fatal("run against a closed port succeeded")
	}
	if _, statErr := os.Stat(out); !os.IsNotExist(statErr) {
		t.Errorf("a result directory was written for a run that never started")
	}
}

func TestInterruptStillWritesTheResult(t *testing.T) {
	t.Parallel()
	target := httpbinServer(t)
	sc := load(t, "def a(user):\n    user.http.get('/get', name='get')\nactions = [action('A', a)]\nthink_time = think.constant('10ms')\n")
	out := filepath.Join(t.TempDir(), "out")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(1500*time.Millisecond, cancel)
	start := time.Now()
	res, err := (&Bounded{Common: Common{Scenario: sc, Target: target, Out: out, Grace: time.Second}, Users: 2, Duration: time.Minute}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("interrupt took %v to stop the run", el)
	}
	back, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if back.Status != result.Interrupted || res.Status != result.Interrupted {
		t.Errorf("status %q, want interrupted", back.Status)
	}
	if back.Totals.Count == 0 || len(back.Timeline) == 0 {
		t.Errorf("interrupted result lost its figures: totals %+v, %d timeline points", back.Totals, len(back.Timeline))
	}
	snap, err := result.ReadHistograms(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Requests["get"].Count; got != back.Totals.Count {
		t.Errorf("histograms.json holds %d samples, result.json counts %d", got, back.Totals.Count)
	}
}

func TestTooManyRequestNamesAreNoted(t *testing.T) {
	t.Parallel()
	target := httpbinServer(t)
	sc := load(t, "def a(user):\n    user.http.get('/anything/%d' % user.rand.int(1, 1000000))\nactions = [action('A', a)]\nthink_time = think.constant(0)\n")
	res := run(t, &Bounded{Common: Common{Scenario: sc, Target: target}, Users: 8, Duration: 2 * time.Second})
	if len(res.Requests) > 1001 {
		t.Errorf("%d request names kept", len(res.Requests))
	}
	noted := false
	for _, n := range res.Notes {
		noted = noted || strings.Contains(n, "distinct request names")
	}
	if res.Totals.Count > 1100 && !noted {
		t.Errorf("%d requests under %d names and no note: %v", res.Totals.Count, len(res.Requests), res.Notes)
	}
	if res.Totals.Count <= 1100 {
		t.Fatalf("only %d requests: too few to overflow the name bound", res.Totals.Count)
	}
}

// The window of a bounded run ends with its duration: requests that end
// while users finish their actions are counted apart and do not stretch
// it, so req/s is over the duration asked for.
func TestWindowEndsWithTheDuration(t *testing.T) {
	t.Parallel()
	target := httpbinServer(t)
	sc := load(t, "def a(user):\n    user.http.get('/delay/0.6', name='slow')\nactions = [action('A', a)]\nthink_time = think.constant(0)\n")
	res := run(t, &Bounded{Common: Common{Scenario: sc, Target: target, Grace: 3 * time.Second}, Users: 3, Duration: 2 * time.Second})
	if res.Window.Seconds < 1.9 || res.Window.Seconds > 2.3 || res.Window.End-res.Window.Start > 2.3 || res.Window.Start > 0.5 {
		t.Errorf("window %+v for a 2 s duration with no ramp", res.Window)
	}
	if res.StoppingTotals.Count == 0 {
		t.Errorf("no request counted while stopping (each of 3 users was mid-request at the end): %+v", res.StoppingTotals)
	}
	if res.Totals.Count == 0 || math.Abs(res.Totals.RPS-float64(res.Totals.Count)/res.Window.Seconds) > 0.01 {
		t.Errorf("req/s %.2f is not count %d over the window %.2f s", res.Totals.RPS, res.Totals.Count, res.Window.Seconds)
	}
	if got := res.Totals.Count + res.StoppingTotals.Count + res.RampTotals.Count; got > 3*5 {
		t.Errorf("%d requests of 0.6 s from 3 users in about 2.6 s", got)
	}
}

// https to a plain HTTP port: every request fails, so the run measured
// nothing and says so, rather than passing for completed.
func TestEveryRequestFailingIsAFailedRun(t *testing.T) {
	t.Parallel()
	target := httpbinServer(t)
	tls := *target
	tls.Scheme = "https"
	sc := load(t, "def a(user):\n    user.http.get('/get', name='get')\nactions = [action('A', a)]\nthink_time = think.constant('50ms')\n")
	res := run(t, &Bounded{Common: Common{Scenario: sc, Target: &tls, Client: transport.Config{Insecure: true}}, Users: 2, Duration: time.Second})
	if res.Status != result.Failed || res.Totals.Count == 0 {
		t.Fatalf("status %q with %d requests, want failed", res.Status, res.Totals.Count)
	}
	if n := strings.Join(res.Notes, "\n"); !strings.Contains(n, "the run measured nothing: all ") || !strings.Contains(n, "requests in the measured window failed or timed out (most often: ") {
		t.Errorf("notes: %s", n)
	}
}

func TestNoUserPastSetupIsAFailedRun(t *testing.T) {
	t.Parallel()
	target := httpbinServer(t)
	sc := load(t, "def setup(user):\n    user.http.get('/status/401', name='login')\ndef a(user):\n    user.http.get('/get', name='get')\nactions = [action('A', a)]\nthink_time = think.constant('100ms')\n")
	res := run(t, &Bounded{Common: Common{Scenario: sc, Target: target}, Users: 2, Duration: time.Second, SetupTimeout: time.Second})
	if res.Status != result.Failed {
		t.Fatalf("status %q, want failed", res.Status)
	}
	if res.Setup == nil || res.Setup.Users != 0 || res.Setup.Attempts.Errors == 0 || res.Setup.Totals.Errors == 0 || res.Totals.Count+res.RampTotals.Count != 0 {
		t.Errorf("the failed logins belong in setup, and only there: setup %+v, totals %d, ramp %d", res.Setup, res.Totals.Count, res.RampTotals.Count)
	}
	if n := strings.Join(res.Notes, "\n"); !strings.Contains(n, "no user finished setup: all ") || !strings.Contains(n, `"login: status 401"`) ||
		!strings.Contains(n, `failed requests (most often: "status 401"`) {
		t.Errorf("notes: %s", n)
	}
}

// A scenario that sends no request measures its actions: one that
// succeeds is not a failed run.
func TestActionsWithoutRequestsAreMeasured(t *testing.T) {
	target := httpbinServer(t)
	sc := load(t, "def a(user):\n    pass\nactions = [action('A', a)]\nthink_time = think.constant('50ms')\n")
	res := run(t, &Bounded{Common: Common{Scenario: sc, Target: target}, Users: 1, Duration: 500 * time.Millisecond})
	if res.Status != result.Completed {
		t.Errorf("status %q, notes %v", res.Status, res.Notes)
	}
}

// A panic in a goroutine of the run stops it at once; the result is still
// written, with status stopped and a note, and Run returns the panic.
func TestPanicStopsTheRunAndKeepsItsResult(t *testing.T) {
	target := httpbinServer(t)
	sc := load(t, "def a(user):\n    user.http.get('/get', name='get')\nactions = [action('A', a)]\nthink_time = think.constant('10ms')\n")
	out := filepath.Join(t.TempDir(), "out")
	var n atomic.Int64
	start := time.Now()
	res, err := (&Bounded{Common: Common{Scenario: sc, Target: target, Out: out, Grace: time.Second,
		OnAction: func(user int, _ string) {
			if n.Add(1) == 20 {
				panic("boom")
			}
		}}, Users: 2, Duration: time.Minute}).Run(context.Background())
	var pe *engine.PanicError
	if !errors.As(err, &pe) || pe.Value != "boom" {
		t.Fatalf("err = %v, want the panic", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("the run went on %v after a panic", el)
	}
	back, rerr := result.Read(out)
	if rerr != nil || res == nil || back.Status != result.Stopped || back.Totals.Count == 0 {
		t.Fatalf("result after a panic: %v %+v", rerr, back)
	}
	if n := strings.Join(back.Notes, "\n"); !strings.Contains(n, "internal error, a bug in headroom") || !strings.Contains(n, "panic in user ") {
		t.Errorf("notes: %s", n)
	}
}

// Every request the server answered is counted once: in the ramp, the
// window or the stopping, however many checkpoints the run wrote on the
// way (a checkpoint once merged the second's requests into the stopping
// figures as well).
func TestEveryRequestCountedOnceThroughCheckpoints(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	target, _ := url.Parse(srv.URL)
	sc := load(t, "def a(user):\n    user.http.get('/')\nactions = [action('A', a)]\nthink_time = think.constant('50ms')\n")
	res := run(t, &Bounded{Common: Common{Scenario: sc, Target: target, Save: 250 * time.Millisecond, Tick: 100 * time.Millisecond},
		Users: 4, Ramp: 500 * time.Millisecond, Duration: 2 * time.Second})
	srv.Close() // every request answered is in hits
	got := res.RampTotals.Count + res.Totals.Count + res.StoppingTotals.Count
	if got != hits.Load() || res.Totals.Count == 0 {
		t.Errorf("ramp %d + window %d + stopping %d = %d requests counted, the server answered %d", res.RampTotals.Count, res.Totals.Count,
			res.StoppingTotals.Count, got, hits.Load())
	}
}

// Every watcher reads one value a second (see Tick: the timeline's point,
// /metrics's users set up, the kind's part; none in the stop's own ticks).
func TestTicksAreTheSecondsEveryWatcherReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, target, dial := testbedInMemory(t, testbed.Config{Workers: 4, Scale: 10})
		own := metrics.NewProm()
		var seconds, stopping, last int
		watch := func(tk Tick) {
			switch {
			case tk.Interval == nil:
				if tk.Run == nil || tk.Run.Phase != "stopping" || tk.Total != nil {
					t.Errorf("a tick with no second that is not the run stopping: %+v", tk)
				}
				stopping++
			case tk.Run == nil:
				last++
			default:
				seconds++
				tl := tk.Res.Timeline
				if tl[len(tl)-1] != tk.Last || tk.Total.Count != tk.Last.Requests {
					t.Errorf("tick %v: point %+v (total %d), timeline's last %+v", tk.Elapsed, tk.Last, tk.Total.Count, tl[len(tl)-1])
				}
				if got := readyGauge(t, own); got != tk.Ready {
					t.Errorf("tick %v: /metrics says %d users set up, the tick %d", tk.Elapsed, got, tk.Ready)
				}
			}
		}
		b := &Bounded{Common: Common{Scenario: load(t, postsScenario(100*time.Millisecond)), Target: target, Dial: dial, Prom: own,
			Timeout: 5 * time.Second, Grace: time.Second, OnTick: watch}, Users: 5, Duration: 3 * time.Second}
		res, err := b.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if seconds < 3 || stopping != 1 || last != 1 || seconds+last != len(res.Timeline) {
			t.Errorf("%d seconds, %d stopping, %d last ticks; %d timeline points", seconds, stopping, last, len(res.Timeline))
		}
	})
}

// readyGauge is loadtest_users_ready as /metrics serves it.
func readyGauge(t *testing.T, p *metrics.Prom) int {
	t.Helper()
	mfs, err := p.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "loadtest_users_ready" {
			return int(mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	t.Fatal("no loadtest_users_ready")
	return 0
}
