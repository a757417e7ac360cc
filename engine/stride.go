package engine

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

var _ Pacer = (*Stride)(nil)

// Stride is one engine's share of a Schedule that several engines run
// together (agents, docs/OPEN.md): numbering the schedule's arrivals from
// anchor, of every cycle of them it takes those at its positions, from
// arrival from on; its elapsed time is counted from offset into the
// schedule. Engines given the same schedule, anchor, cycle and from, and
// positions that partition [0, cycle), start between them each of the
// schedule's arrivals from from on exactly once, at its due time. Its
// answers depend on its arguments alone (Arrival); not safe for
// concurrent use, as its Schedule is not: one engine's dispatcher calls it.
type Stride struct {
	sc     *Schedule
	anchor int64
	cycle  int64
	pos    []int64
	offset time.Duration
	first  int64 // the index, among this share's arrivals from anchor, of the first at or after from
}

// NewStride returns the share of sc at positions (ascending, each in
// [0, cycle)) of every cycle arrivals from anchor, starting with the
// first of them numbered from or later (from >= anchor), its elapsed
// time counted from offset (>= 0) into sc. No positions: a share of no
// arrival.
func NewStride(sc *Schedule, anchor, cycle int64, positions []int64, from int64, offset time.Duration) (*Stride, error) {
	switch {
	case sc == nil:
		return nil, fmt.Errorf("stride: no schedule")
	case cycle < 1:
		return nil, fmt.Errorf("stride: a cycle of %d arrivals: want 1 or more", cycle)
	case anchor < 0 || from < anchor:
		return nil, fmt.Errorf("stride: from arrival %d with the pattern anchored at %d: want 0 <= anchor <= from", from, anchor)
	case offset < 0:
		return nil, fmt.Errorf("stride: an offset of %v: want 0 or more", offset)
	}
	for i, p := range positions {
		if p < 0 || p >= cycle || (i > 0 && p <= positions[i-1]) {
			return nil, fmt.Errorf("stride: positions %v: want them ascending, each in [0, %d)", positions, cycle)
		}
	}
	s := &Stride{sc: sc, anchor: anchor, cycle: cycle, pos: slices.Clone(positions), offset: offset}
	if k := int64(len(positions)); k > 0 {
		whole, rem := (from-anchor)/cycle, (from-anchor)%cycle
		s.first = whole*k + int64(sort.Search(len(positions), func(i int) bool { return positions[i] >= rem }))
	}
	return s, nil
}

// Arrival is the schedule's number of this share's j-th arrival (from 0).
func (s *Stride) Arrival(j int64) int64 {
	k := int64(len(s.pos))
	j += s.first
	return s.anchor + j/k*s.cycle + s.pos[j%k]
}

// Pace implements Pacer: the share's count-th arrival is due when the
// schedule's Arrival(count) is, less the offset.
func (s *Stride) Pace(elapsed time.Duration, count int64) (wait time.Duration, stop bool) {
	if len(s.pos) == 0 || count < 0 {
		return 0, true
	}
	at, ok := s.sc.Due(s.Arrival(count))
	if !ok {
		return 0, true
	}
	return at - s.offset - elapsed, false
}
