package health

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/prom"
)

// FuzzCheckQuery: any query text is refused by Validate with a reason
// naming the check, or runs on the embedded engine (over an empty store,
// cut by a short timeout) without a panic; a query that validates is
// never refused by the engine for its cost.
func FuzzCheckQuery(f *testing.F) {
	for _, c := range Defaults(10*time.Second, nil) {
		f.Add(c.Query)
	}
	for _, q := range []string{
		`count_over_time(vector(1)[100d:1ms])`,
		`max_over_time(max_over_time(rate(x[1m])[2h:1s])[2h:1s])`,
		`max_over_time(rate(x[30s])[5m:])`,
		`sum(rate(x[1m] offset -5m @ end())) by (le)`,
		`histogram_quantile(0.99, sum(rate(a[15s])) by (le)) / max_over_time(b[2m])`,
		`quantile_over_time(0.5, vector(time())[3h:1s])`,
		`x[1m+1m:1s]`,
		`rate(x[1m]`,
		``,
	} {
		f.Add(q)
	}
	store := prom.NewStore(time.Minute)
	e := prom.NewEmbedded(store)
	e.Timeout = 200 * time.Millisecond
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, q string) {
		err := Check{Name: "fuzz", Query: q, Threshold: 1}.Validate()
		if err != nil {
			if !strings.HasPrefix(err.Error(), `check "fuzz": `) {
				t.Fatalf("error %q does not name the check", err)
			}
			return
		}
		if _, err := e.Query(context.Background(), q, now); err != nil && strings.Contains(err.Error(), "points per series") {
			t.Fatalf("validated, then refused for its cost: %v", err)
		}
	})
}
