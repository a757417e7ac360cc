package wire

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/headroom-dev/headroom/metrics"
)

// TestAgentsFamiliesSumToOneProcess: three agents' Proms, each observing
// a share of the samples, sent encoded and summed, expose what one Prom
// observing them all does, in the text format (latency sums to the
// nanosecond: they are added in another order).
func TestAgentsFamiliesSumToOneProcess(t *testing.T) {
	one := metrics.NewProm()
	agents := []*metrics.Prom{metrics.NewProm(), metrics.NewProm(), metrics.NewProm()}
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"GET /a", "POST /b", "GET /c/{id}"}
	for i := range 3000 {
		x := metrics.Sample{Kind: metrics.Request, Name: names[rng.IntN(3)], Status: 200, Latency: time.Duration(rng.ExpFloat64() * float64(20*time.Millisecond))}
		switch i % 17 {
		case 0:
			x.Outcome, x.Status = metrics.Failed, 500
		case 1:
			x.Outcome, x.Status = metrics.Timeout, 0
		case 2:
			x.Kind, x.Name = metrics.Action, "Post"
		case 3:
			x.Kind, x.Name, x.Type = metrics.MessageIn, "WS /ws", "posted"
		case 4:
			x.Kind = metrics.Delivery
		case 5:
			x.Kind, x.Name = metrics.Opened, "WS /ws"
		}
		one.Observe(x)
		agents[rng.IntN(3)].Observe(x)
	}
	var sets [][]*dto.MetricFamily
	for _, a := range agents {
		mfs, err := a.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		b, err := EncodeFamilies(mfs, "loadtest_users_active")
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeFamilies(b)
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, back)
	}
	coord := metrics.NewProm() // the coordinator's own: users, and nothing observed
	coord.SetUsers(42)
	coord.AddRemote(func() []*dto.MetricFamily { return metrics.SumFamilies(sets...) })
	one.SetUsers(42)
	if got, want := text(t, coord.Gather), text(t, one.Registry().Gather); got != want {
		t.Errorf("the agents' sum differs from one process's exposition:\n--- sum\n%s\n--- one\n%s", got, want)
	}
	if _, err := DecodeFamilies([]byte{0xff, 0xff, 0xff}); err == nil {
		t.Error("DecodeFamilies took garbage")
	}
}

func text(t *testing.T, gather func() ([]*dto.MetricFamily, error)) string {
	t.Helper()
	mfs, err := gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	// Round the float sums: the same seconds added in another order.
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		if name, v, ok := strings.Cut(l, "} "); ok && strings.Contains(name, "_sum{") {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				lines[i] = name + "} " + strconv.FormatFloat(f, 'f', 9, 64)
			}
		}
	}
	return strings.Join(lines, "\n")
}
