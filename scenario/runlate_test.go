package scenario

import (
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/transport"
)

// servedIn answers after a fixed service time.
type servedIn struct{ service time.Duration }

func (d servedIn) Do(_ *transport.Request, resp *transport.Response) {
	*resp = transport.Response{Status: 200, Latency: d.service}
}
func (servedIn) Cookies() map[string]string { return nil }

// TestRunLateCountsFromTheIntendedStart: an action run for an arrival
// 300 ms late records its requests and itself from the intended start,
// each shifted by the lateness alone, with the service time beside it;
// a long poll keeps its time waited; Run, after it, is the closed model's.
func TestRunLateCountsFromTheIntendedStart(t *testing.T) {
	sc, err := load("u.star", `
def act(user):
    user.http.get("/a", name="a")
    user.http.get("/b", name="b")
    user.http.get("/sync", name="sync", long_poll=True)
actions = [action("A", act)]
`)
	if err != nil {
		t.Fatal(err)
	}
	rec := &samples{}
	u := NewUser(sc, Env{ID: 1, Seed: 1, HTTP: servedIn{20 * time.Millisecond}, Record: rec})
	if out := u.RunLate(sc.Actions[0], 300*time.Millisecond); out != metrics.OK {
		t.Fatalf("outcome %v", out)
	}
	byName := map[string]metrics.Sample{}
	for _, s := range *rec {
		byName[s.Name] = s
	}
	for _, name := range []string{"a", "b"} {
		s := byName[name]
		if !s.Intended || s.Latency != 320*time.Millisecond || s.Service != 20*time.Millisecond {
			t.Errorf("request %s: intended %v, latency %v, service %v; want true, 320ms, 20ms", name, s.Intended, s.Latency, s.Service)
		}
	}
	if s := byName["sync"]; s.Intended || s.Latency != 20*time.Millisecond {
		t.Errorf("the long poll: intended %v, latency %v; want its time waited alone", s.Intended, s.Latency)
	}
	if a := byName["A"]; !a.Intended || a.Latency != a.Service+300*time.Millisecond {
		t.Errorf("the action: intended %v, latency %v, service %v", a.Intended, a.Latency, a.Service)
	}
	*rec = (*rec)[:0]
	u.Run(sc.Actions[0])
	for _, s := range *rec {
		if s.Intended || s.Service != 0 {
			t.Errorf("Run after RunLate: %s still counted from an intended start", s.Name)
		}
	}
}
