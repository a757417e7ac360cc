package health

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/prom"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/headroom-dev/headroom/metrics"
)

// TestDroppedArrivalsCheck evaluates the open model's check on what
// headroom's own /metrics counts, second by second: 100 arrivals a second
// of which 0, 1 or 2 are dropped reads 0%, 1% and 2%, and only the last
// is above the 1% threshold; a window with no arrival at all is 0/0,
// which fails closed.
func TestDroppedArrivalsCheck(t *testing.T) {
	for _, c := range []struct {
		dropped, started int
		want             float64 // percent; NaN: no arrivals
		fired            bool
	}{{0, 100, 0, false}, {1, 99, 1, false}, {2, 98, 2, true}, {0, 0, math.NaN(), true}} {
		p := metrics.NewProm()
		store := prom.NewStore(time.Hour)
		t0 := time.Unix(1_700_000_000, 0)
		for sec := range 20 {
			for range c.started {
				p.Observe(metrics.Sample{Kind: metrics.Arrival, Name: "(arrivals)", Latency: time.Millisecond})
			}
			for range c.dropped {
				p.Observe(metrics.Sample{Kind: metrics.Arrival, Name: "(arrivals)", Outcome: metrics.DroppedArrival})
			}
			mfs, err := p.Gather()
			if err != nil {
				t.Fatal(err)
			}
			store.AppendGathered(mfs, t0.Add(time.Duration(sec)*time.Second), labels.FromStrings("job", "headroom"))
		}
		check := DroppedArrivals(10 * time.Second)
		if err := check.Validate(); err != nil {
			t.Fatal(err)
		}
		r := Evaluate(context.Background(), prom.NewEmbedded(store), []Check{check}, t0.Add(19*time.Second))[0]
		switch {
		case math.IsNaN(c.want):
			if !r.Fired || !strings.Contains(r.Err, "NaN") {
				t.Errorf("no arrivals: %+v; want fired, NaN", r)
			}
		case math.Abs(r.Value-c.want) > 1e-9 || r.Fired != c.fired || r.Err != "":
			t.Errorf("%d of %d dropped: %+v; want %v%%, fired %v", c.dropped, c.dropped+c.started, r, c.want, c.fired)
		}
	}
}

// TestOpenDefaults: the open model's defaults are the closed model's and
// the dropped-arrivals check; the closed model's do not evaluate it.
func TestOpenDefaults(t *testing.T) {
	closed, open := Defaults(15*time.Second, nil), OpenDefaults(15*time.Second, nil)
	if len(open) != len(closed)+1 || open[len(open)-1].Name != DroppedArrivalsName {
		t.Fatalf("open defaults %v", open)
	}
	if slices.ContainsFunc(closed, func(c Check) bool { return c.Name == DroppedArrivalsName }) {
		t.Errorf("the closed model's defaults check dropped arrivals")
	}
	if q := open[len(open)-1].Query; !strings.Contains(q, `loadtest_arrivals_total{outcome="dropped"}[15s]`) {
		t.Errorf("query %s does not read the dropped arrivals over the window", q)
	}
}
