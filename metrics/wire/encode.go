// Package wire is the agents' wire format: a metrics.Snapshot as an agent
// sends it to its coordinator once a second (AppendSnapshot) and as the
// coordinator merges it (MergeEncoded, MergeEncodedAll), checked whole
// before anything is merged, since the bytes come over the network; and
// an agent's Prometheus families (EncodeFamilies, DecodeFamilies), which
// the coordinator sums with metrics.SumFamilies. It knows how a Snapshot
// is laid out on the wire, not how samples are recorded: metrics merges
// what it decodes (Stat.RecordBuckets, Stat.MergeMessage, FlowOf).
package wire

import (
	"encoding/binary"
	"errors"
	"iter"
	"slices"
	"strings"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/headroom-dev/headroom/internal/runecut"
	"github.com/headroom-dev/headroom/metrics"
)

// The wire format of a Snapshot: what an agent sends its coordinator once a
// second (issue 13), and what the coordinator merges without building a
// Snapshot of it. Numbers are varints (encoding/binary), unsigned but for
// seconds and parts; every list is sorted and says first how long it is:
//
//	snapshot = version(byte) seq start end body setup service wakes phases phases
//	setup    = 0 | 1 body                      (a setup's window, seq, own setup and service are not kept)
//	service  = 0 | 1 body                      (Snapshot.Service; likewise)
//	phases   = 5 × (0 | 1 body)                (Snapshot.Phases, dns to receive; a phase's own are not kept;
//	                                           then the setup's, Snapshot.Setup.Phases)
//	wakes    = 0 | 1 stats n×(slot actual meant) (Snapshot.Wakes: Late as the one name "wake", then its
//	                                           slots in order, the first a signed number, each next its gap)
//	body     = stats(Requests) stats(Actions) stats(Polls) stats(Deliveries) stats(Arrivals) sockets
//	stats    = n × (name Count Errors Timeouts Canceled Dropped BytesIn BytesOut BodyIn HTTP2 NoRequest
//	                n×(status count) n×(key kind) hist)
//	hist     = n × (gap count)                 the non-empty buckets by index; gap: empty ones skipped
//	sockets  = n × (name Opened Closed Abnormal Reconnects Gaps Missed Dropped
//	                n×(type messages bytes) n×(type messages bytes) n×(key kind))
//	kind     = Count n×(lowest highest)        an error message's kind (MessageKind) and its parts
//	time     = 0 | 1 seconds nanoseconds
//	string   = length bytes
//
// A Stat or SocketStat that counted nothing is left out, as Merge leaves it
// out. Histograms travel as their non-empty buckets, at headroom's one
// geometry (metrics.NewHistogram, metrics.BucketIndex), so they merge
// exactly and cost what they hold.

// formatVersion is the first byte of every encoding; MergeEncoded reads this
// version only. 2: the open model's arrivals, dropped counts and service
// times. 3: the generator's wakes. 4: decoded body bytes (BodyIn), HTTP/2
// responses, requests' phases. 5: setups' requests' phases. 6: the unread
// phase (metrics.PhaseUnread).
const formatVersion = 6

// ErrVersion is what MergeEncoded's error wraps for a snapshot encoded
// in a version of the format it does not read: an agent running another
// release of headroom.
var ErrVersion = errors.New("snapshot encoded by another version of headroom")

// Bounds MergeEncoded holds a snapshot to, besides metrics.MaxNames+1 names
// per table (OtherName included), MaxMessages+1 error kinds or close
// reasons per name and MaxTypes+1 message types per direction, as
// recording keeps them.
const (
	// maxString bounds names, types and error kinds in bytes;
	// AppendSnapshot cuts longer ones.
	maxString   = 4096
	maxStatus   = 1<<16 - 1 // the highest HTTP status taken; transport sees three digits
	maxStatuses = 1000      // distinct statuses per name
)

// AppendSnapshot appends the wire encoding of s to dst and returns the
// extended buffer: everything in s, each table and s.Setup included, for
// MergeEncoded to merge. MergeEncoded refuses what recording never makes:
// a histogram not of NewHistogram's geometry, or whose values or statuses
// do not add up to its Stat's Count, a negative count. Names and keys
// longer than 4 KiB are cut, and those then alike merged. It does not
// modify s, nor may s change meanwhile.
func AppendSnapshot(dst []byte, s *metrics.Snapshot) []byte {
	e := encoder{b: dst}
	e.b = append(e.b, formatVersion)
	e.uvarint(s.Seq)
	e.time(s.Start)
	e.time(s.End)
	e.body(s)
	for _, sub := range [...]*metrics.Snapshot{s.Setup, s.Service} {
		if sub == nil {
			e.b = append(e.b, 0)
		} else {
			e.b = append(e.b, 1)
			e.body(sub)
		}
	}
	e.wakes(s.Wakes)
	var setup [metrics.NumPhases]*metrics.Snapshot
	if s.Setup != nil {
		setup = s.Setup.Phases
	}
	for _, phases := range [...][metrics.NumPhases]*metrics.Snapshot{s.Phases, setup} {
		for _, ph := range phases {
			if ph == nil {
				e.b = append(e.b, 0)
			} else {
				e.b = append(e.b, 1)
				e.body(ph)
			}
		}
	}
	return e.b
}

// encoder holds what AppendSnapshot reuses from one name to the next.
type encoder struct {
	b       []byte
	names   []string
	keys    []string
	codes   []int
	buckets *hdr.PackedHistogram // the non-empty buckets of a Stat without its own
	stat    *metrics.Stat        // Stats of names alike once cut, merged
	socket  *metrics.SocketStat
}

// tables are the tables of Stats of a body, in the format's order.
func tables(s *metrics.Snapshot) [5]map[string]*metrics.Stat {
	return [...]map[string]*metrics.Stat{s.Requests, s.Actions, s.Polls, s.Deliveries, s.Arrivals}
}

func (e *encoder) body(s *metrics.Snapshot) {
	for _, t := range tables(s) {
		e.stats(t)
	}
	e.sockets(s.Sockets)
}

func (e *encoder) stats(t map[string]*metrics.Stat) {
	e.names = e.names[:0]
	for name, st := range t {
		if st.Counted() {
			e.names = append(e.names, name)
		}
	}
	e.uvarint(uint64(sortCut(e.names)))
	for run := range runs(e.names) {
		st := t[run[0]]
		if len(run) > 1 {
			if e.stat == nil {
				e.stat = metrics.NewStat()
			}
			st = e.stat
			st.Reset()
			for _, name := range run {
				st.Merge(t[name])
			}
		}
		e.str(run[0])
		for _, n := range [...]int64{st.Count, st.Errors, st.Timeouts, st.Canceled, st.Dropped, st.BytesIn, st.BytesOut, st.BodyIn, st.HTTP2, st.NoRequest} {
			e.uvarint(uint64(n))
		}
		e.codes = e.codes[:0]
		for code := range st.Status {
			e.codes = append(e.codes, code)
		}
		slices.Sort(e.codes)
		e.uvarint(uint64(len(e.codes)))
		for _, code := range e.codes {
			e.uvarint(uint64(code))
			e.uvarint(uint64(st.Status[code]))
		}
		e.kinds(st.Messages)
		e.hist(st)
	}
}

func (e *encoder) sockets(m map[string]*metrics.SocketStat) {
	e.names = e.names[:0]
	for name, st := range m {
		if !st.Empty() {
			e.names = append(e.names, name)
		}
	}
	e.uvarint(uint64(sortCut(e.names)))
	for run := range runs(e.names) {
		st := m[run[0]]
		if len(run) > 1 {
			if e.socket == nil {
				e.socket = metrics.NewSocketStat()
			}
			st = e.socket
			st.Reset()
			for _, name := range run {
				st.Merge(m[name])
			}
		}
		e.str(run[0])
		for _, n := range [...]int64{st.Opened, st.Closed, st.Abnormal, st.Reconnects, st.Gaps, st.Missed, st.Dropped} {
			e.uvarint(uint64(n))
		}
		e.flows(st.In)
		e.flows(st.Out)
		e.kinds(st.Reasons)
	}
}

func (e *encoder) flows(m map[string]*metrics.Flow) {
	e.keys = e.keys[:0]
	for typ := range m {
		e.keys = append(e.keys, typ)
	}
	e.uvarint(uint64(sortCut(e.keys)))
	for run := range runs(e.keys) {
		var f metrics.Flow
		for _, typ := range run {
			f.Messages += m[typ].Messages
			f.Bytes += m[typ].Bytes
		}
		e.str(run[0])
		e.uvarint(uint64(f.Messages))
		e.uvarint(uint64(f.Bytes))
	}
}

func (e *encoder) kinds(m map[string]metrics.MessageKind) {
	e.keys = e.keys[:0]
	for key := range m {
		e.keys = append(e.keys, key)
	}
	e.uvarint(uint64(sortCut(e.keys)))
	for run := range runs(e.keys) {
		k := m[run[0]]
		for _, key := range run[1:] {
			k.Merge(m[key])
		}
		e.str(run[0])
		e.uvarint(uint64(k.Count))
		parts := k.Parts()
		e.uvarint(uint64(len(parts)))
		for _, p := range parts {
			e.b = binary.AppendVarint(e.b, p[0])
			e.b = binary.AppendVarint(e.b, p[1])
		}
	}
}

// sortCut sorts names as they are written, cut to maxString bytes, and
// returns how many differ once cut: names alike in their first
// maxString bytes are written as one, their figures merged.
func sortCut(names []string) int {
	slices.SortFunc(names, func(a, b string) int { return strings.Compare(cut(a), cut(b)) })
	n := 0
	for range runs(names) {
		n++
	}
	return n
}

// runs yields the runs of names alike once cut, of names sorted by sortCut.
func runs(names []string) iter.Seq[[]string] {
	return func(yield func([]string) bool) {
		for i := 0; i < len(names); {
			j := i + 1
			for j < len(names) && cut(names[j]) == cut(names[i]) {
				j++
			}
			if !yield(names[i:j]) {
				return
			}
			i = j
		}
	}
}

// hist writes the non-empty buckets of st's histogram.
func (e *encoder) hist(st *metrics.Stat) {
	p := st.Sparse()
	if p == nil {
		// Only a full scan finds them in Hist: hdrhistogram-go exports no
		// way to read a count but to copy all 23,552 (Export); MergeFrom
		// scans them in place into a sparse histogram.
		if e.buckets == nil {
			e.buckets = hdr.NewPacked(metrics.LowestMicros, metrics.HighestMicros, metrics.SigFigs)
		}
		p = e.buckets
		p.Reset()
		p.MergeFrom(st.Hist())
	}
	e.uvarint(uint64(p.Populated()))
	last := -1
	for v, n := range p.ForEachBucket {
		i := metrics.BucketIndex(v)
		e.uvarint(uint64(i - last - 1))
		e.uvarint(uint64(n))
		last = i
	}
}

func (e *encoder) time(t time.Time) {
	if t.IsZero() {
		e.b = append(e.b, 0)
		return
	}
	e.b = append(e.b, 1)
	e.b = binary.AppendVarint(e.b, t.Unix())
	e.uvarint(uint64(t.Nanosecond()))
}

func (e *encoder) str(s string) {
	s = cut(s)
	e.uvarint(uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *encoder) uvarint(v uint64) {
	if v < 0x80 {
		e.b = append(e.b, byte(v))
		return
	}
	e.b = binary.AppendUvarint(e.b, v)
}

// cut cuts s to maxString bytes, at the start of a character.
func cut(s string) string { return runecut.Prefix(s, maxString) }
