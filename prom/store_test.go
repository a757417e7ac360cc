package prom

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
)

func TestStoreRetention(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "g"})
	gone := prometheus.NewGauge(prometheus.GaugeOpts{Name: "gone", Help: "gone"})
	reg.MustRegister(g, gone)
	s := NewStore(10 * time.Second)
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 61 {
		g.Set(float64(i))
		if i == 5 {
			reg.Unregister(gone) // last gathered at second 4
		}
		mfs, _ := reg.Gather()
		s.AppendGathered(mfs, t0.Add(time.Duration(i)*time.Second), labels.EmptyLabels())
	}
	// Compaction runs each time the cut-off moves by a quarter of the
	// retention: at most 10s + 2.5s of samples stay, at least 10s.
	n := len(s.byName["g"][0].samples)
	if n < 11 || n > 13 {
		t.Errorf("%d samples of g kept, want 11 to 13 (10s retention, 1 a second)", n)
	}
	if s.Has("gone") || !s.Has("g") {
		t.Errorf("Has(gone) = %v, Has(g) = %v: want a series with no sample left forgotten", s.Has("gone"), s.Has("g"))
	}
	ev := NewEmbedded(s)
	if v := query(t, ev, `count_over_time(g[1m])`, t0.Add(60*time.Second)); int(v) != n {
		t.Errorf("count_over_time(g[1m]) = %v, want the %d samples kept", v, n)
	}
	// Out of order and duplicate samples are dropped, as Prometheus does.
	mfs, _ := reg.Gather()
	s.AppendGathered(mfs, t0.Add(59*time.Second), labels.EmptyLabels())
	s.AppendGathered(mfs, t0.Add(60*time.Second), labels.EmptyLabels())
	if got := len(s.byName["g"][0].samples); got != n {
		t.Errorf("%d samples after out-of-order appends, want %d", got, n)
	}
}

func TestStoreSummaryAndLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	sum := prometheus.NewSummary(prometheus.SummaryOpts{
		Name: "rpc_seconds", Help: "h", Objectives: map[float64]float64{0.5: 0.01, 0.99: 0.001},
	})
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jobs_total", Help: "h"}, []string{"job", "kind"})
	reg.MustRegister(sum, c)
	for i := 1; i <= 100; i++ {
		sum.Observe(float64(i))
	}
	c.WithLabelValues("backup", "full").Add(3)
	s := NewStore(time.Minute)
	at := time.Unix(1_700_000_000, 0)
	mfs, _ := reg.Gather()
	s.AppendGathered(mfs, at, labels.FromStrings("job", "headroom", "instance", "local"))
	ev := NewEmbedded(s)
	for q, want := range map[string]float64{
		`rpc_seconds{quantile="0.5",job="headroom",instance="local"}`:  50,
		`rpc_seconds{quantile="0.99"}`:                                 99,
		`rpc_seconds_sum`:                                              5050,
		`rpc_seconds_count`:                                            100,
		`jobs_total{job="headroom",exported_job="backup",kind="full"}`: 3,
	} {
		if got := query(t, ev, q, at); got != want {
			t.Errorf("%s = %v, want %v", q, got, want)
		}
	}
	if _, err := ev.Query(context.Background(), `jobs_total{job="backup"}`, at); !errors.Is(err, ErrNoData) {
		t.Errorf(`jobs_total{job="backup"}: err = %v, want ErrNoData (the clashing label is exported_job)`, err)
	}
}
