package compare

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/internal/testing/memhttp"
	"github.com/headroom-dev/headroom/runner"
	"github.com/headroom-dev/headroom/scenario"
	"github.com/headroom-dev/headroom/testbed"
)

// runs makes n short bounded runs against testbeds of the given scale,
// each against its own testbed, in memory, seeds first, first+1, ...,
// one after the other, and returns their directories. Call it in a
// synctest bubble: in virtual time the latencies and throughputs are the
// testbed's model and nothing the machine runs besides, so a verdict
// cannot turn on a busy neighbour. 12 users on 4 workers keep the testbed
// saturated, so throughput is its capacity: 4 / service time.
func runs(t *testing.T, first uint64, n int, scale float64) []string {
	t.Helper()
	sc, err := scenario.Load(context.Background(), "posts.star", []byte(testbed.PostsScenario(20*time.Millisecond)), scenario.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for i := range n {
		seed := first + uint64(i)
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("run-%d", seed))
		srv := testbed.New(testbed.Config{Workers: 4, Scale: scale})
		target, _ := url.Parse(fmt.Sprintf("http://testbed-%d.invalid", seed))
		b := &runner.Bounded{
			Common: runner.Common{Scenario: sc, Target: target, Seed: seed, Timeout: 5 * time.Second, Grace: time.Second,
				Out: dir, Dial: memhttp.Dial(t, srv.Handler()), Scrape: []string{target.String() + "/metrics"}},
			Users: 12, Ramp: time.Second, Duration: 5 * time.Second,
		}
		if _, err := b.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
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
// of base against base (other seeds) must give no significant change.
// In virtual time: on the wall clock the "no change" of three figures
// (each a change past 95% confidence and 3%) could fail by chance, or by
// a busy machine's drift between the sides, which ran one after the
// other; here each figure is the testbed's model, whatever runs beside.
func TestTestbedRegression(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testbedRegression)
}

func testbedRegression(t *testing.T) {
	const scale = 5 // GetChannelPosts takes 20 ms: capacity 200/s
	base, again, slower := runs(t, 1, 3, scale), runs(t, 4, 3, scale), runs(t, 1, 3, scale/0.9)

	c, err := Compare(side(t, "base", base), side(t, "new", slower), Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := c.Window
	t.Logf("capacity -10%%: rps %s %s; mean %s %s; p99 %s %s", w.Throughput.DeltaText(), w.Throughput.Verdict,
		w.MixMean.DeltaText(), w.MixMean.Verdict, w.MixP99.DeltaText(), w.MixP99.Verdict)
	// the model's 200 → 180 req/s, to a point: in virtual time nothing else moves it
	if w.Throughput.Verdict != Regression || w.Throughput.Delta > -0.09 || w.Throughput.Delta < -0.11 {
		t.Errorf("throughput %s: %s, want a regression of -10%%", w.Throughput.DeltaText(), w.Throughput.Verdict)
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
