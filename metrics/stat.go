// Package metrics records what users did: one latency histogram, status
// counts, errors, timeouts and bytes per request name and per action.
//
// Recording is sharded: each user records into one Shard (a worker's
// recorder), and a Collector merges the shards exactly, once a second, into
// interval and cumulative Snapshots. Nothing is sampled and nothing is
// rounded: latencies go into HDR histograms with three significant digits
// at microsecond resolution.
package metrics

import (
	"sort"
	"strconv"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram range: 1 µs to 1 hour at three significant digits. A latency
// above the range is recorded as the highest trackable value.
const (
	LowestMicros  = 1
	HighestMicros = int64(time.Hour / time.Microsecond)
	SigFigs       = 3
)

// NewHistogram returns an empty latency histogram in microseconds with the
// range every headroom histogram shares, so any two can be merged exactly.
func NewHistogram() *hdr.Histogram {
	return hdr.New(LowestMicros, HighestMicros, SigFigs)
}

// Outcome classifies one request or action.
type Outcome uint8

const (
	OK       Outcome = iota // completed and counted as success
	Failed                  // an unexpected status, a transport error, or a failed action
	Timeout                 // no complete response within the timeout
	Canceled                // stopped by headroom (user removed, run ended); not a failure of the target
	// DroppedArrival is an arrival of the open model that never started:
	// no user of the pool came free in time (k6's dropped_iterations).
	// Like Canceled, it is kept out of Count and the histogram, and
	// counted apart (Stat.Dropped). (Kind Dropped is a WebSocket's.)
	DroppedArrival
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Failed:
		return "error"
	case Timeout:
		return "timeout"
	case Canceled:
		return "canceled"
	case DroppedArrival:
		return "dropped"
	}
	return "unknown"
}

// Kind tells what a sample is: one HTTP request, one whole action, or one
// of the events of a connected user (a long poll, a WebSocket's messages and
// life, a delivery).
type Kind uint8

const (
	Request Kind = iota
	Action
	// Poll is a long-poll request (a Matrix /sync?timeout=30000): counted
	// like a request, but its latency is time waited for news, not time
	// served, so it goes to Snapshot.Polls and never into request latency.
	Poll
	// MessageIn and MessageOut are one WebSocket message received or sent:
	// Name is the connection's name, Type the message's type (its
	// type_field, or "text"/"binary"), BytesIn or BytesOut its size.
	MessageIn
	MessageOut
	// Delivery is the time from a message's send (its stamp) to its
	// arrival at a user (Latency), under the name the scenario gave.
	Delivery
	// Opened and Closed are a WebSocket connection of Name opened (after
	// its handshake, itself a Request sample) and ended: Outcome OK when it
	// ended normally (closed by the user, or a close frame 1000 or 1001
	// from the server), Failed otherwise (an abnormal close, with Message).
	Opened
	Closed
	// Reconnect is one attempt to reconnect a connection of Name, by the
	// scenario or by its reconnect policy.
	Reconnect
	// Gap is a jump in a connection's sequence field: N messages missed.
	Gap
	// Dropped is N messages of a connection dropped because its user's
	// inbox was full.
	Dropped
	// Arrival is one arrival of the open model, under the executor's
	// name: OK once an iteration started for it, Latency how late after
	// its intended time (the executor woke late, or waited for a user);
	// DroppedArrival if none started; Canceled if the run stopped while
	// it waited. Snapshot.Arrivals holds them.
	Arrival
)

// Sample is one finished request or action.
type Sample struct {
	Kind     Kind
	Name     string        // request name or action name; never a raw URL
	Outcome  Outcome       //
	Status   int           // HTTP status; 0 when no response arrived
	Latency  time.Duration // start of request to end of response body
	BytesIn  int64         // response bytes, headers and body, as they crossed the wire
	BytesOut int64         // request bytes, headers and body
	BodyIn   int64         // of a request: its response's body as the scenario reads it, decoded
	HTTP2    bool          // of a request: its response came over HTTP/2
	Message  string        // why it failed, when it did
	// Setup marks a sample of a user's setup (its requests and the setup
	// itself): kept apart from the acting figures (Snapshot.Setup), so
	// logins never count in a window or a level.
	Setup bool
	// Requests, of an action: how many requests it sent (a request that
	// got no response counts; one refused before sending does not). An
	// action that sent none timed only the scenario's own code.
	Requests int
	// Type, of a message: its type (see MessageIn).
	Type string
	// N, of a Gap or Dropped sample: how many messages.
	N int64
	// Intended marks a request or action of the open model: its Latency
	// is counted from its arrival's intended start (wrk2's correction),
	// so a target that stalls shows in it even when the requests wait on
	// the client side, and Service is its service time, from the actual
	// send (for an action, its actual start). Snapshot.Service keeps the
	// service times apart.
	Intended bool
	Service  time.Duration
	// Phases, of a request: where its time went (Phase), those whose bit
	// is set in Timed only (a request on a kept-alive connection made no
	// connection; one without a response has no wait).
	Phases [NumPhases]time.Duration
	Timed  uint8
}

// Phase is a part of a request's time (Sample.Phases, Snapshot.Phases).
type Phase int

// The phases, as k6 names them: resolving the host's name, connecting,
// the TLS handshake, waiting for the first byte, receiving the rest; and
// unread, a part of the wait and receive: how long the response's end
// waited, arrived in the kernel, for headroom to read it (the generator's
// own delay, transport.Response.Held; only where the kernel stamps it).
const (
	PhaseDNS Phase = iota
	PhaseConnect
	PhaseTLS
	PhaseWait
	PhaseReceive
	PhaseUnread
	NumPhases
)

// PhaseNames are the phases' names in results.
var PhaseNames = [NumPhases]string{"dns", "connect", "tls", "wait", "receive", "unread"}

// MaxMessages bounds the kinds of error messages kept per name (see
// MessageKind); the rest are counted under "other".
const MaxMessages = 20

// Stat accumulates samples of one name. It is not safe for concurrent use;
// shards guard theirs with a lock.
type Stat struct {
	Count    int64         // samples, all outcomes but Canceled
	Errors   int64         // Failed samples (Timeout is counted apart)
	Timeouts int64         // Timeout samples
	Canceled int64         // Canceled samples, kept out of everything else
	Dropped  int64         // DroppedArrival samples (Kind Arrival), kept out of everything else
	Status   map[int]int64 // responses by HTTP status; 0 = no response
	BytesIn  int64         //
	BytesOut int64         //
	BodyIn   int64         // requests' response bodies, decoded (Sample.BodyIn)
	HTTP2    int64         // responses that came over HTTP/2
	// NoRequest, of actions: how many of Count sent no request, so that
	// their latency is the scenario's code alone, no server's.
	NoRequest int64
	// Messages counts error messages by kind (message.go), keyed by the
	// kind's key: at most MaxMessages kinds plus "other". MessageCounts
	// shows them.
	Messages map[string]MessageKind

	// The latency histogram (Hist) is kept in one of two forms. While a
	// Stat has few distinct latencies (fewer than maxSparse buckets: a
	// name's second, as the shards and the run's interval hold it), every
	// value is in buckets alone, and hist is nil or empty: hdrhistogram-go
	// has no way to find the non-empty buckets of a dense histogram but to
	// go through all 23,552 counts, which Merge, Reset and every percentile
	// would do for every name every second (Reset alone was 3% of a chat
	// run's CPU at 2,000 users). Past maxSparse buckets, or once Hist is
	// asked for, s is dense: hist holds every value, and buckets too while
	// they fit (Sparse tells), until Reset.
	hist    *hdr.Histogram
	dense   bool
	buckets *hdr.PackedHistogram
}

// maxSparse bounds the buckets Stat.buckets follows; a Stat with more
// (thousands of samples in a second) leaves it behind until Reset:
// inserting into a sorted list that long costs more than it saves.
const maxSparse = 256

// NewStat returns an empty Stat.
func NewStat() *Stat {
	return &Stat{Status: map[int]int64{}, Messages: map[string]MessageKind{},
		buckets: hdr.NewPacked(LowestMicros, HighestMicros, SigFigs)}
}

// Hist returns s's latency histogram in microseconds, all outcomes but
// Canceled (NewHistogram's range). It may be written to: s then keeps its
// values there until Reset.
func (s *Stat) Hist() *hdr.Histogram {
	if !s.dense {
		if s.hist == nil {
			s.hist = NewHistogram()
		}
		if s.buckets != nil {
			s.buckets.MergeInto(s.hist)
		}
		s.dense = true
	}
	return s.hist
}

// Sparse returns the non-empty buckets of s's histogram, by value, if
// they hold every value of it, or nil: a Stat past maxSparse buckets, or
// whose Hist was written to directly, holds more values in Hist. The wire
// format encodes them without going through Hist's 23,552 counts. Not to
// be written to.
func (s *Stat) Sparse() *hdr.PackedHistogram {
	if s.buckets == nil || s.dense && s.buckets.TotalCount() != s.hist.TotalCount() {
		return nil
	}
	return s.buckets
}

// Percentile returns the latency at percentile q (0 to 100) in
// microseconds, as Hist().ValueAtPercentile does, without making s dense.
func (s *Stat) Percentile(q float64) int64 { return s.figures().ValueAtPercentile(q) }

// figures is what s's latency figures are read from: its sparse buckets
// while they hold every value (s stays sparse), its histogram otherwise;
// the figures are the same either way.
func (s *Stat) figures() interface {
	Mean() float64
	ValueAtPercentile(float64) int64
	Max() int64
} {
	if b := s.Sparse(); b != nil {
		return b
	}
	return s.Hist()
}

// makeRoom makes s dense if its sparse buckets may have no room for
// another value.
func (s *Stat) makeRoom() {
	if !s.dense && (s.buckets == nil || s.buckets.Populated() >= maxSparse) {
		s.Hist()
	}
}

// Add records one sample.
func (s *Stat) Add(x *Sample) {
	switch x.Outcome {
	case Canceled:
		s.Canceled++
		return
	case DroppedArrival:
		s.Dropped++
		return
	}
	s.addTime(x.Latency)
	switch x.Outcome {
	case Failed:
		s.Errors++
	case Timeout:
		s.Timeouts++
	}
	s.Status[x.Status]++
	s.BytesIn += x.BytesIn
	s.BytesOut += x.BytesOut
	s.BodyIn += x.BodyIn
	if x.HTTP2 {
		s.HTTP2++
	}
	if x.Kind == Action && x.Requests == 0 {
		s.NoRequest++
	}
	if x.Message != "" {
		var vals [MaxParts]int64
		key, n := messageKind(x.Message, &vals)
		k := s.kind(&key)
		if key == "other" {
			n = 0
		}
		k.add(1, vals[:n])
		s.Messages[key] = k
	}
}

// addTime counts one value of d in s's histogram and Count: all a
// phase's Stat (Snapshot.Phases) records but its status.
func (s *Stat) addTime(d time.Duration) {
	us := min(max(d.Microseconds(), LowestMicros), HighestMicros)
	s.makeRoom()
	if s.dense {
		b := s.Sparse()
		_ = s.hist.RecordValue(us) // in range by construction
		if b != nil && b.Populated() < maxSparse {
			_ = b.RecordValue(us)
		}
	} else {
		_ = s.buckets.RecordValue(us)
	}
	s.Count++
}

// kind returns the kind stored under *key, which it first changes to
// "other" when s holds MaxMessages kinds and not this one.
func (s *Stat) kind(key *string) MessageKind {
	k, ok := s.Messages[*key]
	if !ok && len(s.Messages) >= MaxMessages {
		*key = "other"
		return s.Messages["other"]
	}
	return k
}

// MessageCounts returns the error messages of s as people read them, one
// per kind ("timeout after 10.1s–10.4s"), with their counts.
func (s *Stat) MessageCounts() map[string]int64 {
	if len(s.Messages) == 0 {
		return nil
	}
	out := make(map[string]int64, len(s.Messages))
	for key, k := range s.Messages {
		out[k.Text(key)] += k.Count
	}
	return out
}

// Merge adds o into s exactly.
func (s *Stat) Merge(o *Stat) {
	sb, ob := s.Sparse(), o.Sparse()
	switch {
	case ob == nil:
		s.Hist().Merge(o.Hist()) // leaves sb behind
	case !s.dense && sb != nil && sb.Populated()+ob.Populated() <= maxSparse:
		sb.Merge(ob) // s stays sparse
	default:
		ob.MergeInto(s.Hist()) // bucket to bucket, as many as there are
		if sb != nil && sb.Populated()+ob.Populated() <= maxSparse {
			sb.Merge(ob)
		}
	}
	s.Count += o.Count
	s.Errors += o.Errors
	s.Timeouts += o.Timeouts
	s.Canceled += o.Canceled
	s.Dropped += o.Dropped
	for k, v := range o.Status {
		s.Status[k] += v
	}
	s.BytesIn += o.BytesIn
	s.BytesOut += o.BytesOut
	s.BodyIn += o.BodyIn
	s.HTTP2 += o.HTTP2
	s.NoRequest += o.NoRequest
	for key, k := range o.Messages {
		s.MergeMessage(key, k)
	}
}

// MergeMessage adds o, the kind of error message stored under key in
// another Stat, into s.
func (s *Stat) MergeMessage(key string, o MessageKind) {
	k := s.kind(&key)
	if key == "other" { // its parts have no place in "other"
		o = MessageKind{Count: o.Count}
	}
	k.Merge(o)
	s.Messages[key] = k
}

// RecordBuckets adds counts of values, each a [value µs, count] pair in
// NewHistogram's range, into s's histogram and nothing else (not Count):
// into its sparse buckets while they hold every value and have room, as
// Add does (a coordinator's second of a few agents and names stays
// sparse, and its Reset cheap). It is how a histogram read bucket by
// bucket (the wire format) is merged into s. A count that would take the
// total past math.MaxInt64 is dropped, as Histogram.Merge drops it.
func (s *Stat) RecordBuckets(buckets [][2]int64) {
	for i, b := range buckets {
		s.makeRoom()
		if s.dense {
			for _, r := range buckets[i:] {
				_ = s.hist.RecordValues(r[0], r[1]) // buckets left behind: Sparse tells
			}
			return
		}
		_ = s.buckets.RecordValues(b[0], b[1])
	}
}

// Counted reports whether s counted any sample, whatever its outcome.
func (s *Stat) Counted() bool { return s.Count > 0 || s.Canceled > 0 || s.Dropped > 0 }

// Reset empties s, keeping its memory.
func (s *Stat) Reset() {
	if s.dense {
		s.hist.Reset()
		s.dense = false
	}
	if s.buckets != nil {
		s.buckets.Reset()
	}
	s.Count, s.Errors, s.Timeouts, s.Canceled, s.Dropped, s.BytesIn, s.BytesOut, s.BodyIn, s.HTTP2, s.NoRequest = 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
	clear(s.Status)
	clear(s.Messages)
}

// Summary is a Stat reduced to the figures people read. Latencies are in
// milliseconds; Rate is per second over the window it was computed for.
type Summary struct {
	Name     string  `json:"name"`
	Count    int64   `json:"count"`
	Errors   int64   `json:"errors"`
	Timeouts int64   `json:"timeouts"`
	Canceled int64   `json:"canceled,omitempty"`
	Dropped  int64   `json:"dropped,omitempty"` // arrivals only: never started
	MeanMs   float64 `json:"mean_ms"`
	P50Ms    float64 `json:"p50_ms"`
	P90Ms    float64 `json:"p90_ms"`
	P95Ms    float64 `json:"p95_ms"`
	P99Ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
	RPS      float64 `json:"rps"`
	BytesIn  int64   `json:"bytes_in"`
	BytesOut int64   `json:"bytes_out"`
	// BodyIn, requests only: the response bodies as read, decoded; below
	// BytesIn (which holds the heads too) unless bodies came compressed.
	BodyIn int64 `json:"body_bytes_in,omitempty"`
	// HTTP2, requests only: how many of the responses came over HTTP/2.
	HTTP2    int64            `json:"http2,omitempty"`
	Status   map[string]int64 `json:"status,omitempty"`
	Messages map[string]int64 `json:"messages,omitempty"` // by kind (see Stat.MessageCounts)

	// NoRequest, actions only: how many of Count sent no request.
	NoRequest int64 `json:"no_request,omitempty"`
}

// Summarize reduces s over a window of the given length.
func (s *Stat) Summarize(name string, window time.Duration) Summary {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	out := Summary{
		Name: name, Count: s.Count, Errors: s.Errors, Timeouts: s.Timeouts, Canceled: s.Canceled, Dropped: s.Dropped,
		BytesIn: s.BytesIn, BytesOut: s.BytesOut, BodyIn: s.BodyIn, HTTP2: s.HTTP2, NoRequest: s.NoRequest,
	}
	if s.Count > 0 {
		h := s.figures()
		out.MeanMs = h.Mean() / 1000
		out.P50Ms = ms(h.ValueAtPercentile(50))
		out.P90Ms = ms(h.ValueAtPercentile(90))
		out.P95Ms = ms(h.ValueAtPercentile(95))
		out.P99Ms = ms(h.ValueAtPercentile(99))
		out.MaxMs = ms(h.Max())
	}
	if window > 0 {
		out.RPS = float64(s.Count) / window.Seconds()
	}
	if len(s.Status) > 0 {
		out.Status = map[string]int64{}
		for k, v := range s.Status {
			out.Status[statusLabel(k)] = v
		}
	}
	out.Messages = s.MessageCounts()
	return out
}

// statusLabel is how a status is written in results and labels: "200",
// or "0" when no response arrived.
func statusLabel(code int) string { return strconv.Itoa(code) }

// Names returns the keys of m sorted.
func Names(m map[string]*Stat) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
