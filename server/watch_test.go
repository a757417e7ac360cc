package server

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/headroom-dev/headroom/health"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/testbed"
)

// TestWatchTestbed scrapes a real testbed before and after some sign-ups
// and checks the window holds exactly those requests, at the modelled
// service time.
func TestWatchTestbed(t *testing.T) {
	srv := testbed.New(testbed.Config{Workers: 4, Scale: 1})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	start := time.Now()
	w := New([]string{ts.URL + "/metrics"}, start)
	sc, err := health.NewScraper(nil, []string{ts.URL + "/metrics"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sc.Gathered = w.Gathered
	scrape := func() { w.Attempted(sc.Scrape(context.Background(), time.Now())) }

	scrape()
	from := w.Mark(time.Now())
	const n = 20
	for i := range n {
		body := fmt.Sprintf(`{"username":"u%d","email":"u%d@example.com","password":"pw-%d-long"}`, i, i, i)
		resp, err := http.Post(ts.URL+"/api/v4/users", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create user: %s", resp.Status)
		}
	}
	time.Sleep(50 * time.Millisecond)
	scrape()
	to := w.Mark(time.Now())
	res := w.Result(from, to)

	if len(res.Targets) != 1 {
		t.Fatalf("%d targets, want 1", len(res.Targets))
	}
	tg := res.Targets[0]
	if tg.Kind != "process" || tg.Scrapes != 2 || tg.Failed != 0 {
		t.Errorf("kind %q, scrapes %d, failed %d: want process, 2, 0", tg.Kind, tg.Scrapes, tg.Failed)
	}
	if strings.Join(tg.Has, ",") != "cpu,memory,goroutines" {
		t.Errorf("has %v, want cpu, memory and goroutines", tg.Has)
	}
	if tg.Timeline[1].MemoryMB <= 0 || tg.Timeline[1].Goroutines <= 0 {
		t.Errorf("point %+v: want heap and goroutines", tg.Timeline[1])
	}
	api := find(t, tg.Window.Timings, "mattermost_api_time", "CreateUser")
	if api.Count != n {
		t.Errorf("API CreateUser count %v, want %d (only the window's requests)", api.Count, n)
	}
	// One request at a time: no queue, so the model's service time.
	model := float64(srv.ServiceTime("CreateUser")) / 1e6
	if api.MeanMs < model || api.MeanMs > 1.3*model {
		t.Errorf("API CreateUser mean %.2f ms, want the modelled %.1f", api.MeanMs, model)
	}
	if api.P99Ms < api.MeanMs {
		t.Errorf("p99 %.2f ms below the mean %.2f", api.P99Ms, api.MeanMs)
	}
	st := find(t, tg.Window.Timings, "mattermost_db_store_time", "UserStore.Save")
	if st.Count != n || math.Abs(st.MeanMs-4) > 0.5 {
		t.Errorf("UserStore.Save: %v calls, mean %.2f ms; want %d at the modelled 4 ms", st.Count, st.MeanMs, n)
	}
}

func find(t *testing.T, gs []result.TimingGroup, metric, name string) result.Timing {
	t.Helper()
	for _, g := range gs {
		for _, it := range g.Items {
			if g.Metric == metric && it.Name == name {
				return it
			}
		}
	}
	t.Fatalf("no %s{%s} in %+v", metric, name, gs)
	return result.Timing{}
}

func TestQuantile(t *testing.T) {
	bounds := []float64{0.01, 0.1, 1, math.Inf(1)}
	for _, c := range []struct {
		q      float64
		counts []float64
		want   float64
	}{
		{0.5, []float64{0, 100, 100, 100}, 0.055},    // all in (0.01, 0.1]: the middle
		{0.99, []float64{50, 100, 100, 100}, 0.0982}, // 99th of 100: 49/50 of the way through the second bucket
		{0.99, []float64{0, 0, 0, 10}, 1},            // all above the last finite bound
	} {
		n := c.counts[len(c.counts)-1]
		if got := quantile(c.q, bounds, c.counts, n); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("quantile(%v, %v) = %v, want %v", c.q, c.counts, got, c.want)
		}
	}
}

func TestTimingCounterReset(t *testing.T) {
	begin := cum{count: 100, sum: 10, bounds: []float64{1, math.Inf(1)}, counts: []float64{100, 100}}
	end := cum{count: 10, sum: 2, bounds: begin.bounds, counts: []float64{10, 10}}
	got, ok := timing("x", begin, end, 10)
	if !ok || got.Count != 10 || got.MeanMs != 200 || got.RPS != 1 {
		t.Errorf("after a restart got %+v, %v; want the 10 requests since, mean 200 ms, 1/s", got, ok)
	}
}

// hist is a one-series mattermost_api_time family with n requests of 10 ms.
func hist(n uint64) []*dto.MetricFamily {
	name, label, value := "mattermost_api_time", "handler", "GetPosts"
	typ := dto.MetricType_HISTOGRAM
	sum, le, inf := 0.01*float64(n), 0.025, math.Inf(1)
	return []*dto.MetricFamily{{Name: &name, Type: &typ, Metric: []*dto.Metric{{
		Label: []*dto.LabelPair{{Name: &label, Value: &value}},
		Histogram: &dto.Histogram{SampleCount: &n, SampleSum: &sum, Bucket: []*dto.Bucket{
			{UpperBound: &le, CumulativeCount: &n}, {UpperBound: &inf, CumulativeCount: &n}}},
	}}}}
}

// TestMarkWaitsForItsScrape: a run marks a tick and starts that tick's
// scrape at the same moment; the mark must get that scrape's state even
// though it comes back later, not the previous second's.
func TestMarkWaitsForItsScrape(t *testing.T) {
	start := time.Now()
	w := New([]string{"http://127.0.0.1:1/metrics"}, start)
	url := "http://127.0.0.1:1/metrics"
	w.Gathered(url, hist(100), start) // the previous tick
	from := w.Mark(start.Add(time.Second))
	w.Gathered(url, hist(150), start.Add(time.Second)) // that tick's scrape, back after the mark
	w.Gathered(url, hist(400), start.Add(2*time.Second))
	to := w.Mark(start.Add(3 * time.Second)) // no scrape after it: the run ended; the latest state
	got := w.Windows(from, to)[0].Timings[0].Items[0]
	if got.Count != 250 || math.Abs(got.MeanMs-10) > 1e-9 {
		t.Errorf("window %+v: want the 250 requests after the second scrape, at 10 ms", got)
	}
	// A mark taken when the scrape of its tick is already in: that state.
	m := w.Mark(start.Add(2*time.Second + 10*time.Millisecond))
	w.Gathered(url, hist(500), start.Add(3*time.Second))
	if got := w.Windows(m, w.Mark(start.Add(3*time.Second)))[0].Timings[0].Items[0]; got.Count != 100 {
		t.Errorf("window %+v: want 100 requests", got)
	}
}

func TestTimelineMeanPerScrape(t *testing.T) {
	start := time.Now()
	url := "http://127.0.0.1:1/metrics"
	w := New([]string{url}, start)
	w.Gathered(url, hist(100), start)
	w.Gathered(url, hist(100), start.Add(time.Second)) // nothing new
	w.Gathered(url, hist(150), start.Add(2*time.Second))
	tl := w.Result(nil, nil).Targets[0].Timeline
	if len(tl) != 1 || math.Abs(tl[0].MeanMs["mattermost_api_time"]-10) > 1e-9 || tl[0].T != 2 {
		t.Errorf("timeline %+v: want one point at 2 s, a mean of 10 ms over the 50 new requests", tl)
	}
}
