package compare

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/runner"
	"github.com/headroom-dev/headroom/scenario"
	"github.com/headroom-dev/headroom/testbed"
)

// runs makes n short bounded runs against testbeds of the given scale,
// each against its own testbed, two at a time, and returns their
// directories. 12 users on 4 workers keep the testbed saturated, so
// throughput is its capacity: 4 / service time.
func runs(t *testing.T, n int, scale float64) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "posts.star")
	if err := os.WriteFile(path, []byte(testbed.PostsScenario(20*time.Millisecond)), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.LoadFile(context.Background(), path, scenario.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	dirs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for i := range n {
		dirs[i] = filepath.Join(t.TempDir(), fmt.Sprintf("run-%d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			srv := testbed.New(testbed.Config{Workers: 4, Scale: scale})
			ts := httptest.NewServer(srv.Handler())
			defer ts.Close()
			target, _ := url.Parse(ts.URL)
			b := &runner.Bounded{
				Common: runner.Common{Scenario: sc, Target: target, Seed: uint64(i + 1), Timeout: 5 * time.Second, Grace: time.Second,
					Out: dirs[i], Scrape: []string{ts.URL + "/metrics"}},
				Users: 12, Ramp: time.Second, Duration: 5 * time.Second,
			}
			_, errs[i] = b.Run(context.Background())
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return dirs
}

func side(t *testing.T, label string, dirs []string) *Side {
	t.Helper()
	s, err := Load(label, dirs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTestbedRegression: new is the testbed with its capacity lowered by
// 10% (service times x 1/0.9); three repeats a side must give a
// regression in throughput, latency and server time. Three other repeats
// of base against base must give no significant change.
func TestTestbedRegression(t *testing.T) {
	t.Parallel()
	const scale = 5 // GetChannelPosts takes 20 ms: capacity 200/s
	base, again, slower := runs(t, 3, scale), runs(t, 3, scale), runs(t, 3, scale/0.9)

	c, err := Compare(side(t, "base", base), side(t, "new", slower), Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := c.Window
	t.Logf("capacity -10%%: rps %s %s; mean %s %s; p99 %s %s", w.Throughput.DeltaText(), w.Throughput.Verdict,
		w.MixMean.DeltaText(), w.MixMean.Verdict, w.MixP99.DeltaText(), w.MixP99.Verdict)
	if w.Throughput.Verdict != Regression || w.Throughput.Delta > -0.06 || w.Throughput.Delta < -0.14 {
		t.Errorf("throughput %s: %s, want a regression of about -10%%", w.Throughput.DeltaText(), w.Throughput.Verdict)
	}
	if w.MixMean.Verdict != Regression {
		t.Errorf("mean latency %s: %s, want a regression", w.MixMean.DeltaText(), w.MixMean.Verdict)
	}
	if len(c.Server) != 1 || len(c.Server[0].Timings) == 0 {
		t.Fatalf("server comparison: %+v", c.Server)
	}
	for _, tc := range c.Server[0].Timings {
		if tc.Metric == "mattermost_db_store_time" && tc.Mix.Verdict != Regression {
			t.Errorf("store time %s: %s, want a regression (every store call is 11%% longer)", tc.Mix.DeltaText(), tc.Mix.Verdict)
		}
	}
	gates, _ := ParseFailOn("rps:-5%")
	if len(c.Breaches(gates)) == 0 {
		t.Errorf("rps:-5%% did not fail on a 10%% capacity drop")
	}

	c, err = Compare(side(t, "base", base), side(t, "base again", again), Options{})
	if err != nil {
		t.Fatal(err)
	}
	w = c.Window
	t.Logf("identical: rps %s %s; mean %s %s; p99 %s %s", w.Throughput.DeltaText(), w.Throughput.Verdict,
		w.MixMean.DeltaText(), w.MixMean.Verdict, w.MixP99.DeltaText(), w.MixP99.Verdict)
	for _, m := range []*Metric{&w.Throughput, &w.MixMean, &w.MixErrors} {
		if m.Verdict != NoChange {
			t.Errorf("identical sides: %s %s: %s, want %q", m.Name, m.DeltaText(), m.Verdict, NoChange)
		}
	}
	if len(c.Breaches(gates)) != 0 {
		t.Errorf("identical sides breached rps:-5%%: %v", c.Breaches(gates))
	}
}
