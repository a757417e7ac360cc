package scenario

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/transport"
)

// sent is one request a laneClient saw.
type sent struct {
	url      string
	at       time.Time
	defaults []transport.Header
	cookies  map[string]string // the client's when it was made
}

// laneNet is the clients of one test's user: its own and its lanes'. Safe for concurrent use.
type laneNet struct {
	mu      sync.Mutex
	sent    []sent
	latency time.Duration // what a request takes (virtual time under synctest)
	clients int
}

// laneClient answers every request after net.latency with {"next_batch": "s2"}, except one whose URL
// holds "hold", a long poll the server holds for 30 s: Cancel cuts it.
type laneClient struct {
	net      *laneNet
	cookies  map[string]string
	once     sync.Once
	canceled chan struct{}
}

func (n *laneNet) newClient(cookies map[string]string) HTTPClient {
	n.mu.Lock()
	n.clients++
	n.mu.Unlock()
	return &laneClient{net: n, cookies: cookies, canceled: make(chan struct{})}
}

func (c *laneClient) Do(req *transport.Request, resp *transport.Response) {
	c.net.mu.Lock()
	c.net.sent = append(c.net.sent, sent{req.URL, time.Now(), append([]transport.Header(nil), req.Defaults...), c.cookies})
	wait := c.net.latency
	c.net.mu.Unlock()
	if strings.Contains(req.URL, "hold") {
		wait = 30 * time.Second
	}
	start := time.Now()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		*resp = transport.Response{Status: 200, Body: []byte(`{"next_batch": "s2"}`), Latency: time.Since(start)}
	case <-c.canceled:
		*resp = transport.Response{Err: transport.ErrCanceled, Canceled: true, Latency: time.Since(start)}
	}
}
func (c *laneClient) Cookies() map[string]string { return c.cookies }
func (c *laneClient) Cancel()                    { c.once.Do(func() { close(c.canceled) }) }
func (c *laneClient) Close()                     {}

// sentTo returns the requests whose URL starts with prefix.
func (n *laneNet) sentTo(prefix string) []sent {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []sent
	for _, s := range n.sent {
		if strings.HasPrefix(s.url, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// laneUser loads src (its actions run act, and look if it has one) as user 1, whose HTTP client holds
// the cookie session=s1.
func laneUserOf(t *testing.T, src string) (*User, *lockedSamples, *laneNet) {
	t.Helper()
	acts := "action('A', act)"
	if strings.Contains(src, "def look(") {
		acts += ", action('Look', look)"
	}
	sc, err := load("l.star", src+"\nactions = ["+acts+"]\n")
	if err != nil {
		t.Fatal(err)
	}
	rec, n := &lockedSamples{}, &laneNet{}
	u := NewUser(sc, Env{ID: 1, Seed: 1, HTTP: n.newClient(map[string]string{"session": "s1"}), NewHTTP: n.newClient, Record: rec})
	t.Cleanup(u.Close)
	return u, rec, n
}

func (l *lockedSamples) allNamed(name string) []metrics.Sample {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []metrics.Sample
	for _, x := range l.s {
		if x.Name == name {
			out = append(out, x)
		}
	}
	return out
}

func TestLanePlan(t *testing.T) {
	s := time.Second
	bg, every := plan{}, plan{period: 30 * s, first: 45 * s}
	for _, c := range []struct {
		name              string
		p                 plan
		due, began, ended time.Duration
		failed, idle      bool
		want              time.Duration
	}{
		{"background: at once after a call", bg, 0, 5 * s, 35 * s, false, false, 35 * s},
		{"background: a failure pauses", bg, 0, 5 * s, 6 * s, true, false, 7 * s},
		{"background: a call that sent nothing waits out the idle gap", bg, 0, 5 * s, 5 * s, false, true, 5*s + laneIdleGap},
		{"background: a slow idle call does not wait", bg, 0, 5 * s, 6 * s, false, true, 6 * s},
		{"every: the next period", every, 45 * s, 45 * s, 46 * s, false, false, 75 * s},
		{"every: a failure's pause within the period changes nothing", every, 45 * s, 45 * s, 46 * s, true, false, 75 * s},
		{"every: a call past its period skips the missed one", every, 45 * s, 45 * s, 80 * s, false, false, 105 * s},
		{"every: a failure's pause past the next point skips it", every, 45 * s, 45 * s, 74*s + s/2, true, false, 105 * s},
		{"every: the end of time", plan{period: maxDuration / 2, first: maxDuration / 2}, maxDuration / 2, maxDuration / 2, maxDuration / 2, false, false, maxDuration - 1},
		{"every: past the end of time", plan{period: maxDuration / 2}, maxDuration - 5, maxDuration - 5, maxDuration - 5, false, false, maxDuration},
	} {
		if got := c.p.next(c.due, c.began, c.ended, c.failed, c.idle); got != c.want {
			t.Errorf("%s: next %v, want %v", c.name, got, c.want)
		}
	}
}

// TestEveryCallsAtItsPeriod: user.every's first call comes between one and two periods after the
// start, at the user's own fixed point, then once a period, each recorded as the lane's action.
func TestEveryCallsAtItsPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u, rec, n := laneUserOf(t, `
def beat(user):
    user.http.put("/presence", name="PUT /presence")
def act(user):
    user.every("30s", beat, name="presence")
`)
		start := time.Now()
		if out := u.Run(u.Type().Actions[0]); out != metrics.OK {
			t.Fatalf("action: %v", out)
		}
		time.Sleep(200 * time.Second)
		u.Close()
		first := 30*time.Second + time.Duration(float64(u.laneSeed(1, 2)>>11)/(1<<53)*float64(30*time.Second))
		var got, want []time.Duration
		for _, s := range n.sentTo("/presence") {
			got = append(got, s.at.Sub(start))
		}
		for at := first; at <= 200*time.Second; at += 30 * time.Second {
			want = append(want, at)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("calls at %v, want %v", got, want)
		}
		if first < 30*time.Second || first >= 60*time.Second {
			t.Errorf("first call at %v, want within [30s, 60s)", first)
		}
		calls := rec.allNamed(LaneAction("presence"))
		if len(calls) != len(want) || calls[0].Kind != metrics.Action || calls[0].Outcome != metrics.OK || calls[0].Requests != 1 {
			t.Errorf("%d calls recorded (%+v), want %d ok actions of 1 request", len(calls), calls, len(want))
		}
		if rs := rec.allNamed("PUT /presence"); len(rs) != len(want) || rs[0].Kind != metrics.Request {
			t.Errorf("%d requests PUT /presence recorded, want %d", len(rs), len(want))
		}
	})
}

// TestLaneStateIsACopy: a lane works on a copy of user.state, user.http.headers and the cookies as
// they were when it started; neither side sees the other's later changes.
func TestLaneStateIsACopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u, rec, n := laneUserOf(t, `
def lane(user):
    user.state["list"].append(2)
    user.state["nested"]["k"].append("lane")
    user.state["lane"] = True
    user.state["a"].append(9)   # one list at two keys stays one in the copy
    user.http.get("/seen", params={"list": str(user.state["list"]), "main": str(user.state.get("main")),
                                   "same": str(user.state["b"] == [0, 9]), "t": str(user.state["t"])})
    sleep("1h")
def act(user):
    user.state.update({"since": "s1", "list": [1], "nested": {"k": ["main"]}, "t": (1, "x", None, b"z")})
    shared = [0]
    user.state["a"], user.state["b"] = shared, shared
    user.http.headers["Authorization"] = "Bearer t"
    user.background(lane, name="copy")
    user.state["main"] = 1
    user.http.headers["Authorization"] = "Bearer changed"
def look(user):
    if user.state["list"] != [1] or user.state["nested"]["k"] != ["main"] or "lane" in user.state:
        fail("the lane's writes reached the user: %s" % user.state)
`)
		if out := u.Run(u.Type().Actions[0]); out != metrics.OK {
			t.Fatalf("action: %v %+v", out, rec.s)
		}
		synctest.Wait() // the lane sleeps after its request
		seen := n.sentTo("/seen")
		if len(seen) != 1 {
			t.Fatalf("%d lane requests, want 1", len(seen))
		}
		for _, want := range []string{"list=%5B1%2C+2%5D", "main=None", "same=True", "t=%281%2C+%22x%22%2C+None%2C+b%22z%22%29"} {
			if !strings.Contains(seen[0].url, want) {
				t.Errorf("the lane saw %s, want %s in it", seen[0].url, want)
			}
		}
		if len(seen[0].defaults) != 1 || seen[0].defaults[0].Value != "Bearer t" {
			t.Errorf("the lane sent default headers %v, want Authorization as it was at the start", seen[0].defaults)
		}
		if seen[0].cookies["session"] != "s1" {
			t.Errorf("the lane's client began with cookies %v, want the user's", seen[0].cookies)
		}
		if out := u.Run(u.Type().Actions[1]); out != metrics.OK {
			t.Errorf("look: %v", rec.allNamed("Look"))
		}
	})
}

// TestLaneRandIsItsOwn: a lane's user.rand is a stream of its own, fixed by the seed, the user's id and
// the lane's number: not the user's, and the same in every run.
func TestLaneRandIsItsOwn(t *testing.T) {
	draw := func() (string, string) {
		var main, lane string
		synctest.Test(t, func(t *testing.T) {
			u, _, n := laneUserOf(t, `
def lane(user):
    user.http.get("/r?" + user.rand.string(12))
    sleep("1h")
def act(user):
    user.background(lane)
    user.http.get("/m?" + user.rand.string(12))
`)
			u.Run(u.Type().Actions[0])
			synctest.Wait()
			main, lane = n.sentTo("/m")[0].url, n.sentTo("/r")[0].url
		})
		return main, lane
	}
	m1, l1 := draw()
	m2, l2 := draw()
	if m1[3:] == l1[3:] || m1 != m2 || l1 != l2 {
		t.Errorf("draws %s %s, then %s %s: want the lane's own stream, the same each run", m1, l1, m2, l2)
	}
}

// TestCancelCutsALongPollInFlight: the user's Cancel cuts its lane's long poll at once; the poll and the
// call are recorded as cancelled, and Close leaves no goroutine (synctest fails on one left).
func TestCancelCutsALongPollInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u, rec, _ := laneUserOf(t, `
def sync(user):
    r = user.http.get("/sync?hold&since=" + user.state.get("since", ""), name="GET /sync", long_poll=True)
    user.state["since"] = r.json()["next_batch"]
def act(user):
    user.background(sync, name="sync")
`)
		u.Run(u.Type().Actions[0])
		synctest.Wait() // the lane waits for its poll
		start := time.Now()
		u.Cancel("user removed")
		u.Close()
		if waited := time.Since(start); waited != 0 {
			t.Errorf("the long poll took %v to end after Cancel, want at once", waited)
		}
		polls, calls := rec.allNamed("GET /sync"), rec.allNamed(LaneAction("sync"))
		if len(polls) != 1 || polls[0].Kind != metrics.Poll || polls[0].Outcome != metrics.Canceled || polls[0].Setup {
			t.Errorf("polls %+v, want one Poll sample, cancelled, not of setup", polls)
		}
		if len(calls) != 1 || calls[0].Outcome != metrics.Canceled || calls[0].Message != "cancelled: user removed" {
			t.Errorf("calls %+v, want one, cancelled: user removed", calls)
		}
		if len(u.lanes.all) != 0 {
			t.Errorf("%d lanes left after Close", len(u.lanes.all))
		}
	})
}

// TestFailingLaneDoesNotSpin: a lane whose function fails waits a second before it calls again; one
// that returns at once without a request, 10 ms.
func TestFailingLaneDoesNotSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u, rec, _ := laneUserOf(t, `
def broken(user):
    fail("broken")
def idle(user):
    pass
def act(user):
    user.background(broken)
    user.background(idle)
`)
		u.Run(u.Type().Actions[0])
		time.Sleep(9*time.Second + 5*time.Millisecond)
		u.Close()
		broken, idle := rec.allNamed(LaneAction("broken")), rec.allNamed(LaneAction("idle"))
		if len(broken) != 10 || broken[0].Outcome != metrics.Failed || broken[0].Message != "broken" {
			t.Errorf("%d calls of broken in 9 s (first %+v), want 10 failed: one a second", len(broken), broken[0])
		}
		if len(idle) != 901 || idle[0].Outcome != metrics.OK {
			t.Errorf("%d calls of idle in 9 s, want 901: one per 10 ms", len(idle))
		}
	})
}

// TestFailedSetupStopsItsLanes: a setup that fails ends the lanes it started, so a retry begins from a
// clean user.
func TestFailedSetupStopsItsLanes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u, rec, n := laneUserOf(t, `
def sync(user):
    user.http.get("/sync?hold", long_poll=True)
def setup(user):
    user.background(sync)
    sleep("1s")   # the lane's poll begins meanwhile
    fail("login refused")
def act(user):
    pass
`)
		if out := u.Setup(); out != metrics.Failed {
			t.Fatalf("setup: %v", out)
		}
		polls := len(n.sentTo("/sync"))
		time.Sleep(time.Minute)
		if now := len(n.sentTo("/sync")); now != polls || polls > 1 {
			t.Errorf("%d polls at the failed setup's end, %d a minute later: want the lane stopped", polls, now)
		}
		calls, ps := rec.allNamed(LaneAction("sync")), rec.allNamed("GET /sync")
		if len(calls) != 1 || calls[0].Message != "cancelled: setup failed" || !calls[0].Setup {
			t.Errorf("the lane's calls %+v, want one, of setup, cancelled: setup failed", calls)
		}
		if len(ps) != 1 || !ps[0].Setup {
			t.Errorf("its polls %+v, want one, of setup (it began while the user set up)", ps)
		}
	})
}

// TestLaneMistakes: what a lane cannot take fails the action that starts it, saying why.
func TestLaneMistakes(t *testing.T) {
	for src, want := range map[string]string{
		`user.background(beat, name="")`:                                            `name= is "", want a non-empty string`,
		`user.every(0, beat)`:                                                       "period must be more than 0",
		`user.every("soon", beat)`:                                                  "bad duration",
		`user.background(user.state.clear)`:                                         "is a builtin_function_or_method, want a function defined with def",
		`user.background(lambda: None)`:                                             "takes no arguments",
		`user.state["r"] = user.http.get("/x"); user.background(beat)`:              `user.state["r"] is a response, which a background lane cannot take`,
		`user.state["d"] = {"k": [user]}; user.background(beat)`:                    `user.state["d"]["k"][0] is a user`,
		"n = [0]\n    def loop(u):\n        n.append(1)\n    user.background(loop)": "loop uses n of the function around it",
		"def loop(u, acc=[]):\n        pass\n    user.background(loop)":             "loop's parameter acc has a default of type list",
	} {
		u, rec, _ := laneUserOf(t, "def beat(user):\n    pass\ndef act(user):\n    "+src+"\n")
		u.Run(u.Type().Actions[0])
		last := rec.s[len(rec.s)-1]
		if last.Outcome != metrics.Failed || !strings.Contains(last.Message, want) {
			t.Errorf("%s: %v %q, want a failure saying %q", src, last.Outcome, last.Message, want)
		}
	}
	sc, err := load("i.star", "def beat(user):\n    pass\ndef init(user):\n    user.background(beat)\ndef act(user):\n    pass\nactions = [action('A', act)]\n")
	if err != nil {
		t.Fatal(err)
	}
	n := &laneNet{}
	u := NewUser(sc, Env{ID: 0, HTTP: n.newClient(nil), Record: &samples{}}) // as the engine makes init's user
	defer u.Close()
	if _, err := u.Init(); err == nil || !strings.Contains(err.Error(), "not in init") {
		t.Errorf("background in init: %v, want an error saying not in init", err)
	}
}

// TestLaneRefusesWhatIsNotItsOwn: inside a lane, user.ws, another lane and a unique row the user did not
// hold fail the call, which is recorded as the lane's failure; a top-level lambda is a lane's function.
func TestLaneRefusesWhatIsNotItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u, rec, _ := laneUserOf(t, `
rows = data.rows([{"name": "a"}, {"name": "b"}], pick="unique")
nap = lambda user: sleep("1h")
def ws(user):
    user.ws.connect("/ws")
def nested(user):
    user.background(nap)
def row(user):
    rows.row(user)
def act(user):
    user.background(ws)
    user.background(nested)
    user.background(row)
    user.every("1s", nap)
`)
		if out := u.Run(u.Type().Actions[0]); out != metrics.OK {
			t.Fatalf("action: %+v", rec.s)
		}
		synctest.Wait()
		for name, want := range map[string]string{
			"ws":     `user.ws in the background lane "ws"`,
			"nested": "a lane cannot start lanes",
			"row":    `in a background lane gives the row the user held when the lane started, and it held none`,
		} {
			calls := rec.allNamed(LaneAction(name))
			if len(calls) == 0 || calls[0].Outcome != metrics.Failed || !strings.Contains(calls[0].Message, want) {
				t.Errorf("lane %s: %+v, want a failure saying %q", name, calls, want)
			}
		}
	})
}
