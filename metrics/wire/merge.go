package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/headroom-dev/headroom/metrics"
)

// MergeEncoded merges the snapshot AppendSnapshot encoded in b into into, a
// Snapshot made by metrics.NewSnapshot, and returns its sequence number. It merges
// exactly as into.Merge would the snapshot encoded, without building it:
// histograms are merged bucket by bucket. into's window widens to cover the
// snapshot's, and into.Seq becomes the larger of the two.
//
// b may come from anywhere: MergeEncoded checks the whole of it before it
// merges anything, so an error leaves into as it was. It allocates nothing
// a length field asks for: into grows by the names new to it (a Stat each,
// ~190 KB with its histogram) and the strings it keeps, no more. A count
// stops at math.MaxInt64 rather than wrap. Not safe for concurrent use
// with other uses of into.
func MergeEncoded(b []byte, into *metrics.Snapshot) (seq uint64, err error) {
	seqs, errs := MergeEncodedAll([][]byte{b}, into)
	return seqs[0], errs[0]
}

// MergeEncodedAll merges every snapshot of encs into into as MergeEncoded
// would one after the other, and returns what MergeEncoded would for each:
// one that is refused is left out whole, the others merge.
//
// It merges a name at a time, from every snapshot in turn, while into's
// figures for the name are in the processor's cache, and adds up the
// snapshots' buckets of a histogram before it records them, each once and
// in order. A coordinator's second, one snapshot from each agent, merges
// in a fraction of the time it takes one by one (BenchmarkMergeEncoded);
// it allocates 190 KB for that, once a call.
func MergeEncodedAll(encs [][]byte, into *metrics.Snapshot) (seqs []uint64, errs []error) {
	seqs, errs = make([]uint64, len(encs)), make([]error, len(encs))
	var m merger
	for i, b := range encs {
		check := merger{ds: []*decoder{{b: b}}}
		seq := check.snapshot(nil)
		if errs[i] = check.ds[0].err; errs[i] == nil {
			seqs[i] = seq
			m.ds = append(m.ds, &decoder{b: b})
		}
	}
	if len(m.ds) > 1 {
		m.sum = new(bucketSum)
	}
	m.snapshot(into)
	return seqs, errs
}

// merger reads snapshots together, name by name. With a nil target it
// only checks, one snapshot: MergeEncodedAll checks each so before merging.
type merger struct {
	ds  []*decoder
	sum *bucketSum // nil with one snapshot: its buckets go straight in
}

// decoder reads one encoded snapshot.
type decoder struct {
	b   []byte
	off int
	err error
}

// snapshot merges m's snapshots into into, if into is not nil, and
// returns the sequence number of the last.
func (m *merger) snapshot(into *metrics.Snapshot) (seq uint64) {
	for _, d := range m.ds {
		var start, end time.Time
		seq, start, end = d.header()
		if into != nil {
			into.Merge(&metrics.Snapshot{Start: start, End: end}) // a window of no figures: widens into's
			into.Seq = max(into.Seq, seq)
		}
	}
	m.body(into, m.ds)
	for _, sub := range [...]struct {
		what string
		of   func(*metrics.Snapshot) *metrics.Snapshot
	}{{"setup", func(s *metrics.Snapshot) *metrics.Snapshot { return made(&s.Setup) }},
		{"service", func(s *metrics.Snapshot) *metrics.Snapshot { return made(&s.Service) }}} {
		if with := m.flagged(sub.what); len(with) > 0 {
			var s *metrics.Snapshot
			if into != nil {
				s = sub.of(into)
			}
			m.body(s, with)
		}
	}
	m.wakes(into)
	for _, setup := range [...]bool{false, true} {
		for p := range metrics.NumPhases {
			what := phaseFlags[p]
			if setup {
				what = setupPhaseFlags[p]
			}
			if with := m.flagged(what); len(with) > 0 {
				var s *metrics.Snapshot
				if into != nil && setup {
					s = made(&made(&into.Setup).Phases[p])
				} else if into != nil {
					s = made(&into.Phases[p])
				}
				m.body(s, with)
			}
		}
	}
	for _, d := range m.ds {
		if d.err == nil && d.off != len(d.b) {
			d.fail("%d bytes past the end of the snapshot", len(d.b)-d.off)
		}
	}
	return seq
}

// made returns the Snapshot *p (into's Setup, Service or a phase), made
// if need be.
func made(p **metrics.Snapshot) *metrics.Snapshot {
	if *p == nil {
		*p = metrics.NewSnapshot()
	}
	return *p
}

// phaseFlags name the phases' sections in errors: "phase dns", "setup
// phase dns", ... from metrics.PhaseNames.
var phaseFlags, setupPhaseFlags = func() (main, setup [metrics.NumPhases]string) {
	for p, name := range metrics.PhaseNames {
		main[p], setup[p] = "phase "+name, "setup phase "+name
	}
	return main, setup
}()

// flagged reads a flag (0 or 1) from each decoder of m and returns those
// whose flag says the section what follows.
func (m *merger) flagged(what string) []*decoder {
	var with []*decoder
	for _, d := range m.ds {
		switch d.byte() {
		case 0:
		case 1:
			with = append(with, d)
		default:
			d.fail("%s flag not 0 or 1", what)
		}
	}
	return with
}

func (d *decoder) header() (seq uint64, start, end time.Time) {
	if len(d.b) == 0 {
		d.fail("no snapshot: 0 bytes")
		return
	}
	if v := d.b[0]; v != formatVersion {
		d.err = fmt.Errorf("metrics: %w: format version %d, this one reads %d", ErrVersion, v, formatVersion)
		d.off = len(d.b)
		return
	}
	d.off = 1
	return d.uvarint(), d.time(), d.time()
}

// body merges the tables of ds into s, if s is not nil.
func (m *merger) body(s *metrics.Snapshot, ds []*decoder) {
	var ts [5]map[string]*metrics.Stat
	if s != nil {
		ts = tables(s)
	}
	for _, t := range ts {
		m.byName(ds, "names", func(name []byte, at []*decoder) {
			var st *metrics.Stat
			if t != nil {
				if st = t[string(name)]; st == nil {
					st = metrics.NewStat()
					t[string(name)] = st
				}
			}
			for _, d := range at {
				d.stat(st, name, m.sum)
			}
			if st != nil && m.sum != nil {
				m.sum.recordInto(st.Hist())
			}
		})
	}
	var sockets map[string]*metrics.SocketStat
	if s != nil {
		sockets = s.Sockets
	}
	m.byName(ds, "connection names", func(name []byte, at []*decoder) {
		var st *metrics.SocketStat
		if sockets != nil {
			if st = sockets[string(name)]; st == nil {
				st = metrics.NewSocketStat()
				sockets[string(name)] = st
			}
		}
		for _, d := range at {
			d.socket(st, name)
		}
	})
}

// byName reads one table of every decoder of ds, name by name in order:
// for each name, it calls merge with the decoders whose next entry it is,
// in their order in ds, for merge to read those entries.
func (m *merger) byName(ds []*decoder, what string, merge func(name []byte, at []*decoder)) {
	type cursor struct {
		d    *decoder
		left int
		name []byte
	}
	cur := make([]cursor, 0, len(ds))
	for _, d := range ds {
		if n := d.length(metrics.MaxNames+1, what); n > 0 {
			cur = append(cur, cursor{d, n, d.name(nil, 0)})
		}
	}
	at := make([]*decoder, 0, len(ds))
	for len(cur) > 0 {
		name := cur[0].name
		for _, c := range cur[1:] {
			if bytes.Compare(c.name, name) < 0 {
				name = c.name
			}
		}
		at = at[:0]
		for _, c := range cur {
			if bytes.Equal(c.name, name) {
				at = append(at, c.d)
			}
		}
		merge(name, at)
		kept := cur[:0]
		for _, c := range cur {
			if c.d.err != nil {
				continue
			}
			if bytes.Equal(c.name, name) {
				if c.left--; c.left == 0 {
					continue
				}
				c.name = c.d.name(c.name, 1)
			}
			kept = append(kept, c)
		}
		cur = kept
	}
}

// stat reads the entry of a Stat and merges it into st, if st is not nil;
// its buckets into sum, if sum is not nil, for the caller to record.
func (d *decoder) stat(st *metrics.Stat, name []byte, sum *bucketSum) {
	count, errs, timeouts, canceled, dropped := d.count(), d.count(), d.count(), d.count(), d.count()
	bytesIn, bytesOut, bodyIn, http2, noRequest := d.count(), d.count(), d.count(), d.count(), d.count()
	switch {
	case d.err != nil:
		return
	case count == 0 && canceled == 0 && dropped == 0:
		d.fail("%q counted nothing", name)
		return
	case errs > count || timeouts > count-errs || noRequest > count || http2 > count:
		d.fail("%q: %d errors, %d timeouts, %d over HTTP/2 or %d without a request in %d samples", name, errs, timeouts, http2, noRequest, count)
		return
	}
	var merge func(string, metrics.MessageKind)
	if st != nil {
		st.Count, st.Errors = addCount(st.Count, count), addCount(st.Errors, errs)
		st.Timeouts, st.Canceled = addCount(st.Timeouts, timeouts), addCount(st.Canceled, canceled)
		st.Dropped = addCount(st.Dropped, dropped)
		st.BytesIn, st.BytesOut = addCount(st.BytesIn, bytesIn), addCount(st.BytesOut, bytesOut)
		st.BodyIn, st.HTTP2 = addCount(st.BodyIn, bodyIn), addCount(st.HTTP2, http2)
		st.NoRequest = addCount(st.NoRequest, noRequest)
		merge = st.MergeMessage
	}
	d.statuses(st, count)
	d.kinds(merge, count, "error kinds")
	d.hist(st, count, sum)
}

// statuses reads the counts by status of a Stat of count samples.
func (d *decoder) statuses(st *metrics.Stat, count int64) {
	n := d.length(maxStatuses, "statuses")
	var sum int64
	last := -1
	for range n {
		code, c := d.uvarint(), d.count()
		switch {
		case d.err != nil:
			return
		case code > maxStatus || int(code) <= last:
			d.fail("status %d out of range or order", code)
			return
		case c > count-sum:
			d.fail("more statuses than the %d samples", count)
			return
		}
		sum += c
		last = int(code)
		if st != nil {
			st.Status[last] = addCount(st.Status[last], c)
		}
	}
	if d.err == nil && sum != count {
		d.fail("statuses of %d samples, not %d", sum, count)
	}
}

// hist reads the buckets of a histogram of count values and records them
// into st's, if st is not nil, or adds them to sum, if sum is not nil.
func (d *decoder) hist(st *metrics.Stat, count int64, sum *bucketSum) {
	n := d.length(metrics.NumBuckets, "histogram buckets")
	var total int64
	last := -1
	// Buckets are recorded a batch at a time, in a loop of nothing else:
	// each lands in a cache line of its own in 184 KB of counts, and the
	// processor can wait for many of them at once only there.
	var batch [32][2]int64 // value, count
	k := 0
	for range n {
		gap, m := short(d.b, d.off)
		if d.off += m; m == 0 {
			gap = d.uvarint()
		}
		c, m := short(d.b, d.off)
		if d.off += m; m == 0 {
			c = d.uvarint()
		}
		switch {
		case d.err != nil:
			return
		case gap >= uint64(metrics.NumBuckets-last-1):
			d.fail("histogram bucket past the last, %d", metrics.NumBuckets-1)
			return
		case c-1 >= uint64(count-total): // 0 too
			d.fail("histogram bucket of %d values, in %d samples", c, count)
			return
		}
		last += int(gap) + 1
		total += int64(c)
		switch {
		case st == nil:
		case sum != nil:
			sum.add(last, int64(c))
		default:
			batch[k] = [2]int64{metrics.BucketValue(last), int64(c)}
			if k++; k == len(batch) {
				st.RecordBuckets(batch[:k])
				k = 0
			}
		}
	}
	if st != nil {
		st.RecordBuckets(batch[:k])
	}
	if d.err == nil && total != count {
		d.fail("histogram of %d values, not %d", total, count)
	}
}

// socket reads the entry of a SocketStat and merges it into st, if st is
// not nil.
func (d *decoder) socket(st *metrics.SocketStat, name []byte) {
	var f [7]int64 // Opened, Closed, Abnormal, Reconnects, Gaps, Missed, Dropped
	for j := range f {
		f[j] = d.count()
	}
	if f[2] > f[1] {
		d.fail("%q: %d abnormal closes of %d", name, f[2], f[1])
		return
	}
	var in, out map[string]*metrics.Flow
	var merge func(string, metrics.MessageKind)
	if st != nil {
		in, out, merge = st.In, st.Out, st.MergeReason
		for j, p := range [...]*int64{&st.Opened, &st.Closed, &st.Abnormal, &st.Reconnects, &st.Gaps, &st.Missed, &st.Dropped} {
			*p = addCount(*p, f[j])
		}
	}
	types := d.flows(in) + d.flows(out)
	reasons := d.kinds(merge, f[2], "close reasons")
	switch {
	case d.err != nil:
	case reasons != f[2]:
		d.fail("%q: close reasons of %d abnormal closes, not %d", name, reasons, f[2])
	case f[0]|f[1]|f[3]|f[4]|f[6] == 0 && types == 0:
		d.fail("%q counted nothing", name)
	}
}

// flows reads messages and bytes by type into m, if m is not nil, and
// returns how many types it read.
func (d *decoder) flows(m map[string]*metrics.Flow) int {
	n := d.length(metrics.MaxTypes+1, "message types")
	var last []byte
	for i := range n {
		typ := d.name(last, i)
		last = typ
		messages, size := d.count(), d.count()
		if d.err != nil {
			return 0
		}
		if m != nil {
			f := m[string(typ)]
			if f == nil {
				f = metrics.FlowOf(m, string(typ))
			}
			f.Messages, f.Bytes = addCount(f.Messages, messages), addCount(f.Bytes, size)
		}
	}
	return n
}

// kinds reads error kinds (or close reasons) of at most count samples,
// hands each to merge, if merge is not nil, and returns their sum.
func (d *decoder) kinds(merge func(key string, k metrics.MessageKind), count int64, what string) (sum int64) {
	n := d.length(metrics.MaxMessages+1, what)
	var last []byte
	for i := range n {
		key := d.name(last, i)
		last = key
		c := d.count()
		var parts [metrics.MaxParts][2]int64
		np := d.length(metrics.MaxParts, "parts")
		for j := range np {
			parts[j] = [2]int64{d.varint(), d.varint()}
			if parts[j][0] > parts[j][1] {
				d.fail("%s %q: part %d from %d down to %d", what, key, j, parts[j][0], parts[j][1])
			}
		}
		k := metrics.NewMessageKind(c, parts[:np])
		switch {
		case d.err != nil:
			return 0
		case k.Count > count-sum:
			d.fail("%s %q: more than the %d counted", what, key, count)
			return 0
		}
		sum += k.Count
		if merge != nil {
			merge(string(key), k)
		}
	}
	return sum
}

// name reads the i-th string of a sorted list, whose last one was last.
func (d *decoder) name(last []byte, i int) []byte {
	n := d.length(maxString, "bytes in a name")
	if d.err != nil {
		return nil
	}
	s := d.b[d.off : d.off+n]
	d.off += n
	if i > 0 && bytes.Compare(last, s) >= 0 {
		d.fail("%q after %q: names out of order", s, last)
	}
	return s
}

func (d *decoder) time() time.Time {
	switch d.byte() {
	case 0:
		return time.Time{}
	case 1:
		sec, ns := d.varint(), d.uvarint()
		if ns >= 1e9 {
			d.fail("%d nanoseconds in a second", ns)
		}
		return time.Unix(sec, int64(ns))
	}
	d.fail("time flag not 0 or 1")
	return time.Time{}
}

// length reads the length of a list of at most max items, each at least a
// byte long.
func (d *decoder) length(max int, what string) int {
	v := d.uvarint()
	switch {
	case v > uint64(max):
		d.fail("%d %s, at most %d", v, what, max)
		return 0
	case v > uint64(len(d.b)-d.off):
		d.fail("%d %s in the %d bytes left", v, what, len(d.b)-d.off)
		return 0
	}
	return int(v)
}

// count reads a count: at most math.MaxInt64.
func (d *decoder) count() int64 {
	v := d.uvarint()
	if v > math.MaxInt64 {
		d.fail("count %d past the largest int64", v)
		return 0
	}
	return int64(v)
}

// short reads a varint of one or two bytes at b[i:], as most bucket gaps
// and counts are, in m bytes; m is 0 for any other. Inlined.
func short(b []byte, i int) (v uint64, m int) {
	if i+1 < len(b) {
		if b[i] < 0x80 {
			return uint64(b[i]), 1
		}
		if b[i+1] < 0x80 {
			return uint64(b[i]&0x7f) | uint64(b[i+1])<<7, 2
		}
	}
	return 0, 0
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail("truncated or overlong number")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.fail("truncated or overlong number")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) byte() byte {
	if d.off >= len(d.b) {
		d.fail("truncated")
		return 0
	}
	d.off++
	return d.b[d.off-1]
}

// fail records the first error, where it happened, and ends the reading.
func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("metrics: snapshot encoding, byte %d: %s", d.off, fmt.Sprintf(format, args...))
	}
	d.off = len(d.b)
}

// bucketSum adds up the buckets of one histogram from several snapshots,
// to record each into the histogram once, in order of index: the counts
// it touches are then read and written as one stream.
type bucketSum struct {
	counts [metrics.NumBuckets]int64
	used   [metrics.NumBuckets / 64]uint64 // a bit per index of counts
}

func (s *bucketSum) add(i int, c int64) {
	s.counts[i] = addCount(s.counts[i], c)
	s.used[i/64] |= 1 << (i % 64)
}

// recordInto records the sum into h and empties it.
func (s *bucketSum) recordInto(h *hdr.Histogram) {
	for w, used := range s.used {
		for ; used != 0; used &= used - 1 {
			i := w*64 + bits.TrailingZeros64(used)
			_ = h.RecordValues(metrics.BucketValue(i), s.counts[i])
			s.counts[i] = 0
		}
		s.used[w] = 0
	}
}

// addCount adds n >= 0 to c >= 0, stopping at math.MaxInt64.
func addCount(c, n int64) int64 {
	if n > math.MaxInt64-c {
		return math.MaxInt64
	}
	return c + n
}
