package remotewrite

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/prompb"

	"github.com/headroom-dev/headroom/internal/testing/memhttp"
)

// receiver is a remote-write endpoint: it decodes what it is sent as
// Prometheus's receiver does, and answers what status says (200 when it
// returns 0).
type receiver struct {
	mu       sync.Mutex
	got      []prompb.TimeSeries
	requests int
	auth     string
	status   func(n int) int // n: this request's number, from 0
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	n := r.requests
	r.requests++
	r.auth = req.Header.Get("Authorization")
	r.mu.Unlock()
	if req.Header.Get("Content-Encoding") != "snappy" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not remote write", http.StatusUnsupportedMediaType)
		return
	}
	if r.status != nil {
		if code := r.status(n); code != 0 {
			http.Error(w, "answer "+fmt.Sprint(code)+"\x1b[2J", code)
			return
		}
	}
	b, _ := io.ReadAll(req.Body)
	raw, err := snappy.Decode(nil, b)
	var wr prompb.WriteRequest
	if err == nil {
		err = wr.Unmarshal(raw)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.got = append(r.got, wr.Timeseries...)
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) series() []prompb.TimeSeries {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got
}

// families is a registry of a counter, a gauge and a histogram, as
// metrics.Prom serves them, and the counter to move.
func families(t *testing.T) (func() ([]*dto.MetricFamily, error), prometheus.Counter) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "loadtest_actions_total", ConstLabels: prometheus.Labels{"action": "Post", "run": "own"}})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "loadtest_users_active"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "loadtest_http_request_time", Buckets: []float64{0.01, 0.1}})
	reg.MustRegister(c, g, h)
	c.Add(3)
	g.Set(7)
	h.Observe(0.05)
	h.Observe(0.5)
	return reg.Gather, c
}

func key(ts prompb.TimeSeries) string {
	var parts []string
	for _, l := range ts.Labels {
		parts = append(parts, l.Name+"="+l.Value)
	}
	return strings.Join(parts, ",")
}

// Series gives what a scrape of the same exposition gives: a counter and a
// gauge their values; a histogram cumulative buckets, +Inf, _sum and
// _count; the run's labels added, a series' own label winning; labels
// sorted by name.
func TestSeriesAreWhatAScrapeGives(t *testing.T) {
	gather, _ := families(t)
	fams, err := gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, ts := range Series(fams, map[string]string{"job": "headroom", "run": "first"}, 1000) {
		for i := 1; i < len(ts.Labels); i++ {
			if ts.Labels[i-1].Name >= ts.Labels[i].Name {
				t.Errorf("labels not sorted: %s", key(ts))
			}
		}
		if len(ts.Samples) != 1 || ts.Samples[0].Timestamp != 1000 {
			t.Errorf("%s: samples %+v", key(ts), ts.Samples)
		}
		got[key(ts)] = ts.Samples[0].Value
	}
	want := map[string]float64{
		"__name__=loadtest_actions_total,action=Post,job=headroom,run=own":          3,
		"__name__=loadtest_users_active,job=headroom,run=first":                     7,
		"__name__=loadtest_http_request_time_bucket,job=headroom,le=0.01,run=first": 0,
		"__name__=loadtest_http_request_time_bucket,job=headroom,le=0.1,run=first":  1,
		"__name__=loadtest_http_request_time_bucket,job=headroom,le=+Inf,run=first": 2,
		"__name__=loadtest_http_request_time_sum,job=headroom,run=first":            0.55,
		"__name__=loadtest_http_request_time_count,job=headroom,run=first":          2,
	}
	if len(got) != len(want) {
		t.Errorf("%d series, want %d: %v", len(got), len(want), got)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (%v), want %v", k, g, ok, v)
		}
	}
}

// A receiver that is down for a while loses nothing: what it could not
// take is sent again, in order, once it is back, and the last gather is
// sent as Run ends. In virtual time, over in-memory connections.
func TestWhatTheReceiverCouldNotTakeIsSentAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcv := &receiver{status: func(n int) int {
			if n < 3 {
				return http.StatusServiceUnavailable
			}
			return 0
		}}
		gather, counter := families(t)
		var warnings []string
		u, _ := url.Parse("http://writer:secret@receiver.invalid/api/v1/write")
		w := &Writer{URL: u, Gather: gather, Labels: map[string]string{"run": "r"},
			Client: &http.Client{Transport: &http.Transport{DialContext: memhttp.Dial(t, rcv)}},
			Warn:   func(s string) { warnings = append(warnings, s) }}
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { w.Run(ctx); close(done) }()
		time.Sleep(5500 * time.Millisecond) // 5 gathers: the first 3 sends refused
		counter.Add(10)
		stop()
		<-done
		st := w.Stats()
		got := rcv.series()
		if st.Sent != int64(len(got)) || st.Pending != 0 || st.Dropped != 0 || len(got) != 6*7 {
			t.Errorf("stats %+v, %d series received: want 6 gathers of 7 series, all sent once", st, len(got))
		}
		var last float64
		var stamps []int64
		for _, ts := range got {
			if key(ts) == "__name__=loadtest_actions_total,action=Post,run=own" {
				last = ts.Samples[0].Value
				stamps = append(stamps, ts.Samples[0].Timestamp)
			}
		}
		for i := 1; i < len(stamps); i++ {
			if stamps[i] <= stamps[i-1] {
				t.Errorf("samples out of order: %v", stamps)
			}
		}
		if last != 13 {
			t.Errorf("the counter's last sample %v, want 13: the gather as Run ended", last)
		}
		if rcv.auth == "" || len(warnings) != 1 || !strings.Contains(warnings[0], "503") || strings.Contains(warnings[0], "secret") || strings.Contains(warnings[0], "\x1b") {
			t.Errorf("auth %q, warnings %q: want basic auth sent, one warning of the 503, no password, no escape", rcv.auth, warnings)
		}
	})
}

// A receiver that never takes anything costs a bounded memory: past
// MaxPending the oldest samples are dropped and counted. One that refuses
// for good (400) has its batches dropped, said once.
func TestWhatIsHeldIsBounded(t *testing.T) {
	big := func() ([]*dto.MetricFamily, error) {
		f := &dto.MetricFamily{Name: strPtr("loadtest_users_active"), Type: dto.MetricType_GAUGE.Enum()}
		for i := range 60_000 {
			f.Metric = append(f.Metric, &dto.Metric{Label: []*dto.LabelPair{{Name: strPtr("n"), Value: strPtr(fmt.Sprint(i))}}, Gauge: &dto.Gauge{Value: floatPtr(1)}})
		}
		return []*dto.MetricFamily{f}, nil
	}
	for name, code := range map[string]int{"down": http.StatusServiceUnavailable, "refusing": http.StatusBadRequest} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rcv := &receiver{status: func(int) int { return code }}
				var warnings []string
				u, _ := url.Parse("http://receiver.invalid/api/v1/write")
				w := &Writer{URL: u, Gather: big, Client: &http.Client{Transport: &http.Transport{DialContext: memhttp.Dial(t, rcv)}},
					Warn: func(s string) { warnings = append(warnings, s) }}
				for range 4 {
					w.Collect()
					w.Flush(t.Context())
				}
				st := w.Stats()
				t.Logf("%+v, %d requests, warnings %q", st, rcv.requests, warnings)
				switch name {
				case "down":
					if st.Pending != MaxPending || st.Dropped != 4*60_000-MaxPending || st.Sent != 0 {
						t.Errorf("stats %+v: want %d held, the rest dropped", st, MaxPending)
					}
				case "refusing":
					if st.Pending != 0 || st.Dropped != 4*60_000 || len(warnings) != 1 || !strings.Contains(warnings[0], "refused them: 400") {
						t.Errorf("stats %+v, warnings %q: want every batch dropped, said once", st, warnings)
					}
				}
			})
		})
	}
}

func strPtr(s string) *string     { return &s }
func floatPtr(f float64) *float64 { return &f }
