package metrics

import (
	"sort"
	"time"
)

// MaxTypes bounds the message types counted per connection name; the rest
// are counted under OtherType. A type_field whose values are ids would
// otherwise make a series per message.
const MaxTypes = 50

// OtherType is where message types beyond MaxTypes are counted.
const OtherType = "(other types)"

// Flow counts messages and their bytes.
type Flow struct {
	Messages int64
	Bytes    int64
}

// SocketStat is what the WebSocket connections of one name did over a
// window: their life (opened, closed, abnormal closes, reconnect
// attempts) and their messages, by direction and type. Counts merge by
// addition, so shards, seconds and agents add up exactly.
type SocketStat struct {
	Opened     int64
	Closed     int64 // all closes, the abnormal ones included
	Abnormal   int64 // closes with Outcome Failed
	Reconnects int64 // attempts, successful or not
	Gaps       int64 // jumps in the sequence field
	Missed     int64 // messages the gaps skipped
	Dropped    int64 // messages dropped at a full inbox
	In         map[string]*Flow
	Out        map[string]*Flow
	// Reasons counts abnormal closes by why, as error messages are
	// counted (MessageKind's keys).
	Reasons map[string]MessageKind
}

// NewSocketStat returns an empty SocketStat.
func NewSocketStat() *SocketStat {
	return &SocketStat{In: map[string]*Flow{}, Out: map[string]*Flow{}, Reasons: map[string]MessageKind{}}
}

// flow adds n messages of b bytes of type typ into m.
func flow(m map[string]*Flow, typ string, n, b int64) {
	f := FlowOf(m, typ)
	f.Messages += n
	f.Bytes += b
}

// FlowOf returns the Flow of type typ in m, made if need be, or
// OtherType's once m holds MaxTypes types.
func FlowOf(m map[string]*Flow, typ string) *Flow {
	f := m[typ]
	if f == nil {
		if len(m) >= MaxTypes {
			typ = OtherType
			f = m[typ]
		}
		if f == nil {
			f = &Flow{}
			m[typ] = f
		}
	}
	return f
}

// Add records one sample of a socket kind.
func (s *SocketStat) Add(x *Sample) {
	switch x.Kind {
	case MessageIn:
		flow(s.In, x.Type, 1, x.BytesIn)
	case MessageOut:
		flow(s.Out, x.Type, 1, x.BytesOut)
	case Opened:
		s.Opened++
	case Closed:
		s.Closed++
		if x.Outcome == Failed {
			s.Abnormal++
			s.reason(x.Message, 1)
		}
	case Reconnect:
		s.Reconnects++
	case Gap:
		s.Gaps++
		s.Missed += x.N
	case Dropped:
		s.Dropped += x.N
	}
}

// reason counts n abnormal closes for why, normalized as error messages are.
func (s *SocketStat) reason(why string, n int64) {
	if why == "" {
		why = "closed abnormally"
	}
	var vals [MaxParts]int64
	key, parts := messageKind(why, &vals)
	k, ok := s.Reasons[key]
	if !ok && len(s.Reasons) >= MaxMessages {
		key, parts = "other", 0
		k = s.Reasons[key]
	}
	k.add(n, vals[:parts])
	s.Reasons[key] = k
}

// Merge adds o into s.
func (s *SocketStat) Merge(o *SocketStat) {
	s.Opened += o.Opened
	s.Closed += o.Closed
	s.Abnormal += o.Abnormal
	s.Reconnects += o.Reconnects
	s.Gaps += o.Gaps
	s.Missed += o.Missed
	s.Dropped += o.Dropped
	for t, f := range o.In {
		flow(s.In, t, f.Messages, f.Bytes)
	}
	for t, f := range o.Out {
		flow(s.Out, t, f.Messages, f.Bytes)
	}
	for key, k := range o.Reasons {
		s.MergeReason(key, k)
	}
}

// MergeReason adds k, the abnormal closes stored under key in another
// SocketStat, into s.
func (s *SocketStat) MergeReason(key string, k MessageKind) {
	d, ok := s.Reasons[key]
	if !ok && len(s.Reasons) >= MaxMessages {
		key, k = "other", MessageKind{Count: k.Count}
		d = s.Reasons[key]
	}
	d.Merge(k)
	s.Reasons[key] = d
}

// Reset empties s, keeping its memory.
func (s *SocketStat) Reset() {
	s.Opened, s.Closed, s.Abnormal, s.Reconnects, s.Gaps, s.Missed, s.Dropped = 0, 0, 0, 0, 0, 0, 0
	clear(s.In)
	clear(s.Out)
	clear(s.Reasons)
}

// Empty reports whether s counted nothing.
func (s *SocketStat) Empty() bool {
	return s.Opened == 0 && s.Closed == 0 && s.Reconnects == 0 && s.Gaps == 0 && s.Dropped == 0 && len(s.In) == 0 && len(s.Out) == 0
}

// Totals returns the messages and bytes of every type of m.
func Totals(m map[string]*Flow) Flow {
	var t Flow
	for _, f := range m {
		t.Messages += f.Messages
		t.Bytes += f.Bytes
	}
	return t
}

// SocketSummary is a SocketStat as results keep it. Rates are per second
// of the window it was computed for.
type SocketSummary struct {
	Name        string        `json:"name"`
	Opened      int64         `json:"opened"`
	Closed      int64         `json:"closed"`
	Abnormal    int64         `json:"abnormal_closes"`
	Reconnects  int64         `json:"reconnects"`
	MessagesIn  int64         `json:"messages_in"`
	MessagesOut int64         `json:"messages_out"`
	BytesIn     int64         `json:"bytes_in"`
	BytesOut    int64         `json:"bytes_out"`
	InPerS      float64       `json:"in_per_s"`
	OutPerS     float64       `json:"out_per_s"`
	Gaps        int64         `json:"gaps,omitempty"`
	Missed      int64         `json:"missed,omitempty"`
	Dropped     int64         `json:"dropped,omitempty"`
	Types       []TypeSummary `json:"types,omitempty"`
	// Reasons counts abnormal closes by why ("closed: websocket: close
	// 1006 (abnormal closure): unexpected EOF").
	Reasons map[string]int64 `json:"reasons,omitempty"`
}

// TypeSummary is one message type's traffic on a connection name.
type TypeSummary struct {
	Type     string `json:"type"`
	In       int64  `json:"in"`
	Out      int64  `json:"out"`
	BytesIn  int64  `json:"bytes_in"`
	BytesOut int64  `json:"bytes_out"`
}

// Summarize reduces s over a window of the given length.
func (s *SocketStat) Summarize(name string, window time.Duration) SocketSummary {
	in, out := Totals(s.In), Totals(s.Out)
	sum := SocketSummary{
		Name: name, Opened: s.Opened, Closed: s.Closed, Abnormal: s.Abnormal, Reconnects: s.Reconnects,
		MessagesIn: in.Messages, MessagesOut: out.Messages, BytesIn: in.Bytes, BytesOut: out.Bytes,
		Gaps: s.Gaps, Missed: s.Missed, Dropped: s.Dropped,
	}
	if window > 0 {
		sum.InPerS = float64(in.Messages) / window.Seconds()
		sum.OutPerS = float64(out.Messages) / window.Seconds()
	}
	types := map[string]*TypeSummary{}
	typ := func(t string) *TypeSummary {
		if types[t] == nil {
			types[t] = &TypeSummary{Type: t}
		}
		return types[t]
	}
	for t, f := range s.In {
		typ(t).In, typ(t).BytesIn = f.Messages, f.Bytes
	}
	for t, f := range s.Out {
		typ(t).Out, typ(t).BytesOut = f.Messages, f.Bytes
	}
	for _, ts := range types {
		sum.Types = append(sum.Types, *ts)
	}
	sort.Slice(sum.Types, func(i, j int) bool { return sum.Types[i].Type < sum.Types[j].Type })
	if len(s.Reasons) > 0 {
		sum.Reasons = map[string]int64{}
		for key, k := range s.Reasons {
			sum.Reasons[k.Text(key)] += k.Count
		}
	}
	return sum
}
