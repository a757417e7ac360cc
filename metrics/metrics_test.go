package metrics

import (
	"math/rand/v2"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestShardsMergeExactly(t *testing.T) {
	// The same samples recorded into one Stat, and spread over shards and
	// drained in several intervals, must give identical figures.
	r := rand.New(rand.NewPCG(1, 1))
	var samples []Sample
	for i := range 50000 {
		s := Sample{Kind: Request, Name: []string{"a", "b", "c"}[i%3], Status: 200,
			Latency: time.Duration(r.ExpFloat64()*20e6) + time.Microsecond, BytesIn: 100}
		if i%97 == 0 {
			s.Outcome, s.Status, s.Message = Failed, 503, "status 503"
		}
		samples = append(samples, s)
	}
	one := NewSnapshot()
	for i := range samples {
		one.Add(&samples[i])
	}

	now := time.Unix(0, 0)
	rec := NewRecorder(4, nil, func() time.Time { return now })
	total := NewSnapshot()
	interval := NewSnapshot()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(samples); i += 8 {
				rec.Shard(w).Record(samples[i])
			}
		}()
		if w%3 == 0 { // drain while others record
			interval.Reset()
			rec.Drain(interval)
			total.Merge(interval)
		}
	}
	wg.Wait()
	interval.Reset()
	rec.Drain(interval)
	total.Merge(interval)

	for _, name := range []string{"a", "b", "c"} {
		x, y := one.Requests[name], total.Requests[name]
		if x.Count != y.Count || x.Errors != y.Errors || x.BytesIn != y.BytesIn || x.Status[503] != y.Status[503] {
			t.Errorf("%s: counts differ: %+v vs %+v", name, x.Summarize(name, 0), y.Summarize(name, 0))
		}
		if !x.Hist.Equals(y.Hist) {
			t.Errorf("%s: merged histogram differs from the single one", name)
		}
		for _, q := range []float64{50, 90, 99, 99.9, 100} {
			if a, b := x.Hist.ValueAtPercentile(q), y.Hist.ValueAtPercentile(q); a != b {
				t.Errorf("%s: p%v %d vs %d", name, q, a, b)
			}
		}
	}
}

func TestHistogramKeepsThreeSignificantDigits(t *testing.T) {
	st := NewStat()
	for _, ms := range []float64{1.234, 12.34, 123.4, 1234, 12340} {
		st.Reset()
		st.Add(&Sample{Latency: time.Duration(ms * float64(time.Millisecond))})
		got := st.Summarize("x", 0).P50Ms
		if rel := (got - ms) / ms; rel < -0.001 || rel > 0.001 {
			t.Errorf("%.3f ms recorded as %.3f ms (%.3f%% off); Locust-style rounding must not happen", ms, got, 100*rel)
		}
	}
}

func TestCanceledSamplesStayOutOfTheFigures(t *testing.T) {
	st := NewStat()
	st.Add(&Sample{Latency: time.Millisecond, Status: 200})
	st.Add(&Sample{Latency: time.Hour, Outcome: Canceled})
	s := st.Summarize("x", time.Second)
	if s.Count != 1 || s.Canceled != 1 || s.MaxMs > 2 {
		t.Errorf("summary %+v: a canceled request leaked into count or latency", s)
	}
}

func TestMessagesAreBounded(t *testing.T) {
	st := NewStat()
	for i := range 100 {
		st.Add(&Sample{Outcome: Failed, Message: strings.Repeat("x", i+1)})
	}
	if len(st.Messages) != maxMessages+1 || st.Messages["other"].Count != 100-maxMessages {
		t.Errorf("%d distinct messages, other=%d", len(st.Messages), st.Messages["other"].Count)
	}
}

func TestPromExposesReferenceNames(t *testing.T) {
	p := NewProm()
	p.SetUsers(7)
	p.Observe(Sample{Kind: Request, Name: "GET /x", Status: 200, Latency: 3 * time.Millisecond})
	p.Observe(Sample{Kind: Request, Name: "GET /x", Status: 503, Outcome: Failed, Latency: time.Millisecond})
	p.Observe(Sample{Kind: Request, Name: "GET /x", Outcome: Timeout, Latency: time.Second})
	p.Observe(Sample{Kind: Action, Name: "Browse", Outcome: OK})
	rr := httptest.NewRecorder()
	p.Handler().ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	body := rr.Body.String()
	for _, want := range []string{
		`loadtest_http_request_time_count{name="GET /x"} 3`,
		`loadtest_http_errors_total{name="GET /x",status_code="503"} 1`,
		`loadtest_http_timeouts_total{name="GET /x"} 1`,
		`loadtest_users_active 7`,
		`loadtest_actions_total{action="Browse",outcome="ok"} 1`,
		`loadtest_http_request_time_bucket{name="GET /x",le="+Inf"} 3`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	b := RequestTimeBuckets()
	if b[0] > 0.001 || b[len(b)-1] < 10 {
		t.Errorf("buckets span %v..%v s, want at least 1 ms..10 s", b[0], b[len(b)-1])
	}
	for i := 1; i < len(b); i++ {
		if b[i]/b[i-1] > 1.21 {
			t.Errorf("bucket %v -> %v is too coarse for a p99", b[i-1], b[i])
		}
	}
}

func TestRequestNamesAreBounded(t *testing.T) {
	rec := NewRecorder(2, nil, time.Now)
	for i := range MaxNames + 50 {
		rec.Shard(i).Record(Sample{Kind: Request, Name: "GET /items/" + strconv.Itoa(i), Status: 200})
	}
	rec.Shard(0).Record(Sample{Kind: Request, Name: "GET /items/7", Status: 200}) // known: kept
	snap := NewSnapshot()
	rec.Drain(snap)
	if len(snap.Requests) != MaxNames+1 || snap.Requests[OtherName].Count != 50 || snap.Requests["GET /items/7"].Count != 2 {
		t.Errorf("%d names, %v under %q", len(snap.Requests), snap.Requests[OtherName], OtherName)
	}
	if !rec.Overflowed() {
		t.Error("overflow not reported")
	}
}
