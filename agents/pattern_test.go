package agents

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/engine"
)

func TestPattern(t *testing.T) {
	for _, c := range []struct {
		weights []int
		cycle   int64
		pos     [][]int64
	}{
		{[]int{1}, 1, [][]int64{{0}}},
		{[]int{1, 1}, 2, [][]int64{{0}, {1}}},
		{[]int{2, 1, 1}, 4, [][]int64{{0, 1}, {2}, {3}}},
		{[]int{4, 4}, 2, [][]int64{{0}, {1}}},                  // by their greatest common divisor
		{[]int{3, 0, 2}, 5, [][]int64{{0, 2, 3}, nil, {1, 4}}}, // a lost agent takes none
		{[]int{0, 0}, 1, [][]int64{nil, nil}},
	} {
		cycle, pos := pattern(c.weights)
		if cycle != c.cycle || !reflect.DeepEqual(pos, c.pos) {
			t.Errorf("pattern(%v) = %d, %v; want %d, %v", c.weights, cycle, pos, c.cycle, c.pos)
		}
	}
}

// arrival is one arrival an agent's share starts: the schedule's number
// and when it is due in the schedule's time.
type arrival struct {
	n   int64
	due time.Duration
}

// run is every arrival of share p, as an agent's engine would start them
// (its Pacer, from its frame).
func run(t *testing.T, p Pacer) []arrival {
	t.Helper()
	b, err := json.Marshal(p) // as sent
	if err != nil {
		t.Fatal(err)
	}
	var got Pacer
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	pacer, err := got.pacer()
	if err != nil {
		t.Fatal(err)
	}
	s := pacer.(*engine.Stride)
	var out []arrival
	for j := int64(0); ; j++ {
		wait, stop := s.Pace(0, j)
		if stop {
			return out
		}
		out = append(out, arrival{n: s.Arrival(j), due: wait + p.Offset})
	}
}

// TestAgentsArrivalsPartitionTheSchedule: the shares dealt to agents of
// any weights, from the start or from any arrival on (as after a loss),
// start between them exactly the schedule's arrivals from there on, each
// once and at its due time, each agent its weight's share; an agent that
// resumes with its share from a later arrival starts exactly its
// arrivals from there on.
func TestAgentsArrivalsPartitionTheSchedule(t *testing.T) {
	rates := map[string]engine.Rate{
		"constant": engine.Constant(100, 10*time.Second),
		"ramp":     {Start: 10, Stages: []engine.Stage{{Target: 200, Duration: 4 * time.Second}, {Target: 50, Duration: 3 * time.Second}}},
	}
	for name, r := range rates {
		for _, sp := range []engine.Spacing{engine.Even, engine.Poisson} {
			for _, weights := range [][]int{{1}, {1, 1}, {2, 1, 1}, {3, 0, 2}, {8, 8, 4, 1}} {
				for _, offset := range []time.Duration{0, 3700 * time.Millisecond, 9 * time.Second} {
					sc, err := engine.NewSchedule(r, sp, 11)
					if err != nil {
						t.Fatal(err)
					}
					ref, _ := engine.NewSchedule(r, sp, 11)
					p, err := newPacing(sc)
					if err != nil {
						t.Fatal(err)
					}
					what := func() string { return name + " " + sp.String() + " " + offset.String() }
					anchor, cycle, shares := p.deal(weights, offset)
					if anchor != ref.Index(offset) {
						t.Fatalf("%s %v: anchored at %d, want %d", what(), weights, anchor, ref.Index(offset))
					}
					var all []arrival
					for i, share := range shares {
						mine := run(t, share)
						for k := range mine {
							if k > 0 && mine[k].due < mine[k-1].due {
								t.Fatalf("%s %v: agent %d's arrival %d due before the one before it", what(), weights, i, k)
							}
						}
						// its weight's share of each whole cycle, ± one cycle's
						want := float64(weights[i]) / float64(sum(weights)) * float64(ref.Index(engine.Forever)-anchor)
						if d := float64(len(mine)) - want; d > float64(cycle) || d < -float64(cycle) {
							t.Errorf("%s %v: agent %d started %d arrivals, want %.0f", what(), weights, i, len(mine), want)
						}
						all = append(all, mine...)
						// resumed later, from the arrival due then
						later := offset + 1234*time.Millisecond
						from := ref.Index(later)
						again := run(t, p.share(anchor, cycle, share.Positions, max(anchor, from), later))
						var tail []arrival
						for _, a := range mine {
							if a.n >= from {
								tail = append(tail, a)
							}
						}
						if !slices.Equal(again, tail) {
							t.Errorf("%s %v: agent %d resumed at %v started %d arrivals, want its %d from %d on", what(), weights, i, later, len(again), len(tail), from)
						}
					}
					slices.SortFunc(all, func(a, b arrival) int { return int(a.n - b.n) })
					n := anchor
					for ; ; n++ {
						due, ok := ref.Due(n)
						if !ok {
							break
						}
						if k := n - anchor; k >= int64(len(all)) || all[k] != (arrival{n, due}) {
							t.Fatalf("%s %v: the agents' arrival %d is not the schedule's %d due at %v", what(), weights, k, n, due)
						}
						if due < offset {
							t.Fatalf("%s %v: arrival %d due at %v, before the deal at %v", what(), weights, n, due, offset)
						}
					}
					if int64(len(all)) != n-anchor {
						t.Errorf("%s %v: the agents started %d arrivals, the schedule has %d from %d on", what(), weights, len(all), n-anchor, anchor)
					}
				}
			}
		}
	}
}

func sum(w []int) int {
	s := 0
	for _, x := range w {
		s += x
	}
	return s
}
