package health

// Tests against the real servers users run: Prometheus 2.42 and
// node_exporter 1.5, from Debian's packages (scripts/test.sh installs them).

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/internal/testing/servertest"
	"github.com/headroom-dev/headroom/prom"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const (
	prometheusBin   = servertest.Prometheus
	nodeExporterBin = servertest.NodeExporter
)

var (
	requireBinary = servertest.Require
	freePort      = servertest.FreePort
	startServer   = servertest.Start
	waitOK        = servertest.WaitOK
)

// traffic plays 200 requests a second into m until stop is closed: every
// 50 ms, 5 GET /a and 5 POST /b with latencies cycling through 1..100 ms
// (p99 99 ms, mean 50.5 ms), and one 503 every fifth tick (2%).
func traffic(m *loadMetrics, stop <-chan struct{}) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	k := 0
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		for j := range 10 {
			name := "GET /a"
			if j%2 == 1 {
				name = "POST /b"
			}
			m.reqTime.WithLabelValues(name).Observe(float64(1+k%100) / 1000)
			k++
		}
		if n%5 == 0 {
			m.errs.WithLabelValues("POST /b", "503").Inc()
		}
	}
}

// TestRealPrometheusAgrees runs a real Prometheus that scrapes a registry every
// second, while a prom.Scraper scrapes the same registry into a prom.Store every second,
// then evaluates the same queries through prom.Remote and prom.Embedded.
func TestRealPrometheusAgrees(t *testing.T) {
	t.Parallel()
	requireBinary(t, prometheusBin, "prometheus")

	m := newLoadMetrics()
	m.errs.WithLabelValues("POST /b", "503") // exists from the first scrape
	target := httptest.NewServer(promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	defer target.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { traffic(m, stop) })
	defer wg.Wait()
	defer close(stop)

	dir := t.TempDir()
	targetAddr := strings.TrimPrefix(target.URL, "http://")
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte(prom.ScrapeConfig(targetAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	promURL := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	startServer(t, prometheusBin,
		"--config.file="+config,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+strings.TrimPrefix(promURL, "http://"),
		"--log.level=warn")
	waitOK(t, promURL+"/-/ready", 20*time.Second)

	ctx := context.Background()
	remote, err := prom.NewRemote(promURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Ping(ctx); err != nil {
		t.Fatal(err)
	}

	store := prom.NewStore(time.Minute)
	sc, err := prom.NewScraper(store, []string{target.URL + "/metrics"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sc.Job = "headroom" // as prom.ScrapeConfig names it

	// Prometheus 2.42 starts scraping about 5s after it is ready (its scrape
	// manager applies target updates every 5s). Scrape every second until
	// Prometheus has held a full window of samples too, then one more second.
	const w = 10 * time.Second
	var last, firstRemote time.Time
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := 0; firstRemote.IsZero() || last.Sub(firstRemote) < w+time.Second; i++ {
		if firstRemote.IsZero() && i == 30 { // once it has one, the loop ends w+1 s later
			t.Fatalf("prometheus has no sample of its target after 30s")
		}
		if i > 0 {
			<-tick.C
		}
		last = time.Now()
		if errs := sc.Scrape(ctx, last); errs != nil {
			t.Fatal(errs)
		}
		if firstRemote.IsZero() {
			if _, err := remote.Query(ctx, `up{job="headroom"}`, last); err == nil {
				firstRemote = last
				t.Logf("prometheus first scraped its target %v after our first scrape", time.Duration(i)*time.Second)
			}
		}
	}
	// Let Prometheus commit any scrape that started before last.
	time.Sleep(1100 * time.Millisecond)

	embedded := prom.NewEmbedded(store)
	checks := append(Defaults(w, store.Has),
		Check{Name: "request rate (/s)", Query: `sum(rate(loadtest_http_request_time_count[10s]))`},
		Check{Name: "targets up", Query: fmt.Sprintf(`sum(up{job="headroom",instance=%q})`, targetAddr)},
	)
	tolerance := map[string]float64{ // relative
		"client mean latency (s)": 0.10, "client p99 latency (s)": 0.15, "client 5xx errors (%)": 0.15,
		"client timeouts (%)": 0, "request rate (/s)": 0.10, "targets up": 0,
	}
	truth := map[string]float64{
		"client mean latency (s)": 0.0505, "client p99 latency (s)": 0.099, "client 5xx errors (%)": 2,
		"client timeouts (%)": 0, "request rate (/s)": 200, "targets up": 1,
	}
	fromRemote := Evaluate(ctx, remote, checks, last)
	fromEmbedded := Evaluate(ctx, embedded, checks, last)
	for i, c := range checks {
		r, e := fromRemote[i], fromEmbedded[i]
		t.Logf("%-24s prometheus %-10.5g embedded %-10.5g truth %g", c.Name, r.Value, e.Value, truth[c.Name])
		tol, ok := tolerance[c.Name]
		if !ok {
			t.Errorf("%s: a default check this test does not compare", c.Name)
			continue
		}
		if r.Err != "" || e.Err != "" {
			t.Errorf("%s: errors %q (prometheus) and %q (embedded)", c.Name, r.Err, e.Err)
			continue
		}
		if d := math.Abs(r.Value - e.Value); d > tol*math.Abs(r.Value) {
			t.Errorf("%s: prometheus %v, embedded %v: differ by more than %v%%", c.Name, r.Value, e.Value, 100*tol)
		}
		if r.Fired != e.Fired {
			t.Errorf("%s: fired %v on prometheus, %v embedded", c.Name, r.Fired, e.Fired)
		}
	}
	// Both see the same single series per check: the query text is portable.
	if _, err := remote.Query(ctx, `sum by (name) (rate(loadtest_http_request_time_count[10s]))`, last); err == nil || err.Error() != "2 series, want 1" {
		t.Errorf("two series on prometheus: %v", err)
	}
	if _, err := remote.Query(ctx, `no_such_metric`, last); err != prom.ErrNoData {
		t.Errorf("missing metric on prometheus: %v, want prom.ErrNoData", err)
	}
	if _, err := remote.Query(ctx, `rate(x[1m]`, last); err == nil || !strings.HasPrefix(err.Error(), "query error: ") {
		t.Errorf("bad syntax on prometheus: %v, want a query error", err)
	}
}

func TestRemotePingClosedPort(t *testing.T) {
	t.Parallel()
	r, err := prom.NewRemote("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	err = r.Ping(context.Background())
	if err == nil || !strings.Contains(err.Error(), "http://127.0.0.1:1") || !strings.Contains(err.Error(), "--prometheus") {
		t.Fatalf("Ping of a closed port: %v, want an error naming the URL and what to do", err)
	}
	t.Log(err)
	for _, bad := range []string{"127.0.0.1:9090", "ftp://x", ""} {
		if _, err := prom.NewRemote(bad); err == nil {
			t.Errorf("prom.NewRemote(%q) accepted", bad)
		}
	}
}

// TestRealNodeExporter scrapes a real node_exporter and evaluates the
// reference's CPU and memory checks on the embedded engine.
func TestRealNodeExporter(t *testing.T) {
	t.Parallel()
	requireBinary(t, nodeExporterBin, "prometheus-node-exporter")
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startServer(t, nodeExporterBin, "--web.listen-address="+addr, "--no-collector.systemd")
	url := "http://" + addr + "/metrics"
	waitOK(t, url, 10*time.Second)

	ctx := context.Background()
	store := prom.NewStore(time.Minute)
	sc, err := prom.NewScraper(store, []string{url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Check(ctx); err != nil {
		t.Fatal(err)
	}
	var prev, last time.Time
	var took time.Duration // the longest scrape
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := range 4 {
		prev, last = last, time.Now()
		if errs := sc.Scrape(ctx, last); errs != nil {
			t.Fatal(errs)
		}
		took = max(took, time.Since(last))
		if i < 3 {
			<-tick.C
		}
	}
	ev := prom.NewEmbedded(store)
	reference := []Check{
		{Name: "CPU (reference)", Query: `100 - 100 * (avg(irate(node_cpu_seconds_total{mode="idle"}[5m])))`, Threshold: 85},
		{Name: "memory (reference)", Query: `100 - 100 * avg(node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes)`, Threshold: 85},
	}
	defaults := Defaults(5*time.Second, store.Has)
	if len(defaults) != 6 {
		t.Errorf("%d default checks with node_exporter scraped, want 6 (4 client, CPU, memory)", len(defaults))
	}
	for _, r := range Evaluate(ctx, ev, append(reference, defaults[4:]...), last) {
		t.Logf("%s = %.2f%% (longest scrape %v)", r.Name, r.Value, took)
		// irate divides the idle seconds node_exporter read between its
		// last two reads by the time between the scrapes' timestamps, and
		// each read comes up to a scrape's length after its timestamp: an
		// idle CPU's irate can read 1 + took/interval (CPU -100·took/interval
		// %; a busy machine's scrape is slow, but its CPUs are not idle),
		// and jiffies of 10 ms 1% more. Allow that much, no more.
		slack := 0.0
		if strings.HasPrefix(r.Name, "CPU") {
			slack = 1 + 100*took.Seconds()/last.Sub(prev).Seconds()
		}
		if r.Err != "" || r.Value < -slack || r.Value > 100+slack {
			t.Errorf("%s = %v (error %q), want a percentage in [0, 100]", r.Name, r.Value, r.Err)
		}
	}
	if v := query(t, ev, fmt.Sprintf(`up{job="scrape",instance=%q}`, addr), last); v != 1 {
		t.Errorf("up = %v, want 1", v)
	}
}
