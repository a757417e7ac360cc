package serverstats

import (
	"math"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

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
