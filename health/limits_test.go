package health

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/prom"
)

func TestValidateRefusesCostlySubqueries(t *testing.T) {
	tests := []struct {
		query string
		want  string // "" for valid
	}{
		{`count_over_time(vector(1)[100d:1ms])`, `check "c": subquery [100d:1ms] evaluates 8640000000 points per series, more than 11000 (Prometheus's limit on the points of a range query)`},
		{`count_over_time(vector(1)[100d:])`, `check "c": subquery [100d:1m] evaluates 144000 points per series, more than 11000`},
		// The inner subquery runs over the outer one's range and its own: 4h at 1s.
		{`max_over_time(max_over_time(rate(x[1m])[2h:1s])[2h:1s])`, `check "c": subquery [2h:1s] evaluates 14400 points per series, over 4h with the subqueries around it, more than 11000`},
		{`max_over_time(rate(x[30s])[3h:1s])`, ""}, // 10,800 points
		{`max_over_time(rate(x[30s])[5m:])`, ""},
		{`max_over_time(max_over_time(rate(x[1m])[1h:1s])[2h:1s])`, ""}, // 7,200 and 10,800
		{`count_over_time(x[100d])`, ""},                                // a range selector loads samples, bounded by the store
	}
	for _, tt := range tests {
		err := Check{Name: "c", Query: tt.query, Threshold: 1}.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", tt.query, err)
		case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
			t.Errorf("%s: %v, want %q", tt.query, err, tt.want)
		}
	}
}

// TestCostlySubqueryFailsClosed: the engine would size its bookkeeping for
// 8.64e9 steps before any limit applied. Both evaluators refuse the query
// before it runs; the check fires with the reason, having allocated next
// to nothing.
func TestCostlySubqueryFailsClosed(t *testing.T) {
	const q = `count_over_time(vector(1)[100d:1ms])`
	remote, err := prom.NewRemote("http://127.0.0.1:1") // nothing listens: the query must not be sent
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []Evaluator{prom.NewEmbedded(prom.NewStore(time.Minute)), remote} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		res := Evaluate(context.Background(), ev, []Check{{Name: "bomb", Query: q, Threshold: 1}}, time.Now())
		runtime.ReadMemStats(&after)
		if !res[0].Fired || !strings.Contains(res[0].Err, "more than 11000") {
			t.Errorf("%T: %+v, want fired with the limit as the reason", ev, res[0])
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
			t.Errorf("%T: refusing the query allocated %d MB", ev, grew>>20)
		}
	}
}

func TestSubqueryWithoutStep(t *testing.T) {
	e := prom.NewEmbedded(prom.NewStore(time.Minute))
	// The default step is 1m: (t-5m, t] holds 5 of them.
	if v, err := e.Query(context.Background(), `count_over_time(vector(1)[5m:])`, time.Now()); err != nil || v != 5 {
		t.Errorf("count_over_time(vector(1)[5m:]) = %v, %v; want 5 (a step of 1m)", v, err)
	}
}
