package wire

import (
	"math/rand/v2"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/headroom-dev/headroom/metrics"
)

// followed is how many buckets a Stat follows beside its Hist (metrics's
// maxSparse): a decoded second of fewer stays sparse.
const followed = 256

// TestStatsEncodeAsTheirHist: whatever form a Stat keeps its values in
// (its buckets alone, a Hist asked for and its buckets followed, a Hist
// past them or written to directly, merged, reset), it encodes the
// buckets its Hist holds, and a decoded second of fewer than it follows
// stays sparse.
func TestStatsEncodeAsTheirHist(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	record := func(st *metrics.Stat, ref *hdr.Histogram, n int) {
		for range n {
			v := 1 + r.Int64N(metrics.HighestMicros)
			st.Add(&metrics.Sample{Latency: time.Duration(v) * time.Microsecond})
			_ = ref.RecordValue(v)
		}
	}
	few := func() int { return 1 + r.IntN(followed-1) }
	forms := []struct {
		name string
		make func(st *metrics.Stat, ref *hdr.Histogram)
	}{
		{"buckets alone", func(st *metrics.Stat, ref *hdr.Histogram) { record(st, ref, few()) }},
		{"past its buckets", func(st *metrics.Stat, ref *hdr.Histogram) { record(st, ref, 2*followed) }},
		{"Hist asked for", func(st *metrics.Stat, ref *hdr.Histogram) { record(st, ref, few()); st.Hist() }},
		{"Hist written to", func(st *metrics.Stat, ref *hdr.Histogram) { // as result's reading does
			for range 1 + r.IntN(50) {
				v := 1 + r.Int64N(metrics.HighestMicros)
				_ = st.Hist().RecordValue(v)
				_ = ref.RecordValue(v)
			}
			st.Count = ref.TotalCount()
			st.Status[200] = st.Count
		}},
		{"merged", func(st *metrics.Stat, ref *hdr.Histogram) {
			o := metrics.NewStat()
			record(o, ref, few())
			record(st, ref, r.IntN(2*followed))
			st.Merge(o)
		}},
		{"reset", func(st *metrics.Stat, ref *hdr.Histogram) {
			record(st, ref, 2*followed)
			st.Reset()
			ref.Reset()
			record(st, ref, few())
		}},
	}
	for _, f := range forms {
		for range 5 {
			st, ref := metrics.NewStat(), metrics.NewHistogram()
			f.make(st, ref)
			s := metrics.NewSnapshot()
			s.Requests["x"] = st
			got := metrics.NewSnapshot()
			if _, err := MergeEncoded(AppendSnapshot(nil, s), got); err != nil {
				t.Fatalf("%s: %v", f.name, err)
			}
			want := hdr.NewPacked(metrics.LowestMicros, metrics.HighestMicros, metrics.SigFigs)
			want.MergeFrom(ref)
			g := got.Requests["x"]
			if want.Populated() < followed && g.Sparse() == nil {
				t.Fatalf("%s: a decoded second of %d buckets is dense", f.name, want.Populated())
			}
			if !g.Hist().Equals(ref) {
				t.Fatalf("%s: encoded buckets differ from Hist's", f.name)
			}
		}
	}
}
