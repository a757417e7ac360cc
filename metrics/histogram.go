package metrics

import "math/bits"

// The layout of NewHistogram's counts array, as hdrhistogram-go indexes it
// (TestHistogramLayout checks it against the library), by which the wire
// format sends a histogram's buckets: at 3 significant digits from 1 µs,
// values below 2,048 have a bucket each; above, every power of two is
// split into 1,024 buckets, 22 of them reaching HighestMicros.
const (
	halfMagnitude = 10
	halfCount     = 1 << halfMagnitude
	NumBuckets    = 23 << halfMagnitude // 23,552 buckets
)

// BucketValue is the lowest value of bucket i, in [0, NumBuckets).
func BucketValue(i int) int64 {
	b := i>>halfMagnitude - 1
	if b < 0 {
		return int64(i)
	}
	return int64(i&(halfCount-1)+halfCount) << b
}

// BucketIndex is the index of the bucket that holds v, in [0, HighestMicros].
func BucketIndex(v int64) int {
	b := 64 - bits.LeadingZeros64(uint64(v)|(2*halfCount-1)) - (halfMagnitude + 1)
	return (b+1)<<halfMagnitude + int(v>>b) - halfCount
}
