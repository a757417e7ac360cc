package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestIntendedSamplesKeepTheirServiceTime: a request of the open model
// counts from its intended start in Requests and from its send in
// Service.Requests, one sample in each; a cancelled one is cancelled in
// both; the closed model's samples leave Service nil.
func TestIntendedSamplesKeepTheirServiceTime(t *testing.T) {
	s := NewSnapshot()
	s.Add(&Sample{Kind: Request, Name: "GET /", Status: 200, Latency: 3 * time.Millisecond})
	s.Add(&Sample{Kind: Request, Name: "GET /", Status: 200, Latency: time.Millisecond, Setup: true})
	if s.Service != nil {
		t.Fatalf("closed-model samples made a service table: %+v", s.Service)
	}
	s.Add(&Sample{Kind: Request, Name: "GET /", Status: 200, Latency: 900 * time.Millisecond, Service: 2 * time.Millisecond, Intended: true})
	s.Add(&Sample{Kind: Request, Name: "GET /", Outcome: Canceled, Latency: time.Second, Service: time.Second, Intended: true})
	s.Add(&Sample{Kind: Action, Name: "A", Latency: 905 * time.Millisecond, Service: 7 * time.Millisecond, Intended: true})
	s.Add(&Sample{Kind: Poll, Name: "GET /sync", Latency: 30 * time.Second, Service: 30 * time.Second, Intended: true})

	req, svc := s.Requests["GET /"], s.Service.Requests["GET /"]
	if req.Count != 2 || req.Canceled != 1 || req.Hist().Max() < 899_000 {
		t.Errorf("requests from the intended start: %d counted, %d canceled, max %d µs", req.Count, req.Canceled, req.Hist().Max())
	}
	if svc == nil || svc.Count != 1 || svc.Canceled != 1 || svc.Status[200] != 1 || svc.Hist().Max() > 2_100 {
		t.Fatalf("service times: %+v", svc)
	}
	if a := s.Service.Actions["A"]; a == nil || a.Count != 1 || a.Hist().Max() > 7_100 {
		t.Errorf("the action's service time: %+v", a)
	}
	if len(s.Service.Polls) != 0 || s.Setup.Service != nil {
		t.Errorf("a long poll or a setup sample got a service time")
	}

	// Merged and reset as the other tables are.
	m := NewSnapshot()
	m.Merge(s)
	m.Merge(s)
	if got := m.Service.Requests["GET /"]; got.Count != 2 || got.Canceled != 2 {
		t.Errorf("merged twice: %+v", got)
	}
	m.Reset()
	if m.Service.Requests["GET /"].Counted() {
		t.Errorf("Reset left service times")
	}
}

// TestArrivalsCountStartsDropsAndLateness: started arrivals are counted
// with how late they started; dropped and cancelled ones are counted
// apart, out of the histogram; a name with drops only is summarized, in
// the timeline point and on /metrics.
func TestArrivalsCountStartsDropsAndLateness(t *testing.T) {
	p := NewProm()
	rec := NewRecorder(2, p, time.Now)
	for i := range 10 {
		rec.Shard(i).Record(Sample{Kind: Arrival, Name: "(arrivals)", Latency: time.Duration(i) * 100 * time.Millisecond})
	}
	for i := range 4 {
		rec.Shard(i).Record(Sample{Kind: Arrival, Name: "(arrivals)", Outcome: DroppedArrival})
	}
	rec.Shard(0).Record(Sample{Kind: Arrival, Name: "(arrivals)", Outcome: Canceled})
	rec.Shard(0).Record(Sample{Kind: Arrival, Name: "(other)", Outcome: DroppedArrival})
	s := NewSnapshot()
	rec.Drain(s)
	st := s.Arrivals["(arrivals)"]
	if st.Count != 10 || st.Dropped != 4 || st.Canceled != 1 || st.Hist().TotalCount() != 10 || st.Hist().Max() < 899_000 {
		t.Fatalf("arrivals: %d started, %d dropped, %d canceled, %d in the histogram (max %d µs)",
			st.Count, st.Dropped, st.Canceled, st.Hist().TotalCount(), st.Hist().Max())
	}
	if len(s.Requests) != 0 || len(s.Actions) != 0 {
		t.Errorf("arrivals filed under requests or actions")
	}
	sums := s.Summaries(Arrival, time.Second)
	if len(sums) != 2 || sums[0].Name != "(arrivals)" || sums[0].Dropped != 4 || sums[1].Dropped != 1 || sums[1].Count != 0 {
		t.Errorf("summaries: %+v", sums)
	}
	pt := PointOf(s, s.Start, 0, 0, NewStat())
	if pt.Arrivals != 10 || pt.Dropped != 5 || pt.Requests != 0 {
		t.Errorf("timeline point: %d arrivals, %d dropped, %d requests", pt.Arrivals, pt.Dropped, pt.Requests)
	}
	rr := httptest.NewRecorder()
	p.Handler().ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	body := rr.Body.String()
	for _, want := range []string{
		`loadtest_arrivals_total{outcome="started"} 10`,
		`loadtest_arrivals_total{outcome="dropped"} 5`,
		`loadtest_arrival_lateness_seconds_count 10`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, `name="(arrivals)"`) {
		t.Errorf("arrivals exposed as requests")
	}
}

// TestAbove counts the samples past a latency: none past the max, all
// past 0 (a sample is at least 1 µs), the late arrivals past
// LateArrival; dropped ones are in none.
func TestAbove(t *testing.T) {
	st := NewStat()
	for _, ms := range []int{0, 1, 5, 9, 11, 20, 300} {
		st.Add(&Sample{Kind: Arrival, Latency: time.Duration(ms) * time.Millisecond})
	}
	st.Add(&Sample{Kind: Arrival, Outcome: DroppedArrival})
	for _, c := range []struct {
		d    time.Duration
		want int64
	}{{0, 7}, {LateArrival, 3}, {250 * time.Millisecond, 1}, {time.Second, 0}} {
		if got := st.Above(c.d); got != c.want {
			t.Errorf("Above(%v) = %d, want %d", c.d, got, c.want)
		}
	}
	if n := NewStat().Above(0); n != 0 {
		t.Errorf("an empty Stat has %d above 0", n)
	}
}
