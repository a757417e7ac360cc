package metrics

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// MergeEncoded merges the snapshot AppendSnapshot encoded in b into into, a
// Snapshot made by NewSnapshot, and returns its sequence number. It merges
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
func MergeEncoded(b []byte, into *Snapshot) (seq uint64, err error) {
	check := decoder{b: b}
	check.snapshot(nil)
	if check.err != nil {
		return 0, check.err
	}
	merge := decoder{b: b}
	return merge.snapshot(into), nil
}

// decoder reads one encoded snapshot. With a nil target it only checks;
// then it reads the same bytes again to merge them.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) snapshot(into *Snapshot) uint64 {
	if len(d.b) == 0 {
		d.fail("no snapshot: 0 bytes")
		return 0
	}
	if v := d.b[0]; v != wireVersion {
		d.err = fmt.Errorf("metrics: %w: format version %d, this one reads %d", ErrWireVersion, v, wireVersion)
		return 0
	}
	d.off = 1
	seq := d.uvarint()
	start, end := d.time(), d.time()
	d.body(into)
	switch d.byte() {
	case 0:
	case 1:
		var setup *Snapshot
		if into != nil {
			setup = into.setup()
		}
		d.body(setup)
	default:
		d.fail("setup flag not 0 or 1")
	}
	if d.err == nil && d.off != len(d.b) {
		d.fail("%d bytes past the end of the snapshot", len(d.b)-d.off)
	}
	if into != nil {
		into.widen(&Snapshot{Start: start, End: end})
		into.Seq = max(into.Seq, seq)
	}
	return seq
}

func (d *decoder) body(into *Snapshot) {
	for _, k := range statKinds {
		var t map[string]*Stat
		if into != nil {
			t = into.table(k)
		}
		d.stats(t)
	}
	var m map[string]*SocketStat
	if into != nil {
		m = into.Sockets
	}
	d.sockets(m)
}

// stats reads a table of Stats and merges each into t, if t is not nil.
func (d *decoder) stats(t map[string]*Stat) {
	n := d.length(MaxNames+1, "names")
	var last []byte
	for i := range n {
		name := d.name(last, i)
		last = name
		count, errs, timeouts, canceled := d.count(), d.count(), d.count(), d.count()
		bytesIn, bytesOut, noRequest := d.count(), d.count(), d.count()
		switch {
		case d.err != nil:
			return
		case count == 0 && canceled == 0:
			d.fail("%q counted nothing", name)
		case errs > count || timeouts > count-errs || noRequest > count:
			d.fail("%q: %d errors, %d timeouts or %d without a request in %d samples", name, errs, timeouts, noRequest, count)
		}
		var st *Stat
		if t != nil {
			if st = t[string(name)]; st == nil {
				st = NewStat()
				t[string(name)] = st
			}
			st.Count, st.Errors = addCount(st.Count, count), addCount(st.Errors, errs)
			st.Timeouts, st.Canceled = addCount(st.Timeouts, timeouts), addCount(st.Canceled, canceled)
			st.BytesIn, st.BytesOut = addCount(st.BytesIn, bytesIn), addCount(st.BytesOut, bytesOut)
			st.NoRequest = addCount(st.NoRequest, noRequest)
		}
		d.statuses(st, count)
		var merge func(string, MessageKind)
		if st != nil {
			merge = st.mergeMessage
		}
		d.kinds(merge, count, "error kinds")
		d.hist(st, count)
		if d.err != nil {
			return
		}
	}
}

// statuses reads the counts by status of a Stat of count samples.
func (d *decoder) statuses(st *Stat, count int64) {
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
// into st's, if st is not nil.
func (d *decoder) hist(st *Stat, count int64) {
	n := d.length(countsLen, "histogram buckets")
	var sum int64
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
		case gap >= uint64(countsLen-last-1):
			d.fail("histogram bucket past the last, %d", countsLen-1)
			return
		case c-1 >= uint64(count-sum): // 0 too
			d.fail("histogram bucket of %d values, in %d samples", c, count)
			return
		}
		last += int(gap) + 1
		sum += int64(c)
		if st != nil {
			batch[k] = [2]int64{bucketValue(last), int64(c)}
			if k++; k == len(batch) {
				record(st.Hist, batch[:k])
				k = 0
			}
		}
	}
	if st != nil {
		record(st.Hist, batch[:k])
	}
	if d.err == nil && sum != count {
		d.fail("histogram of %d values, not %d", sum, count)
	}
}

// record adds counts of values into h. An error only if h's total would
// pass math.MaxInt64: dropped, as Histogram.Merge drops it.
func record(h *hdr.Histogram, buckets [][2]int64) {
	for _, b := range buckets {
		_ = h.RecordValues(b[0], b[1])
	}
}

// sockets reads a table of SocketStats and merges each into m, if m is not nil.
func (d *decoder) sockets(m map[string]*SocketStat) {
	n := d.length(MaxNames+1, "connection names")
	var last []byte
	for i := range n {
		name := d.name(last, i)
		last = name
		var st *SocketStat
		if m != nil {
			if st = m[string(name)]; st == nil {
				st = NewSocketStat()
				m[string(name)] = st
			}
		}
		var f [7]int64 // Opened, Closed, Abnormal, Reconnects, Gaps, Missed, Dropped
		for j := range f {
			f[j] = d.count()
		}
		if f[2] > f[1] {
			d.fail("%q: %d abnormal closes of %d", name, f[2], f[1])
		}
		var in, out map[string]*Flow
		var merge func(string, MessageKind)
		if st != nil {
			in, out, merge = st.In, st.Out, st.mergeReason
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
		if d.err != nil {
			return
		}
	}
}

// flows reads messages and bytes by type into m, if m is not nil, and
// returns how many types it read.
func (d *decoder) flows(m map[string]*Flow) int {
	n := d.length(maxTypes+1, "message types")
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
				f = flowOf(m, string(typ))
			}
			f.Messages, f.Bytes = addCount(f.Messages, messages), addCount(f.Bytes, size)
		}
	}
	return n
}

// kinds reads error kinds (or close reasons) of at most count samples,
// hands each to merge, if merge is not nil, and returns their sum.
func (d *decoder) kinds(merge func(key string, k MessageKind), count int64, what string) (sum int64) {
	n := d.length(maxMessages+1, what)
	var last []byte
	for i := range n {
		key := d.name(last, i)
		last = key
		k := MessageKind{Count: d.count()}
		parts := d.length(maxParts, "parts")
		for j := range parts {
			k.parts[j] = [2]int64{d.varint(), d.varint()}
			if k.parts[j][0] > k.parts[j][1] {
				d.fail("%s %q: part %d from %d down to %d", what, key, j, k.parts[j][0], k.parts[j][1])
			}
		}
		k.n = uint8(parts)
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
	n := d.length(maxWireString, "bytes in a name")
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

// addCount adds n >= 0 to c >= 0, stopping at math.MaxInt64.
func addCount(c, n int64) int64 {
	if n > math.MaxInt64-c {
		return math.MaxInt64
	}
	return c + n
}
