package compare

import (
	"math"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

func TestWelchHalfWidth(t *testing.T) {
	// Two samples of 3 with variance 1: se = sqrt(2/3), df = 4, t(0.975, 4) = 2.7764.
	got := welchHalfWidth([]float64{10, 11, 12}, []float64{13, 14, 15}, 0.95)
	if want := 2.7764 * math.Sqrt(2.0/3); math.Abs(got-want) > 1e-3 {
		t.Errorf("half width %v, want %v", got, want)
	}
}

func TestVerdicts(t *testing.T) {
	o := Options{}
	o.defaults()
	for _, c := range []struct {
		name       string
		base, new  []float64
		higher     bool
		want       string
		wantPoints bool
	}{
		{"one run per side", []float64{100}, []float64{80}, true, NoVerdict, false},
		{"clear drop in users", []float64{100, 102, 98}, []float64{90, 91, 89}, true, Regression, false},
		{"clear rise in users", []float64{100, 102, 98}, []float64{110, 111, 109}, true, Improvement, false},
		{"latency up", []float64{10, 10.2, 9.8}, []float64{12, 12.1, 11.9}, false, Regression, false},
		{"within the noise", []float64{100, 110, 90}, []float64{97, 108, 92}, true, NoChange, false},
		{"real but below the minimum effect", []float64{100, 100.1, 99.9}, []float64{101, 101.1, 100.9}, true, NoChange, false},
		{"no data", nil, []float64{1, 2}, true, NoData, false},
	} {
		m := Metric{HigherIsBetter: c.higher, BaseRuns: c.base, NewRuns: c.new}
		if len(c.base) > 0 {
			m.Base = mean(c.base)
		}
		m.New = mean(c.new)
		m.judge(o)
		if m.Verdict != c.want {
			t.Errorf("%s: verdict %q (delta %s), want %q", c.name, m.Verdict, m.DeltaText(), c.want)
		}
	}
}

// run makes a run result whose requests have the given counts and a
// constant latency each (ms).
func fakeRun(kind string, reqs map[string][2]float64) *Run {
	r := &Run{Dir: "fake", Result: &result.Result{Kind: kind, Status: result.Completed}, Hists: metrics.NewSnapshot()}
	for name, cl := range reqs {
		st := metrics.NewStat()
		for range int(cl[0]) {
			st.Hist().RecordValue(int64(cl[1] * 1000))
		}
		st.Count = int64(cl[0])
		r.Hists.Requests[name] = st
		r.Result.Requests = append(r.Result.Requests, st.Summarize(name, 10e9))
	}
	return r
}

// TestMixAware is the v9.11-vs-v10.0 case: every request is exactly as
// fast on both sides, but new makes more of the slow one and a request
// of its own. Per request, and over the common mix, nothing changed.
func TestMixAware(t *testing.T) {
	base := &Side{Label: "base"}
	new := &Side{Label: "new"}
	for range 3 {
		base.Runs = append(base.Runs, fakeRun("run", map[string][2]float64{"fast": {500, 10}, "slow": {500, 100}}))
		new.Runs = append(new.Runs, fakeRun("run", map[string][2]float64{"fast": {200, 10}, "slow": {800, 100}, "only-new": {300, 1000}}))
	}
	c, err := Compare(base, new, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := c.Window
	if strings.Join(w.OnlyNew, ",") != "only-new" || len(w.OnlyBase) != 0 {
		t.Errorf("only base %v, only new %v: want only-new apart", w.OnlyBase, w.OnlyNew)
	}
	if len(w.Requests) != 2 {
		t.Fatalf("%d common rows, want 2", len(w.Requests))
	}
	if math.Abs(w.MixMean.Delta) > 0.001 || w.MixMean.Verdict != NoChange {
		t.Errorf("common-mix mean %v -> %v (%s, %s): want no change", w.MixMean.Base, w.MixMean.New, w.MixMean.DeltaText(), w.MixMean.Verdict)
	}
	// Each side's own mix would have said 55 ms against 82 ms: +49%.
	if math.Abs(w.MixMean.Base-68.5) > 0.1 {
		t.Errorf("mix mean %v ms, want 68.5 (weights 0.35/0.65 of 10 and 100 ms)", w.MixMean.Base)
	}
	if math.Abs(w.MixP99.Delta) > 0.001 {
		t.Errorf("common-mix p99 %v -> %v, want equal", w.MixP99.Base, w.MixP99.New)
	}
	for _, r := range w.Requests {
		if r.P99.Verdict != NoChange || r.Mean.Delta != 0 {
			t.Errorf("%s: %s %s, want no change", r.Name, r.P99.DeltaText(), r.P99.Verdict)
		}
	}
}

func TestMixQuantile(t *testing.T) {
	ws := []window{{requests: map[string]metrics.Summary{}, hists: metrics.NewSnapshot()}}
	for name, ms := range map[string]int64{"a": 10, "b": 100} {
		st := metrics.NewStat()
		for range 1000 {
			st.Hist().RecordValue(ms * 1000)
		}
		ws[0].hists.Requests[name] = st
	}
	// 90% of a (10 ms), 10% of b (100 ms): p50 is 10 ms, p95 100 ms.
	w := map[string]float64{"a": 0.9, "b": 0.1}
	lat := newLatencies(ws).of
	if got := mixQuantile(0.5, lat, w); math.Abs(got-10) > 0.02 {
		t.Errorf("p50 %v, want 10", got)
	}
	if got := mixQuantile(0.95, lat, w); math.Abs(got-100) > 0.1 {
		t.Errorf("p95 %v, want 100", got)
	}
}

func TestKindsMustMatch(t *testing.T) {
	_, err := Compare(&Side{Runs: []*Run{fakeRun("run", nil)}}, &Side{Runs: []*Run{fakeRun("ceiling", nil)}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "same kind") {
		t.Errorf("err %v, want one about the same kind", err)
	}
}

func TestFailOn(t *testing.T) {
	gates, err := ParseFailOn("users:-5%,p99:+10%,errors:+1pp")
	if err != nil || len(gates) != 3 || gates[0].Limit != -0.05 || gates[2].Limit != 1 {
		t.Fatalf("gates %+v, %v", gates, err)
	}
	for _, bad := range []string{"users:5%", "p99:+10", "speed:+1%", "errors:+1%", "p99"} {
		if _, err := ParseFailOn(bad); err == nil {
			t.Errorf("%q parsed, want an error", bad)
		}
	}
	c := &Comparison{Users: &Metric{Name: "supported users", HigherIsBetter: true, Delta: -0.09, Verdict: Regression}}
	if got := c.Breaches(gates); len(got) != 1 || !strings.Contains(got[0], "supported users") {
		t.Errorf("breaches %v, want the users", got)
	}
	c.Users.Delta = -0.04
	if got := c.Breaches(gates); len(got) != 0 {
		t.Errorf("breaches %v, want none within -5%%", got)
	}
	c.Users = &Metric{Delta: -0.2, Verdict: NoChange}
	if got := c.Breaches(gates); len(got) != 0 {
		t.Errorf("breaches %v: a change within the noise must not fail", got)
	}
}
