package prom

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
)

// FuzzScrape feeds any page to what a scrape does with it: the parse
// within MaxScrapeSamples, the store, and a query over what was stored.
// Nothing panics; what parses is stored (but samples whose own timestamp
// is past the retention) and read back.
//
//	go test -run='^$' -fuzz=FuzzScrape -fuzztime=2m ./prom/
func FuzzScrape(f *testing.F) {
	for _, s := range []string{
		"# TYPE x counter\nx_total{a=\"1\"} 3\n",
		"# TYPE h histogram\nh_bucket{le=\"0.1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 0.3\nh_count 2\n",
		"# TYPE s summary\ns{quantile=\"0.5\"} NaN\ns_sum 1\ns_count 1\n",
		"g{job=\"x\",instance=\"y\"} -Inf\n", "x 1 1700000000000\n", "x{", "",
	} {
		f.Add([]byte(s))
	}
	at := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, body []byte) {
		mfs, err := parse(target{url: "http://fuzz/metrics", instance: "fuzz"}, body)
		if err != nil {
			return
		}
		s := NewStore(time.Minute)
		s.AppendGathered(mfs, at, labels.FromStrings("job", "fuzz"))
		for _, mf := range mfs {
			ms := mf.GetMetric()
			if n := mf.GetName(); len(ms) > 0 && ms[0].TimestampMs == nil && !s.Has(n) && !s.Has(n+"_count") {
				t.Fatalf("%s parsed but not stored", n) // (a sample's own timestamp may be past the retention)
			}
		}
		// A query over all of it runs (or says why not), and never panics.
		_, _ = NewEmbedded(s).Query(context.Background(), `count({__name__=~".+"})`, at)
	})
}
