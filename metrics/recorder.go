package metrics

import (
	"runtime"
	"sync"
	"time"
)

// Observer receives every sample as it is recorded, besides the shards;
// the Prometheus exposition implements it. It must be safe for concurrent use.
type Observer interface {
	Observe(x Sample)
}

// Recorder is a set of shards, one per worker. Users record into the shard
// they were given; Drain moves everything recorded since the last Drain into
// a Snapshot. Shards keep the lock short: one map lookup and one histogram
// increment.
type Recorder struct {
	shards []*Shard
	obs    Observer
	seq    uint64
	now    func() time.Time
	last   time.Time
	names  *names
}

// Shard is one worker's recorder. Safe for concurrent use.
type Shard struct {
	mu    sync.Mutex
	cur   *Snapshot
	spare *Snapshot
	obs   Observer
	names *names
}

// MaxNames bounds the distinct request names of a run. Every name costs a
// histogram per shard and a set of Prometheus series; past the bound,
// requests are counted under OtherName. A scenario that reaches it usually
// puts ids into request names (a URL without name=).
const MaxNames = 1000

// OtherName is where requests beyond MaxNames distinct names are counted.
const OtherName = "(other names)"

// names admits request names up to MaxNames. Safe for concurrent use.
type names struct {
	seen     sync.Map // name -> struct{}
	mu       sync.Mutex
	n        int
	overflow bool
}

// admit returns name, or OtherName once MaxNames others were admitted.
func (ns *names) admit(name string) string {
	if _, ok := ns.seen.Load(name); ok {
		return name
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if _, ok := ns.seen.Load(name); ok {
		return name
	}
	if ns.n >= MaxNames {
		ns.overflow = true
		return OtherName
	}
	ns.n++
	ns.seen.Store(name, struct{}{})
	return name
}

// DefaultShards is the shard count when none is given: one per core, at
// most 8, since every shard costs a histogram per name.
func DefaultShards() int {
	return min(runtime.GOMAXPROCS(0), 8)
}

// NewRecorder returns a recorder with n shards (DefaultShards if n <= 0).
// obs may be nil. now is the clock that stamps snapshot windows.
func NewRecorder(n int, obs Observer, now func() time.Time) *Recorder {
	if n <= 0 {
		n = DefaultShards()
	}
	r := &Recorder{obs: obs, now: now, last: now(), names: &names{}}
	for range n {
		r.shards = append(r.shards, &Shard{cur: NewSnapshot(), spare: NewSnapshot(), obs: obs, names: r.names})
	}
	return r
}

// Shard returns the shard for worker i (any int; taken modulo the count).
func (r *Recorder) Shard(i int) *Shard {
	if i < 0 {
		i = -i
	}
	return r.shards[i%len(r.shards)]
}

// Record adds one sample.
func (s *Shard) Record(x Sample) {
	if x.Kind != Action {
		x.Name = s.names.admit(x.Name)
	}
	s.mu.Lock()
	s.cur.Add(&x)
	s.mu.Unlock()
	if s.obs != nil {
		s.obs.Observe(x)
	}
}

// Wake records one start the generator scheduled, meant for want, begun
// at at: a closed-model user's think time ending, an open-model arrival
// starting (Snapshot.Wakes). It is not observed: /metrics shows the
// generator's lateness from each second drained (Prom.SetGenerator).
func (s *Shard) Wake(want, at time.Time) {
	s.mu.Lock()
	s.cur.wakes().add(want, at)
	s.mu.Unlock()
}

// Overflowed reports whether some request names were counted under
// OtherName because the run had more than MaxNames.
func (r *Recorder) Overflowed() bool {
	r.names.mu.Lock()
	defer r.names.mu.Unlock()
	return r.names.overflow
}

// Drain merges everything recorded since the last Drain into into and
// stamps its window and sequence number. Not safe to call concurrently with
// itself; safe with Record.
func (r *Recorder) Drain(into *Snapshot) {
	for _, s := range r.shards {
		s.mu.Lock()
		s.cur, s.spare = s.spare, s.cur
		s.mu.Unlock()
		into.Merge(s.spare)
		s.spare.Reset()
	}
	r.seq++
	now := r.now()
	into.Seq, into.Start, into.End = r.seq, r.last, now
	r.last = now
}
