package metrics

import "time"

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
	// Setup holds the samples of users' setups (Sample.Setup), apart
	// from the figures above; nil until there is one. Its Start and End
	// are not kept.
	Setup *Snapshot
}

// NewSnapshot returns an empty Snapshot.
func NewSnapshot() *Snapshot {
	return &Snapshot{Requests: map[string]*Stat{}, Actions: map[string]*Stat{}}
}

// setup returns s.Setup, made if need be.
func (s *Snapshot) setup() *Snapshot {
	if s.Setup == nil {
		s.Setup = NewSnapshot()
	}
	return s.Setup
}

func (s *Snapshot) table(k Kind) map[string]*Stat {
	if k == Action {
		return s.Actions
	}
	return s.Requests
}

// Add records one sample.
func (s *Snapshot) Add(x *Sample) {
	if x.Setup {
		s = s.setup()
	}
	t := s.table(x.Kind)
	st := t[x.Name]
	if st == nil {
		st = NewStat()
		t[x.Name] = st
	}
	st.Add(x)
}

// Merge adds every Stat of o into s and widens s's window to cover o's.
func (s *Snapshot) Merge(o *Snapshot) {
	s.mergeStats(o)
	s.widen(o)
}

// mergeStats adds every Stat of o, its setup's included, into s.
func (s *Snapshot) mergeStats(o *Snapshot) {
	for _, k := range []Kind{Request, Action} {
		dst := s.table(k)
		for name, st := range o.table(k) {
			if st.Count == 0 && st.Canceled == 0 {
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
	if o.Setup != nil {
		s.setup().mergeStats(o.Setup)
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
	for _, st := range s.Requests {
		st.Reset()
	}
	for _, st := range s.Actions {
		st.Reset()
	}
	if s.Setup != nil {
		s.Setup.Reset()
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
		if st := t[name]; st.Count > 0 || st.Canceled > 0 {
			out = append(out, st.Summarize(name, window))
		}
	}
	return out
}
