//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/internal/testing/servertest"
	"github.com/headroom-dev/headroom/prom"
	"github.com/headroom-dev/headroom/result"
)

// TestRemoteWriteToARealPrometheus runs the real binary for 6 s with
// --out-remote-write to a real Prometheus 2.42 that never scrapes it (its
// remote-write receiver on): the run's series are there while it runs,
// and once it has ended the requests Prometheus counts are the result's,
// to the request (the timeline's, setup and stop included).
func TestRemoteWriteToARealPrometheus(t *testing.T) {
	t.Parallel()
	servertest.Require(t, servertest.Prometheus, "prometheus")
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte("global:\n  scrape_interval: 1m\nscrape_configs: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	promURL := fmt.Sprintf("http://127.0.0.1:%d", servertest.FreePort(t))
	servertest.Start(t, servertest.Prometheus, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+strings.TrimPrefix(promURL, "http://"), "--web.enable-remote-write-receiver", "--log.level=warn")
	servertest.WaitOK(t, promURL+"/-/ready", 30*time.Second)
	remote, err := prom.NewRemote(promURL)
	if err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "rw-run")
	cmd := command(t, "", nil, "run", abs(t, "../../examples/chat.star"), "--target", testbedURL(t), "--users", "20", "--ramp", "1s",
		"--duration", "6s", "--quiet", "--no-report", "--out", out, "--out-remote-write", promURL+"/api/v1/write", "--remote-write-label", "build=test")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ctx := context.Background()
	users := `sum(loadtest_users_active{job="headroom",run="rw-run",build="test"})`
	seen := false
	for !seen {
		select {
		case err := <-done:
			t.Fatalf("the run ended (%v) before Prometheus had a sample of it\n%s", err, stderr.String())
		case <-time.After(200 * time.Millisecond):
		}
		v, err := remote.Query(ctx, users, time.Now())
		seen = err == nil && v > 0
	}
	if err := <-done; err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	res, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	var requests int64
	for _, p := range res.Timeline {
		requests += p.Requests
	}
	got, err := remote.Query(ctx, `sum(loadtest_http_request_time_count{run="rw-run"})`, time.Now())
	t.Logf("Prometheus counts %v requests, the result's timeline %d; %s", got, requests, strings.TrimSpace(stderr.String()))
	if err != nil || int64(got) != requests || requests == 0 {
		t.Errorf("Prometheus: %v requests (%v); the result's timeline: %d", got, err, requests)
	}
	if !strings.Contains(stderr.String(), "remote write: ") || strings.Contains(stderr.String(), "dropped") {
		t.Errorf("stderr does not say what was sent, or says some was dropped:\n%s", stderr.String())
	}
}
