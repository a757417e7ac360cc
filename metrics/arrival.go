package metrics

import "time"

// LateArrival is how long after its intended time an arrival of the open
// model may start and still count as on time; past it, it is late
// (Point.Late, the result's arrivals). Its lateness is in its requests'
// latency from the intended start either way: late arrivals are a sign
// that headroom (its CPU, or a pool waited for with a max wait) held the
// schedule up, not the target. 10 ms is far above the dispatcher's timer
// and scheduling delays on an idle machine (well under 1 ms) and below
// the latencies a run usually looks at.
const LateArrival = 10 * time.Millisecond

// Above counts the samples of s whose latency is above d, at the
// histogram's precision (three digits: a value within 0.1% of d may
// count either way).
func (s *Stat) Above(d time.Duration) int64 {
	us := d.Microseconds()
	if b := s.Sparse(); b != nil {
		var above int64
		for v, n := range b.ForEachBucket {
			if BucketValue(BucketIndex(v)+1)-1 > us { // the bucket's highest value
				above += n
			}
		}
		return above
	}
	h := s.Hist()
	total := h.TotalCount()
	if total == 0 || h.Max() <= us {
		return 0
	}
	var below int64
	for _, b := range h.Distribution() {
		if b.To > us {
			break
		}
		below += b.Count
	}
	return total - below
}
