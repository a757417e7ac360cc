package prom

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func TestScraper(t *testing.T) {
	reg := prometheus.NewRegistry() // two of headroom's client metrics, as the metrics package names them
	reqTime := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "loadtest_http_request_time", Buckets: prometheus.ExponentialBuckets(0.0005, 1.2, 65)}, []string{"name"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loadtest_http_errors_total"}, []string{"name", "status_code"})
	reg.MustRegister(reqTime, errs)
	reqTime.WithLabelValues("GET /a").Observe(0.25)
	errs.WithLabelValues("GET /a", "503").Add(2)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "this is { not metrics")
	}))
	defer garbage.Close()
	good := srv.URL + "/metrics"
	const down = "http://127.0.0.1:1/metrics"
	bad := garbage.URL + "/metrics"

	s := NewStore(time.Minute)
	sc, err := NewScraper(s, []string{good, down, bad}, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_700_000_000, 0)
	failed := sc.Scrape(context.Background(), at)
	if len(failed) != 2 || !strings.Contains(failed[0].Error(), down) || !strings.Contains(failed[1].Error(), bad) {
		t.Fatalf("errors %v, want two, naming %s then %s", failed, down, bad)
	}
	t.Logf("errors: %v", failed)

	ev := NewEmbedded(s)
	host := strings.TrimPrefix(srv.URL, "http://")
	for q, want := range map[string]float64{
		fmt.Sprintf(`up{job="scrape",instance=%q}`, host):                                                         1,
		`up{job="scrape",instance="127.0.0.1:1"}`:                                                                 0,
		fmt.Sprintf(`up{instance=%q}`, strings.TrimPrefix(garbage.URL, "http://")):                                0,
		fmt.Sprintf(`loadtest_http_errors_total{job="scrape",instance=%q,status_code="503"}`, host):               2,
		fmt.Sprintf(`loadtest_http_request_time_bucket{instance=%q,le="+Inf"}`, host):                             1,
		`loadtest_http_request_time_sum`:                                                                          0.25,
		`count(loadtest_http_request_time_bucket)`:                                                                66, // 65 bounds and +Inf
		`count(scrape_duration_seconds)`:                                                                          3,
		fmt.Sprintf(`histogram_quantile(0.5, sum(loadtest_http_request_time_bucket{instance=%q}) by (le))`, host): 0.25,
	} {
		got := query(t, ev, q, at)
		if q[:5] == "histo" {
			if got < 0.225 || got > 0.275 { // one sample in the bucket (0.226, 0.271]
				t.Errorf("%s = %v, want 0.25 within 10%%", q, got)
			}
		} else if got != want {
			t.Errorf("%s = %v, want %v", q, got, want)
		}
	}

	if err := sc.Check(context.Background()); err == nil || !strings.Contains(err.Error(), down) {
		t.Errorf("Check: %v, want an error naming %s", err, down)
	}
	ok, _ := NewScraper(s, []string{good}, nil)
	ok.Job = "app"
	if err := ok.Check(context.Background()); err != nil {
		t.Errorf("Check of a good target: %v", err)
	}
	if errs := ok.Scrape(context.Background(), at.Add(time.Second)); errs != nil {
		t.Errorf("Scrape of a good target: %v, want nil", errs)
	}
	if v := query(t, ev, fmt.Sprintf(`up{job="app",instance=%q}`, host), at.Add(time.Second)); v != 1 {
		t.Errorf("up with Job = app: %v", v)
	}
}

func TestNewScraperRejects(t *testing.T) {
	for _, u := range []string{"ftp://host/metrics", "127.0.0.1:9100", "http://", "://x"} {
		if _, err := NewScraper(NewStore(0), []string{u}, nil); err == nil || !strings.Contains(err.Error(), u) {
			t.Errorf("NewScraper(%q): %v, want an error naming it", u, err)
		}
	}
	sc, err := NewScraper(NewStore(0), []string{"http://example.test/metrics", "https://example.test:8443/m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sc.targets[0].instance != "example.test:80" || sc.targets[1].instance != "example.test:8443" {
		t.Errorf("instances %+v, want host:port with the default port added", sc.targets)
	}
}

// TestScrapeOfRunawayCardinalityFails: an endpoint that brings more than
// MaxScrapeSamples samples in one scrape is down for that scrape, with the
// reason, and nothing of it is stored.
func TestScrapeOfRunawayCardinalityFails(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for i := range MaxScrapeSamples + 1 {
			fmt.Fprintf(w, "runaway{id=\"%d\"} 1\n", i)
		}
	}))
	defer srv.Close()
	s := NewStore(time.Minute)
	sc, err := NewScraper(s, []string{srv.URL + "/metrics"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_700_000_000, 0)
	errs := sc.Scrape(context.Background(), at)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "100001 samples, more than 100000") {
		t.Fatalf("errors %v, want the sample limit named", errs)
	}
	ev := NewEmbedded(s)
	if got := query(t, ev, `up`, at); got != 0 {
		t.Errorf("up = %v, want 0", got)
	}
	if _, err := ev.Query(context.Background(), `count(runaway)`, at); err == nil {
		t.Errorf("the runaway series were stored")
	}
}

// query is q's value at at, or the test's end.
func query(t *testing.T, ev *Embedded, q string, at time.Time) float64 {
	t.Helper()
	v, err := ev.Query(context.Background(), q, at)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}
