package runner

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/health"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/prom"
	"github.com/headroom-dev/headroom/result"
)

// serve starts a real HTTP server on loopback that answers with h.
func serve(t *testing.T, h http.HandlerFunc) *url.URL {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u
}

// loginThenGet is a scenario whose users log in (slowly: 300 ms) in
// setup, and whose one action is one GET.
const loginThenGet = `
def setup(user):
    user.http.get("/login", name="login")
def get(user):
    user.http.get("/x", name="GET /x")
actions = [action("Get", get)]
`

// slowLogin answers /login after 300 ms, anything else at once.
func slowLogin(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/login" {
		time.Sleep(300 * time.Millisecond)
	}
}

// TestOpenRunHoldsTheRate: a bounded run of the open model sets its pool
// up first (logins in no figure), then starts the schedule with the
// window: 50/s for 2 s is 100 actions of one request, in a window of 2 s.
func TestOpenRunHoldsTheRate(t *testing.T) {
	t.Parallel()
	target := serve(t, slowLogin)
	b := &Bounded{Common: Common{Scenario: load(t, loginThenGet), Target: target},
		Open: &Open{Rate: engine.Constant(50, 2*time.Second), MaxUsers: 10, PreUsers: 10}}
	res := run(t, b)
	if res.Config.Model != result.ModelOpen || res.Config.Rate == nil || res.Config.Rate.MaxUsers != 10 || res.Config.Users != 0 {
		t.Fatalf("config: model %q, rate %+v, users %d", res.Config.Model, res.Config.Rate, res.Config.Users)
	}
	if res.Window.Start < 0.3 {
		t.Errorf("the window began %.2f s into the run, before the 300 ms logins were done", res.Window.Start)
	}
	if math.Abs(res.Window.Seconds-2) > 0.1 {
		t.Errorf("window %.2f s, want the schedule's 2 s", res.Window.Seconds)
	}
	get := request(t, res, "GET /x")
	if get.Count < 99 || get.Count > 101 || res.Totals.Count != get.Count {
		t.Errorf("%d requests of GET /x (%d in all) in the window; want the 100 arrivals of 50/s for 2 s", get.Count, res.Totals.Count)
	}
	if res.Setup == nil || res.Setup.Users != 10 {
		t.Errorf("setup: %+v; want the pool's 10 users set up, apart", res.Setup)
	}
	a := res.Arrivals
	if a == nil || a.Intended != get.Count || a.Started != get.Count || a.Dropped != 0 || math.Abs(a.IntendedRPS-50) > 3 || math.Abs(a.StartedRPS-50) > 3 {
		t.Errorf("arrivals %+v; want the %d started, none dropped, at 50/s", a, get.Count)
	}
	sv := res.ServiceTimes
	if sv == nil || len(sv.Requests) != 1 || sv.Requests[0].Count != get.Count || sv.Totals.Count != get.Count {
		t.Fatalf("service times %+v; want one per request", sv)
	}
	// Each request's latency from the intended start is its lateness plus
	// its service time: never less.
	if sv.Totals.MaxMs > res.Totals.MaxMs || sv.Totals.MeanMs > res.Totals.MeanMs {
		t.Errorf("service time (mean %.2f, max %.2f ms) above the latency from the intended start (mean %.2f, max %.2f ms)",
			sv.Totals.MeanMs, sv.Totals.MaxMs, res.Totals.MeanMs, res.Totals.MaxMs)
	}
}

// TestOpenRunRefusedByTheFleet: a fleet that cannot run the open model
// (agents of a headroom before it) ends the run before any arrival, with
// its error.
func TestOpenRunRefusedByTheFleet(t *testing.T) {
	target := serve(t, func(http.ResponseWriter, *http.Request) {})
	b := &Bounded{Common: Common{Scenario: load(t, loginThenGet), Target: target, Timeout: time.Second, Grace: time.Second,
		NewFleet: func(local engine.Config) Fleet {
			return refusing{localFleet{Engine: engine.New(local), rec: local.Recorder}}
		}},
		Open: &Open{Rate: engine.Constant(50, time.Second), MaxUsers: 2, PreUsers: 2}}
	res, err := b.Run(context.Background())
	if res != nil || !errors.Is(err, errNoOpen) {
		t.Fatalf("result %v, error %v; want no result and the fleet's refusal", res, err)
	}
}

var errNoOpen = errors.New("the open model does not run on this fleet")

// refusing is a fleet that refuses the open model.
type refusing struct{ localFleet }

func (refusing) StartOpen(engine.OpenModel) error { return errNoOpen }

func TestOpenRunRefusesBadSchedules(t *testing.T) {
	sc := load(t, loginThenGet)
	for _, o := range []*Open{
		{Rate: engine.Constant(10, engine.Forever), MaxUsers: 1},
		{Rate: engine.Constant(10, 0), MaxUsers: 1},
		{Rate: engine.Constant(-1, time.Second), MaxUsers: 1},
		{Rate: engine.Constant(10, time.Second), MaxUsers: 0},
		{Rate: engine.Constant(10, time.Second), MaxUsers: 2, PreUsers: 3},
	} {
		_, err := (&Bounded{Common: Common{Scenario: sc, Target: &url.URL{Scheme: "http", Host: "127.0.0.1:1"}}, Open: o}).Run(context.Background())
		if err == nil || strings.Contains(err.Error(), "cannot reach") {
			t.Errorf("%+v: %v; want it refused before anything else", o, err)
		}
	}
}

// TestOpenPoolTooSmallDropsAndTheCheckFires is issue 14's pool too small:
// 100 arrivals a second for a server that takes 100 ms, on 2 users, who
// serve 20 a second. The other 80 a second are dropped and counted, in
// the result, its note and on /metrics, where the default check on
// dropped arrivals, evaluated by the embedded PromQL engine on what the
// run exposed, fires. And the run does not fall behind: every second
// still hands out its 100 arrivals, none of them late.
func TestOpenPoolTooSmallDropsAndTheCheckFires(t *testing.T) {
	t.Parallel()
	target := serve(t, func(http.ResponseWriter, *http.Request) { time.Sleep(100 * time.Millisecond) })
	own := metrics.NewProm()
	store := prom.NewStore(time.Hour)
	stop, scraped := make(chan struct{}), make(chan time.Time, 1)
	go func() { // what a scrape of --metrics-listen would see, twice a second
		var last time.Time
		defer func() { scraped <- last }()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				mfs, err := own.Gather()
				if err != nil {
					t.Error(err)
					return
				}
				store.AppendGathered(mfs, now, labels.FromStrings("job", "headroom"))
				last = now
			}
		}
	}()
	b := &Bounded{Common: Common{Scenario: load(t, loginThenGet), Target: target, Prom: own},
		Open: &Open{Rate: engine.Constant(100, 4*time.Second), MaxUsers: 2, PreUsers: 2}}
	res := run(t, b)
	close(stop)
	at := <-scraped

	a := res.Arrivals
	if a == nil || a.Intended < 398 || a.Intended > 402 || math.Abs(a.IntendedRPS-100) > 3 {
		t.Fatalf("arrivals %+v; want the 400 of 100/s for 4 s handed out", a)
	}
	// 2 users of ~100 ms serve ~20 a second: ~80 of 400 start.
	if a.Started < 60 || a.Started > 90 || a.Dropped != a.Intended-a.Started || a.DroppedPct < 75 {
		t.Errorf("%d started, %d dropped (%.1f%%); want ~80 started, the rest dropped", a.Started, a.Dropped, a.DroppedPct)
	}
	// With --max-wait 0 none waits for a user: an arrival starts when it
	// is due or is dropped. One waiting would start up to the server's
	// 100 ms late (~50 ms as a median); the median here is the
	// dispatcher's wake-up, well under a millisecond, and stays so when a
	// busy machine makes a few of them late (3 of 67 were, past 10 ms,
	// beside the flake hunt's test command).
	if a.Lateness.P50Ms > 10 {
		t.Errorf("arrivals' lateness %+v: with --max-wait 0 none waits, and the schedule never catches up late", a.Lateness)
	}
	for _, p := range res.Timeline {
		if p.T > res.Window.Start+0.5 && p.T < res.Window.End-0.5 && (p.Arrivals+p.Dropped < 80 || p.Arrivals+p.Dropped > 120) {
			t.Errorf("second at %.1f s: %d started + %d dropped; want the schedule's 100 a second", p.T, p.Arrivals, p.Dropped)
		}
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "were dropped: no user of the pool (--max-users 2)") }) {
		t.Errorf("no note on the dropped arrivals: %q", res.Notes)
	}
	r := health.Evaluate(context.Background(), prom.NewEmbedded(store), []health.Check{health.DroppedArrivals(2 * time.Second)}, at)[0]
	t.Logf("%d intended (%.1f/s), %d started, %d dropped (%.1f%%), %d late; check %q = %.1f, fired %v",
		a.Intended, a.IntendedRPS, a.Started, a.Dropped, a.DroppedPct, a.Late, r.Name, r.Value, r.Fired)
	if !r.Fired || r.Value < 70 || r.Value > 90 {
		t.Errorf("the dropped-arrivals check: %+v; want it fired at ~80%%", r)
	}
}

// A run whose generator's lateness is a visible share of the latency's
// p99 says so with both figures and the service time's (issue 54: at a
// quarter of one core's rate, 8.9 ms of a 16.7 ms p99 were headroom's);
// one where it is a sliver, or under a millisecond, says nothing.
func TestLatenessShareOfTheP99(t *testing.T) {
	arrivals := func(p99 float64) *result.Arrivals {
		return &result.Arrivals{Started: 1000, Lateness: result.Lateness{P99Ms: p99}}
	}
	service := &result.ServiceTimes{Totals: metrics.Summary{P99Ms: 7.1}}
	note := latenessShare(arrivals(8.9), metrics.Summary{P99Ms: 16.7}, service)
	for _, want := range []string{"53% of the latency's p99", "8.9 ms late (p99)", "p99 16.7 ms", "target's part, has p99 7.1 ms"} {
		if !strings.Contains(note, want) {
			t.Errorf("lateness 8.9 of a p99 of 16.7: note %q; want it to say %q", note, want)
		}
	}
	for _, c := range []struct {
		lateness, p99 float64
		service       *result.ServiceTimes
	}{
		{1.5, 16.7, service}, // under a tenth
		{0.8, 2, service},    // under a millisecond
		{8.9, 0, service},    // no latency measured
		{8.9, 16.7, nil},     // the closed model: no service times
	} {
		if note := latenessShare(arrivals(c.lateness), metrics.Summary{P99Ms: c.p99}, c.service); note != "" {
			t.Errorf("lateness %g of a p99 of %g: note %q; want none", c.lateness, c.p99, note)
		}
	}
}

// A run whose responses waited unread for a busy headroom for a visible
// share of the latency's p99 says so, with both figures; a sliver, under 5
// ms (a light run's wake-ups: p99 1.3 ms of a 4.6 ms p99 at 200 chat users
// on one agent), or no stamped response says nothing.
func TestUnreadShareOfTheP99(t *testing.T) {
	phases := func(p50, p99 float64) result.Phases {
		return result.Phases{"wait": {}, "unread": {Totals: metrics.Summary{P50Ms: p50, P99Ms: p99}}}
	}
	note := unreadShare(phases(11, 23.9), metrics.Summary{P99Ms: 24.1})
	for _, want := range []string{"up to 23.9 ms (p99; p50 11.00 ms)", "99% of the latency's p99 of 24.1 ms", "headroom's own (its process busy, or stalled), not the target's"} {
		if !strings.Contains(note, want) {
			t.Errorf("unread 23.9 of a p99 of 24.1: note %q; want it to say %q", note, want)
		}
	}
	for _, c := range []struct {
		ps  result.Phases
		p99 float64
	}{
		{phases(0.1, 1.5), 16.7},          // under a tenth
		{phases(0.06, 1.3), 4.6},          // under 5 ms
		{phases(5, 8.9), 0},               // no latency measured
		{result.Phases{"wait": {}}, 16.7}, // nothing stamped
	} {
		if note := unreadShare(c.ps, metrics.Summary{P99Ms: c.p99}); note != "" {
			t.Errorf("%v of a p99 of %g: note %q; want none", c.ps["unread"], c.p99, note)
		}
	}
}
