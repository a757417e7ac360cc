package metrics

import (
	"testing"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// TestHistogramLayout checks BucketValue and BucketIndex against
// hdrhistogram-go: every index of NewHistogram's counts array is one
// bucket, in order, whose lowest value is BucketValue's, and the array has
// no bucket past NumBuckets.
func TestHistogramLayout(t *testing.T) {
	h := NewHistogram()
	for i := range NumBuckets {
		v := BucketValue(i)
		if err := h.RecordValue(v); err != nil {
			t.Fatalf("bucket %d: %v", i, err)
		}
		if got := BucketIndex(v); got != i {
			t.Fatalf("BucketIndex(%d) = %d, want %d", v, got, i)
		}
		if i > 0 && BucketIndex(v-1) != i-1 {
			t.Fatalf("BucketIndex(%d) = %d, want %d: bucket %d ends below %d", v-1, BucketIndex(v-1), i-1, i-1, v)
		}
	}
	p := hdr.NewPacked(LowestMicros, HighestMicros, SigFigs)
	p.MergeFrom(h)
	i := 0
	for v, n := range p.ForEachBucket {
		if v != BucketValue(i) || n != 1 {
			t.Fatalf("bucket %d holds %d values of %d, want 1 of %d", i, n, v, BucketValue(i))
		}
		i++
	}
	if i != NumBuckets {
		t.Fatalf("%d buckets, want %d", i, NumBuckets)
	}
	if err := h.RecordValue(BucketValue(NumBuckets)); err == nil {
		t.Errorf("a value past bucket %d was recorded: the array is longer than NumBuckets", NumBuckets-1)
	}
	if BucketIndex(HighestMicros) >= NumBuckets {
		t.Errorf("HighestMicros is in bucket %d, past NumBuckets", BucketIndex(HighestMicros))
	}
}
