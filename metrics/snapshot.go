package metrics

import (
	"sort"
	"time"
)

// Snapshot holds the Stats of every request name and action over a window.
// Snapshots merge exactly, so shards, seconds and (later) agents add up to
// the same figures as one recorder would. A Snapshot is not safe for
// concurrent use.
type Snapshot struct {
	Seq      uint64           // increases by one per drain; lets a receiver spot a lost snapshot
	Start    time.Time        // window start
	End      time.Time        // window end
	Requests map[string]*Stat // by request name
	Actions  map[string]*Stat // by action name
	// Polls holds long-poll requests (Kind Poll) by name: their latency
	// is time waited, so they are not in Requests.
	Polls map[string]*Stat
	// Deliveries holds delivery latencies (Kind Delivery) by name.
	Deliveries map[string]*Stat
	// Sockets holds WebSocket connections' life and messages by
	// connection name (MessageIn to Dropped).
	Sockets map[string]*SocketStat
	// Arrivals holds the open model's arrivals (Kind Arrival) by the
	// executor's name: started (Count, with how late in the histogram),
	// dropped (Stat.Dropped) and canceled.
	Arrivals map[string]*Stat
	// Setup holds the samples of users' setups (Sample.Setup), apart
	// from the figures above; nil until there is one. Its Start and End
	// are not kept.
	Setup *Snapshot
	// Service holds the service time of the open model's requests and
	// actions (Sample.Intended), in its Requests and Actions, under the
	// same names: the same samples whose latency from the intended start
	// the tables above hold. A second Stat per name rather than a second
	// histogram in Stat: the closed model pays nothing for it, and it
	// merges, encodes and summarizes as every other table does. nil
	// until there is one; its Start, End, Setup and Service are not kept.
	Service *Snapshot
	// Wakes holds the generator's own schedule: how late each start it
	// scheduled fired, and how bunched they were (Shard.Wake). nil until
	// there is one; a setup's and service's are not kept.
	Wakes *Wakes
	// Phases holds, for each phase of a request (PhaseNames), its times
	// by request name in its Requests table (Sample.Phases): a Snapshot
	// per phase, as Service is, so the requests that time none pay
	// nothing. nil until there is one; setups' are in Setup's.
	Phases [NumPhases]*Snapshot
}

// NewSnapshot returns an empty Snapshot.
func NewSnapshot() *Snapshot {
	return &Snapshot{Requests: map[string]*Stat{}, Actions: map[string]*Stat{}, Polls: map[string]*Stat{},
		Deliveries: map[string]*Stat{}, Sockets: map[string]*SocketStat{}, Arrivals: map[string]*Stat{}}
}

// statKinds are the kinds kept as Stats, each in a table of its own.
var statKinds = [...]Kind{Request, Action, Poll, Delivery, Arrival}

// isSocket reports whether k is one of a WebSocket's kinds (SocketStat).
func isSocket(k Kind) bool { return k >= MessageIn && k <= Dropped && k != Delivery }

// setup returns s.Setup, made if need be.
func (s *Snapshot) setup() *Snapshot {
	if s.Setup == nil {
		s.Setup = NewSnapshot()
	}
	return s.Setup
}

// wakes returns s.Wakes, made if need be.
func (s *Snapshot) wakes() *Wakes {
	if s.Wakes == nil {
		s.Wakes = NewWakes()
	}
	return s.Wakes
}

// Seal works out the burstiness of the second s holds (Wakes.Seal): a
// runner calls it on each second it collects, before merging it into
// longer windows, which keep the worst second as their Peak.
func (s *Snapshot) Seal() Burst {
	if s.Wakes == nil {
		return Burst{}
	}
	return s.Wakes.Seal(s.End.Sub(s.Start))
}

// service returns s.Service, made if need be.
func (s *Snapshot) service() *Snapshot {
	if s.Service == nil {
		s.Service = NewSnapshot()
	}
	return s.Service
}

func (s *Snapshot) table(k Kind) map[string]*Stat {
	switch k {
	case Action:
		return s.Actions
	case Poll:
		return s.Polls
	case Delivery:
		return s.Deliveries
	case Arrival:
		return s.Arrivals
	}
	return s.Requests
}

// Add records one sample. A connection's life and messages are never
// setup's: a WebSocket opened in setup stays open while the user acts. An
// Intended request or action (never setup's) is added twice: with its
// latency here, with its service time in s.Service.
func (s *Snapshot) Add(x *Sample) {
	if isSocket(x.Kind) {
		st := s.Sockets[x.Name]
		if st == nil {
			st = NewSocketStat()
			s.Sockets[x.Name] = st
		}
		st.Add(x)
		return
	}
	if x.Setup {
		s = s.setup()
	} else if x.Intended && (x.Kind == Request || x.Kind == Action) {
		y := *x
		y.Latency, y.Intended, y.Timed = x.Service, false, 0
		s.service().Add(&y)
	}
	if x.Timed != 0 && x.Kind == Request { // a setup's into s.Setup's phases
		s.addPhases(x)
	}
	t := s.table(x.Kind)
	st := t[x.Name]
	if st == nil {
		st = NewStat()
		t[x.Name] = st
	}
	st.Add(x)
}

// addPhases adds request x's timed phases to s.Phases: each a time and
// x's status, no more (no Sample made: this runs twice a request).
func (s *Snapshot) addPhases(x *Sample) {
	for p := range NumPhases {
		if x.Timed&(1<<p) == 0 {
			continue
		}
		t := s.phase(p).Requests
		st := t[x.Name]
		if st == nil {
			st = NewStat()
			t[x.Name] = st
		}
		st.addTime(x.Phases[p])
		st.Status[x.Status]++
	}
}

// phase returns s.Phases[p], made if need be.
func (s *Snapshot) phase(p Phase) *Snapshot {
	if s.Phases[p] == nil {
		s.Phases[p] = NewSnapshot()
	}
	return s.Phases[p]
}

// Merge adds every Stat of o into s and widens s's window to cover o's.
func (s *Snapshot) Merge(o *Snapshot) {
	s.mergeStats(o)
	s.widen(o)
}

// mergeStats adds every Stat of o, its setup's included, into s.
func (s *Snapshot) mergeStats(o *Snapshot) {
	for _, k := range statKinds {
		dst := s.table(k)
		for name, st := range o.table(k) {
			if !st.Counted() {
				continue
			}
			d := dst[name]
			if d == nil {
				d = NewStat()
				dst[name] = d
			}
			d.Merge(st)
		}
	}
	for name, st := range o.Sockets {
		if st.Empty() {
			continue
		}
		d := s.Sockets[name]
		if d == nil {
			d = NewSocketStat()
			s.Sockets[name] = d
		}
		d.Merge(st)
	}
	if o.Setup != nil {
		s.setup().mergeStats(o.Setup)
	}
	if o.Service != nil {
		s.service().mergeStats(o.Service)
	}
	if o.Wakes != nil {
		s.wakes().Merge(o.Wakes)
	}
	for p, ph := range o.Phases {
		if ph != nil {
			s.phase(Phase(p)).mergeStats(ph)
		}
	}
}

// widen widens s's window to cover o's.
func (s *Snapshot) widen(o *Snapshot) {
	if s.Start.IsZero() || (!o.Start.IsZero() && o.Start.Before(s.Start)) {
		s.Start = o.Start
	}
	if o.End.After(s.End) {
		s.End = o.End
	}
}

// Reset empties every Stat, keeping names and memory for reuse.
func (s *Snapshot) Reset() {
	for _, k := range statKinds {
		for _, st := range s.table(k) {
			st.Reset()
		}
	}
	for _, st := range s.Sockets {
		st.Reset()
	}
	if s.Setup != nil {
		s.Setup.Reset()
	}
	if s.Service != nil {
		s.Service.Reset()
	}
	if s.Wakes != nil {
		s.Wakes.Reset()
	}
	for _, ph := range s.Phases {
		if ph != nil {
			ph.Reset()
		}
	}
	s.Start, s.End = time.Time{}, time.Time{}
}

// Total merges the Stats of one kind into into, which it resets first.
func (s *Snapshot) Total(k Kind, into *Stat) *Stat {
	into.Reset()
	for _, st := range s.table(k) {
		into.Merge(st)
	}
	return into
}

// Summaries returns the summaries of one kind sorted by name, with rates
// over window.
func (s *Snapshot) Summaries(k Kind, window time.Duration) []Summary {
	t := s.table(k)
	out := make([]Summary, 0, len(t))
	for _, name := range Names(t) {
		if st := t[name]; st.Counted() {
			out = append(out, st.Summarize(name, window))
		}
	}
	return out
}

// SocketSummaries returns the summaries of every connection name that
// counted something, sorted by name, with rates over window.
func (s *Snapshot) SocketSummaries(window time.Duration) []SocketSummary {
	names := make([]string, 0, len(s.Sockets))
	for name, st := range s.Sockets {
		if !st.Empty() {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := make([]SocketSummary, 0, len(names))
	for _, name := range names {
		out = append(out, s.Sockets[name].Summarize(name, window))
	}
	return out
}

// OpenSockets is how many WebSocket connections are open at the end of s,
// when s is cumulative since the run began: opened minus closed.
func (s *Snapshot) OpenSockets() int64 {
	var n int64
	for _, st := range s.Sockets {
		n += st.Opened - st.Closed
	}
	return n
}
