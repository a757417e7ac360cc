package serverstats_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/internal/testing/memhttp"
	"github.com/headroom-dev/headroom/prom"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/serverstats"
	"github.com/headroom-dev/headroom/testbed"
)

// TestWatchTestbed scrapes a real testbed before and after some sign-ups
// and checks the window holds exactly those requests, at the modelled
// service time. In virtual time (the testbed and its /metrics in memory):
// on the wall clock a busy machine wakes a 4 ms sleep late by more than
// the half millisecond the store's mean is allowed.
func TestWatchTestbed(t *testing.T) {
	synctest.Test(t, watchTestbed)
}

func watchTestbed(t *testing.T) {
	srv := testbed.New(testbed.Config{Workers: 4, Scale: 1})
	const base = "http://testbed.invalid"
	client := &http.Client{Transport: &http.Transport{DialContext: memhttp.Dial(t, srv.Handler())}}
	defer client.CloseIdleConnections()
	start := time.Now()
	w := serverstats.New([]string{base + "/metrics"}, start)
	sc, err := prom.NewScraper(nil, []string{base + "/metrics"}, client)
	if err != nil {
		t.Fatal(err)
	}
	sc.Gathered = w.Gathered
	scrape := func(at time.Time) { w.Attempted(sc.Scrape(context.Background(), at)) }

	t0 := time.Now()
	scrape(t0)
	from := w.Mark(t0)
	const n = 20
	for i := range n {
		body := fmt.Sprintf(`{"username":"u%d","email":"u%d@example.com","password":"pw-%d-long"}`, i, i, i)
		resp, err := client.Post(base+"/api/v4/users", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create user: %s", resp.Status)
		}
	}
	// The second scrape is stamped at least 50 ms after the first, so
	// rates have a span, without waiting for it.
	t1 := time.Now()
	if t1.Sub(t0) < 50*time.Millisecond {
		t1 = t0.Add(50 * time.Millisecond)
	}
	scrape(t1)
	to := w.Mark(t1)
	res := w.Result(from, to)

	if len(res.Targets) != 1 {
		t.Fatalf("%d targets, want 1", len(res.Targets))
	}
	tg := res.Targets[0]
	if tg.Kind != "process" || tg.Memory != "go_memstats_heap_inuse_bytes" || tg.Scrapes != 2 || tg.Failed != 0 {
		t.Errorf("kind %q, memory %q, scrapes %d, failed %d: want process, its Go heap, 2, 0", tg.Kind, tg.Memory, tg.Scrapes, tg.Failed)
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
	// One request at a time: no queue, so the model's service time, to
	// the microsecond in virtual time.
	model := float64(srv.ServiceTime("CreateUser")) / 1e6
	if math.Abs(api.MeanMs-model) > 0.001 {
		t.Errorf("API CreateUser mean %.3f ms, want the modelled %.1f", api.MeanMs, model)
	}
	// Every request took the model's time, so p99 lies in their bucket
	// (10, 15] ms, read 99% of the way through it.
	if api.P99Ms > api.MeanMs || api.P99Ms <= 0.5*api.MeanMs {
		t.Errorf("p99 %.2f ms, want in the bucket of every request's %.2f ms", api.P99Ms, api.MeanMs)
	}
	st := find(t, tg.Window.Timings, "mattermost_db_store_time", "UserStore.Save")
	if st.Count != n || math.Abs(st.MeanMs-4) > 0.001 {
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
