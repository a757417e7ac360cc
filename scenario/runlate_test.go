package scenario

import (
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/transport"
)

// servedIn answers after a fixed service time, its response read held
// after it arrived (transport.Response.Held).
type servedIn struct{ service, held time.Duration }

func (d servedIn) Do(_ *transport.Request, resp *transport.Response) {
	*resp = transport.Response{Status: 200, Latency: d.service + d.held, Held: d.held}
}
func (servedIn) Cookies() map[string]string { return nil }

// twoAndALongPoll is an action of two requests and a long poll.
const twoAndALongPoll = `
def act(user):
    user.http.get("/a", name="a")
    user.http.get("/b", name="b")
    user.http.get("/sync", name="sync", long_poll=True)
actions = [action("A", act)]
`

// TestRunLateCountsFromTheIntendedStart: an action run for an arrival
// 300 ms late records its requests and itself from the intended start,
// each shifted by the lateness alone, with the service time beside it;
// a long poll keeps its time waited; Run, after it, is the closed model's.
// The service time leaves out the time a response waited to be read.
func TestRunLateCountsFromTheIntendedStart(t *testing.T) {
	sc, err := load("u.star", twoAndALongPoll)
	if err != nil {
		t.Fatal(err)
	}
	rec := &samples{}
	u := NewUser(sc, Env{ID: 1, Seed: 1, HTTP: servedIn{service: 20 * time.Millisecond, held: 5 * time.Millisecond}, Record: rec})
	if out := u.RunLate(sc.Actions[0], 300*time.Millisecond); out != metrics.OK {
		t.Fatalf("outcome %v", out)
	}
	byName := map[string]metrics.Sample{}
	for _, s := range *rec {
		byName[s.Name] = s
	}
	for _, name := range []string{"a", "b"} {
		s := byName[name]
		if !s.Intended || s.Latency != 325*time.Millisecond || s.Service != 20*time.Millisecond {
			t.Errorf("request %s: intended %v, latency %v, service %v; want true, 325ms, 20ms (the 5 ms its response was held unread is the generator's)", name, s.Intended, s.Latency, s.Service)
		}
	}
	if s := byName["sync"]; s.Intended || s.Latency != 25*time.Millisecond {
		t.Errorf("the long poll: intended %v, latency %v; want its time waited alone", s.Intended, s.Latency)
	}
	if a := byName["A"]; !a.Intended || a.Latency < 300*time.Millisecond { // its service time: TestActionServiceLeavesOutUnreadResponses
		t.Errorf("the action: intended %v, latency %v; want true, from the intended start", a.Intended, a.Latency)
	}
	*rec = (*rec)[:0]
	u.Run(sc.Actions[0])
	for _, s := range *rec {
		if s.Intended || s.Service != 0 {
			t.Errorf("Run after RunLate: %s still counted from an intended start", s.Name)
		}
	}
}

// clockedIn is servedIn on a clock of its own, which each request moves
// on by its whole latency, so that the action that sends them lasts as
// long as they do.
type clockedIn struct {
	servedIn
	now *time.Time
}

func (d clockedIn) Do(req *transport.Request, resp *transport.Response) {
	d.servedIn.Do(req, resp)
	*d.now = d.now.Add(resp.Latency)
}

// TestActionServiceLeavesOutUnreadResponses: an action's service time,
// like its requests', leaves out the time their responses waited unread
// in the generator, the long poll's too: three requests of 20 ms each
// held 5 ms are an action of 75 ms and a service time of 60.
func TestActionServiceLeavesOutUnreadResponses(t *testing.T) {
	sc, err := load("u.star", twoAndALongPoll)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1e9, 0)
	rec := &samples{}
	u := NewUser(sc, Env{ID: 1, Seed: 1, Now: func() time.Time { return now }, Record: rec,
		HTTP: clockedIn{servedIn{service: 20 * time.Millisecond, held: 5 * time.Millisecond}, &now}})
	for range 2 { // the second: nothing of the first is left over
		*rec = (*rec)[:0]
		if out := u.RunLate(sc.Actions[0], 300*time.Millisecond); out != metrics.OK {
			t.Fatalf("outcome %v", out)
		}
		a := (*rec)[len(*rec)-1]
		if a.Name != "A" || !a.Intended || a.Latency != 375*time.Millisecond || a.Service != 60*time.Millisecond {
			t.Errorf("the action: %s, intended %v, latency %v, service %v; want A, true, 375ms, 60ms", a.Name, a.Intended, a.Latency, a.Service)
		}
	}
}
