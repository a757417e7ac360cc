package metrics

import (
	"math/rand/v2"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
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
		if !x.Hist().Equals(y.Hist()) {
			t.Errorf("%s: merged histogram differs from the single one", name)
		}
		for _, q := range []float64{50, 90, 99, 99.9, 100} {
			if a, b := x.Hist().ValueAtPercentile(q), y.Hist().ValueAtPercentile(q); a != b {
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
	if len(st.Messages) != MaxMessages+1 || st.Messages["other"].Count != 100-MaxMessages {
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

// TestStatFollowsItsBuckets: whatever is recorded into a Stat, merged into
// it (from a Stat that follows its buckets or one that does not) or
// written into its Hist directly, its Hist holds what a plain histogram
// does, and its buckets are Hist's whenever Sparse says so (that it
// encodes Hist's buckets either way: wire.TestStatsEncodeAsTheirHist).
func TestStatFollowsItsBuckets(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	value := func() int64 { return 1 + r.Int64N(HighestMicros) }
	record := func(st *Stat, ref *hdr.Histogram, n int) {
		for range n {
			v := value()
			st.Add(&Sample{Latency: time.Duration(v) * time.Microsecond})
			ref.RecordValue(v)
		}
	}
	followed, sparseFigures := 0, 0
	for range 30 {
		st, ref := NewStat(), NewHistogram()
		for range 12 {
			switch r.IntN(5) {
			case 0, 1:
				record(st, ref, r.IntN(2*maxSparse))
			case 2: // a Stat that follows its buckets
				o := NewStat()
				record(o, ref, r.IntN(maxSparse))
				st.Merge(o)
			case 3: // one whose Hist was written to directly, as result's reading does
				o := NewStat()
				for range r.IntN(50) {
					v := value()
					o.Hist().RecordValue(v)
					ref.RecordValue(v)
				}
				o.Count = o.Hist().TotalCount()
				o.Status[200] = o.Count
				if r.IntN(2) == 0 {
					st.Merge(o)
				} else {
					st.Hist().Merge(o.Hist())
					st.Count += o.Count
					st.Status[200] += o.Count
				}
			case 4:
				st.Reset()
				ref.Reset()
			}
			if !st.dense && st.Count > 0 {
				sparseFigures++
			}
			sameFigures(t, st, ref, r)
			if r.IntN(3) == 0 { // asking for Hist makes st dense until Reset
				if !st.Hist().Equals(ref) {
					t.Fatal("Hist differs from a plain histogram of the same values")
				}
			} else {
				cp := NewStat()
				cp.Merge(st)
				if !cp.Hist().Equals(ref) {
					t.Fatal("Hist of a copy differs from a plain histogram of the same values")
				}
			}
			want := hdr.NewPacked(LowestMicros, HighestMicros, SigFigs)
			want.MergeFrom(ref)
			if b := st.Sparse(); b != nil {
				followed++
				if !slices.Equal(buckets(b), buckets(want)) {
					t.Fatal("sparse buckets differ from Hist's")
				}
			}
		}
	}
	if followed == 0 || sparseFigures == 0 {
		t.Errorf("%d Stats followed their buckets, %d gave figures from them alone", followed, sparseFigures)
	}
	st := NewStat()
	for i := range 30 {
		st.Add(&Sample{Latency: time.Duration(100+i) * time.Millisecond})
	}
	if st.Sparse() == nil {
		t.Error("a Stat of 30 samples does not follow its buckets")
	}
	for i := range 2 * maxSparse {
		st.Add(&Sample{Latency: time.Duration(1+i) * time.Second})
	}
	if st.Sparse() != nil {
		t.Errorf("a Stat past %d buckets follows them", maxSparse)
	}
	if st.Reset(); st.Sparse() == nil {
		t.Error("a Stat reset does not follow its buckets again")
	}
}

// sameFigures fails t unless st's figures (Summarize, Percentile, Above)
// are those of ref, a plain histogram of the same values.
func sameFigures(t *testing.T, st *Stat, ref *hdr.Histogram, r *rand.Rand) {
	t.Helper()
	d := NewStat() // its buckets empty, its Hist ref's: dense
	d.Hist().Merge(ref)
	d.Count, d.Status = st.Count, st.Status
	if got, want := st.Summarize("x", time.Second), d.Summarize("x", time.Second); !reflect.DeepEqual(got, want) {
		t.Fatalf("summary %+v, want %+v", got, want)
	}
	for range 4 {
		q, us := 100*r.Float64(), r.Int64N(HighestMicros)
		if ref.TotalCount() > 0 && r.IntN(2) == 0 {
			us = ref.ValueAtPercentile(100 * r.Float64()) // near a recorded value
		}
		if got, want := st.Percentile(q), ref.ValueAtPercentile(q); got != want {
			t.Fatalf("percentile %v: %d, want %d", q, got, want)
		}
		if got, want := st.Above(time.Duration(us)*time.Microsecond), d.Above(time.Duration(us)*time.Microsecond); got != want {
			t.Fatalf("above %d µs: %d, want %d", us, got, want)
		}
	}
}

// buckets lists the buckets of p as value, count pairs.
func buckets(p *hdr.PackedHistogram) [][2]int64 {
	var out [][2]int64
	for v, n := range p.ForEachBucket {
		out = append(out, [2]int64{v, n})
	}
	return out
}
