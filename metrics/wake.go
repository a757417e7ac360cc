package metrics

import (
	"math"
	"slices"
	"time"
)

// SlotWidth is the grain of burstiness: starts are counted per 10 ms of
// the clock.
const SlotWidth = 10 * time.Millisecond

// MaxSlotAge bounds how far back a Wakes keeps its slots once it holds
// many: 3 s of the clock before its newest. Burstiness is a figure of one
// second (Wakes.Seal); what a run or a level keeps of it is its Peak.
const MaxSlotAge = 300

// Wakes is the generator's own schedule over a window: every start it
// scheduled (a closed-model user's think time ending, an open-model
// arrival starting), how late it fired, and in which 10 ms of the clock it
// started and was meant to start. It merges exactly (slots by the clock,
// so shards and agents add up to what the target received from them all)
// and is not safe for concurrent use.
type Wakes struct {
	// Late has one sample per start: Count the starts, the histogram
	// how late each fired after its intended time (µs, at least 1).
	Late *Stat
	// Slots counts starts by 10 ms slot of the clock (Unix time /
	// SlotWidth): [0] as they started, [1] as they were meant to.
	Slots map[int64][2]int64
	// Peak is the worst of the seconds sealed into this window (Seal,
	// Merge): each figure the largest of any second.
	Peak Burst
}

// Burst is how bunched the starts of a window were: the most that began
// in any 10 ms and in any 100 ms (ten slots in a row), as they did, as
// they were meant to, and as independent starts at the window's rate
// would (Poisson: the median of the most in any of a second's windows).
// A generator that keeps its schedule has Max near Meant; a stall that
// woke many users at once has Max far above both.
type Burst struct {
	Starts            int64
	Max10, Max100     int64 // as they started
	Meant10, Meant100 int64 // as they were meant to
	Fair10, Fair100   int64 // independent starts at the same rate
}

// NewWakes returns an empty Wakes.
func NewWakes() *Wakes { return &Wakes{Late: NewStat(), Slots: map[int64][2]int64{}} }

func slotOf(t time.Time) int64 { return t.UnixNano() / int64(SlotWidth) }

// add records one start at at, meant for want.
func (w *Wakes) add(want, at time.Time) {
	late := at.Sub(want)
	w.Late.Add(&Sample{Latency: max(late, 0)})
	a, m := slotOf(at), slotOf(want)
	c := w.Slots[a]
	c[0]++
	if m == a {
		c[1]++
		w.Slots[a] = c
		return
	}
	w.Slots[a] = c
	c = w.Slots[m]
	c[1]++
	w.Slots[m] = c
}

// Merge adds o's starts into w. Past a few seconds of slots, those older
// than MaxSlotAge before the newest are let go: their seconds are in
// Peak already.
func (w *Wakes) Merge(o *Wakes) {
	w.Late.Merge(o.Late)
	newest := int64(math.MinInt64)
	for k, c := range o.Slots {
		d := w.Slots[k]
		d[0] += c[0]
		d[1] += c[1]
		w.Slots[k] = d
		newest = max(newest, k)
	}
	w.Peak = w.Peak.worst(o.Peak)
	if len(w.Slots) > 2*MaxSlotAge {
		for k := range w.Slots {
			newest = max(newest, k)
		}
		for k := range w.Slots {
			if k < newest-MaxSlotAge {
				delete(w.Slots, k)
			}
		}
	}
}

// Reset empties w, keeping its memory.
func (w *Wakes) Reset() {
	w.Late.Reset()
	clear(w.Slots)
	w.Peak = Burst{}
}

// Seal works out the burstiness of w's starts over window (one second,
// as a runner collects it), makes it w's Peak if worse, and returns it.
func (w *Wakes) Seal(window time.Duration) Burst {
	b := w.burst(window)
	w.Peak = w.Peak.worst(b)
	return b
}

// burst is the burstiness of w's slots over window.
func (w *Wakes) burst(window time.Duration) Burst {
	var b Burst
	if len(w.Slots) == 0 {
		return b
	}
	keys := make([]int64, 0, len(w.Slots))
	for k, c := range w.Slots {
		keys = append(keys, k)
		b.Starts += c[0]
	}
	slices.Sort(keys)
	for i := range 2 {
		var sum int64
		lo := 0
		most10, most100 := int64(0), int64(0)
		for _, k := range keys {
			c := w.Slots[k][i]
			most10 = max(most10, c)
			sum += c
			for keys[lo] <= k-10 { // the window (k-10, k]: ten slots
				sum -= w.Slots[keys[lo]][i]
				lo++
			}
			most100 = max(most100, sum)
		}
		if i == 0 {
			b.Max10, b.Max100 = most10, most100
		} else {
			b.Meant10, b.Meant100 = most10, most100
		}
	}
	slots := max(window/SlotWidth, 1)
	mean := float64(b.Starts) / float64(slots)
	b.Fair10 = PoissonMax(mean, int(slots))
	b.Fair100 = PoissonMax(10*mean, max(int(slots/10), 1))
	return b
}

// worst is the larger of each figure of b and o.
func (b Burst) worst(o Burst) Burst {
	return Burst{Starts: max(b.Starts, o.Starts), Max10: max(b.Max10, o.Max10), Max100: max(b.Max100, o.Max100),
		Meant10: max(b.Meant10, o.Meant10), Meant100: max(b.Meant100, o.Meant100), Fair10: max(b.Fair10, o.Fair10), Fair100: max(b.Fair100, o.Fair100)}
}

// PoissonMax is the median of the largest of n counts drawn from a
// Poisson distribution of mean mu: what the busiest of n windows holds
// when starts are independent. Pure; 0 for mu <= 0.
func PoissonMax(mu float64, n int) int64 {
	if mu <= 0 || n <= 0 {
		return 0
	}
	// The smallest k with P(X <= k)^n >= 1/2.
	want := math.Pow(0.5, 1/float64(n))
	p := math.Exp(-mu) // P(X = 0)
	if p == 0 {        // mu past ~745: the normal approximation is close enough
		return int64(math.Ceil(mu + math.Sqrt(mu)*math.Sqrt2*math.Erfinv(2*want-1)))
	}
	cdf := p
	for k := int64(0); ; k++ {
		if cdf >= want || k > int64(10*mu)+100 {
			return k
		}
		p *= mu / float64(k+1)
		cdf += p
	}
}

// PoissonBound is the least count k that any of n windows reaches with
// probability at most p (a union bound: n·P(X >= k) <= p, X Poisson of
// mean mu): past it, the busiest window is not chance at that rate. The
// untrue-load rule judges a window's starts by it (analysis.Untrue). Pure;
// 0 for mu <= 0 or n <= 0; p in (0, 1).
func PoissonBound(mu float64, n int, p float64) int64 {
	if mu <= 0 || n <= 0 {
		return 0
	}
	tail := p / float64(n) // P(X >= k) at most this
	pk := math.Exp(-mu)    // P(X = 0)
	if pk == 0 {           // mu past ~745: the normal approximation is close enough
		return int64(math.Ceil(mu + math.Sqrt(mu)*math.Sqrt2*math.Erfinv(1-2*tail)))
	}
	above := 1.0 // P(X >= k)
	for k := int64(0); ; k++ {
		if above <= tail || k > int64(10*mu)+100 {
			return k
		}
		above -= pk
		pk *= mu / float64(k+1)
	}
}
