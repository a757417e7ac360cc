package main

import (
	"container/heap"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/headroom-dev/headroom/control"
)

// limiter is nginx's limit_req with nodelay (ngx_http_limit_req_lookup):
// the bucket's excess in thousandths of a request drains at rate a second,
// counted in whole milliseconds; a request that would lift it past burst is
// refused and leaves it as it was.
type limiter struct {
	rate, burst  int64 // requests a second, requests past the rate let through at once
	excess, last int64 // thousandths of a request; ms of the last request let through
	seen         bool  // the key has a node: its first request makes it, at excess 0
}

func (l *limiter) allow(ms int64) bool {
	if !l.seen {
		l.seen, l.last = true, ms
		return true
	}
	d := ms - l.last
	if d < 0 {
		d = 0
	}
	excess := max(l.excess-l.rate*1000*d/1000+1000, 0)
	if excess > l.burst*1000 {
		return false
	}
	l.excess = excess
	if d != 0 {
		l.last = ms
	}
	return true
}

// config is a search of the bucket as headroom's ceiling runs it: users
// each sending one request a cycle (Think and Service), their phases drawn
// uniformly, each pause moved by up to Jitter either way (the engine's
// phaseJitter); one evaluation a second, firing when more than Threshold of
// the requests started in the Window before it were refused; the search
// (control.Search) from Start users with Settle and Judge, then the answer
// held for Measure past Settle and judged again, as runner.Ceiling does.
type config struct {
	Rate, Burst    int
	Think, Service time.Duration
	Jitter         float64
	Window         time.Duration
	Start          int
	Settle, Judge  time.Duration
	Measure        time.Duration
	Threshold      float64
}

// arrivals is a min-heap of the users' next start times, in nanoseconds.
type arrivals []int64

func (a arrivals) Len() int           { return len(a) }
func (a arrivals) Less(i, j int) bool { return a[i] < a[j] }
func (a arrivals) Swap(i, j int)      { a[i], a[j] = a[j], a[i] }
func (a *arrivals) Push(x any)        { *a = append(*a, x.(int64)) }
func (a *arrivals) Pop() any          { x := (*a)[len(*a)-1]; *a = (*a)[:len(*a)-1]; return x }

// world is the bucket and the users loading it, second by second.
type world struct {
	c             config
	r             *rand.Rand
	users         arrivals
	bucket        limiter
	now           int64 // ns
	sent, refused []int // by the second a request started in
}

// setUsers adds users on phases drawn uniformly over the next cycle, or
// removes users drawn at random: either way the users' phases stay
// independent and uniform, as an ideal generator keeps them.
func (w *world) setUsers(n int) {
	cycle := int64(w.c.Think + w.c.Service)
	for len(w.users) < n {
		heap.Push(&w.users, w.now+w.r.Int64N(cycle))
	}
	for len(w.users) > n {
		heap.Remove(&w.users, w.r.IntN(len(w.users)))
	}
}

// advance runs the users' requests through the bucket up to t (ns).
func (w *world) advance(t int64) {
	for len(w.users) > 0 && w.users[0] < t {
		at := w.users[0]
		sec := int(at / 1e9)
		for len(w.sent) <= sec {
			w.sent, w.refused = append(w.sent, 0), append(w.refused, 0)
		}
		w.sent[sec]++
		if !w.bucket.allow(at / 1e6) {
			w.refused[sec]++
		}
		pause := float64(w.c.Think) * (1 + w.c.Jitter*(2*w.r.Float64()-1))
		w.users[0] = at + int64(w.c.Service) + int64(pause)
		heap.Fix(&w.users, 0)
	}
	w.now = t
}

// observe is the evaluation at second t: the share of the requests started
// in the window before it that were refused, against the threshold.
func (w *world) observe(t int) control.Observation {
	o := control.Observation{Elapsed: time.Duration(t) * time.Second, Users: len(w.users)}
	s, f := 0, 0
	for i := max(t-int(w.c.Window/time.Second), 0); i < min(t, len(w.sent)); i++ {
		s, f = s+w.sent[i], f+w.refused[i]
	}
	if s > 0 {
		o.Pressure = float64(f) / float64(s) / w.c.Threshold
		if o.Pressure > 1 {
			o.Fired = []string{"http_5xx_rate"}
		}
	}
	return o
}

// search runs one search with an ideal generator, its phases drawn from
// seed, and returns its answer (0 when it found none in an hour).
func (c config) search(seed uint64) int {
	w := &world{c: c, r: rand.New(rand.NewPCG(seed, 50)), bucket: limiter{rate: int64(c.Rate), burst: int64(c.Burst)}}
	s := control.NewSearch(control.SearchConfig{Start: c.Start, Max: 4 * c.Rate, Settle: c.Settle, Judge: c.Judge, Window: c.Window})
	var hold *control.Level
	var held int // seconds the answer has been held
	for t := 1; t < 3600; t++ {
		w.advance(int64(t) * 1e9)
		o := w.observe(t)
		if hold != nil {
			if held++; time.Duration(held)*time.Second > c.Settle {
				hold.Count(o)
				hold.End = o.Elapsed.Seconds()
			}
			if time.Duration(held)*time.Second < c.Settle+c.Measure {
				continue
			}
			hold.Verdict = "healthy"
			if 2*hold.Unhealthy > hold.Evaluations {
				hold.Verdict = "unhealthy"
			}
			d := s.Held(*hold, o)
			hold = nil
			if d.Done {
				return d.Users
			}
			w.setUsers(d.Users)
			continue
		}
		d := s.Decide(o)
		w.setUsers(d.Users)
		if d.Done {
			e := s.Estimate()
			if !e.Found || c.Measure <= 0 {
				return int(e.Value)
			}
			hold, held = &control.Level{Users: int(e.Value), Start: o.Elapsed.Seconds(), Fired: map[string]int{}, SetUp: int(e.Value)}, 0
			w.setUsers(hold.Users)
		}
	}
	return 0
}

// ideal is the range of an ideal generator's answers: the 5th and 95th
// percentiles and the median of searches, each with its own draws of the
// users' phases.
func (c config) ideal(searches int, seed uint64) (lo, median, hi int) {
	answers := make([]int, searches)
	for i := range answers {
		answers[i] = c.search(seed<<32 | uint64(i))
	}
	slices.Sort(answers)
	at := func(q float64) int { return answers[int(q*float64(searches-1)+0.5)] }
	return at(0.05), at(0.5), at(0.95)
}
