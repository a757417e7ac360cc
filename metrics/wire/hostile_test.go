package wire

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	rtmetrics "runtime/metrics"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/metrics"
)

// wireOf builds an encoding by hand: an int or uint64 is an unsigned
// varint, an int64 a signed one, a string its length and bytes, a []byte
// itself.
func wireOf(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch p := p.(type) {
		case int:
			b = binary.AppendUvarint(b, uint64(p))
		case uint64:
			b = binary.AppendUvarint(b, p)
		case int64:
			b = binary.AppendVarint(b, p)
		case string:
			b = binary.AppendUvarint(b, uint64(len(p)))
			b = append(b, p...)
		case []byte:
			b = append(b, p...)
		default:
			panic("wireOf: a part of an unknown type")
		}
	}
	return b
}

// request is a snapshot of one Stat in Requests made of parts; socket one
// of one SocketStat.
func request(parts ...any) []byte {
	return wireOf(append(append([]any{formatVersion, 7, 0, 0, 1}, parts...), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)...)
}

func socket(parts ...any) []byte {
	return wireOf(append(append([]any{formatVersion, 7, 0, 0, 0, 0, 0, 0, 0, 1}, parts...), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)...)
}

// wakes is a snapshot of nothing but wakes made of parts: the one Stat
// (from its count on) and the slots.
func wakes(parts ...any) []byte {
	return wireOf(append(append([]any{formatVersion, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, wakeName}, parts...), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)...)
}

// okWake is Wakes.Late of 2 starts, in bucket 100.
var okWake = []any{2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 1, 100, 2}

// okStat is a Stat of 2 samples of status 200 in bucket 100.
var okStat = []any{"a", 2, 0, 0, 0, 0, 10, 20, 30, 1, 0, 1, 200, 2, 0, 1, 100, 2}

// hostileInputs are encodings MergeEncoded must refuse, each with a
// fragment of the error that says why.
func hostileInputs() []struct {
	name, want string
	b          []byte
} {
	// counts is a Stat named "a" from its counts on: Count Errors Timeouts
	// Canceled Dropped BytesIn BytesOut NoRequest as given, BodyIn and HTTP2 0 put in.
	counts := func(c ...any) []any { return append(append(append([]any{"a"}, c[:7]...), 0, 0), c[7:]...) }
	long := strings.Repeat("x", maxString+1)
	return []struct {
		name, want string
		b          []byte
	}{
		{"no bytes", "0 bytes", nil},
		{"another version", "format version 1", wireOf(1, 7, 0, 0)},
		{"a byte past the end", "past the end", append(request(okStat...), 0)},
		{"an overlong number", "overlong", wireOf(formatVersion, bytesOf(0xff, 11))},
		{"huge table length", "at most 1001", wireOf(formatVersion, 7, 0, 0, uint64(math.MaxUint64))},
		{"one name too many", "1002 names", wireOf(formatVersion, 7, 0, 0, metrics.MaxNames+2)},
		{"more names than bytes", "bytes left", wireOf(formatVersion, 7, 0, 0, 900, "a")},
		{"huge string length", "bytes in a name", wireOf(formatVersion, 7, 0, 0, 1, uint64(1)<<62)},
		{"a string past the end", "bytes left", wireOf(formatVersion, 7, 0, 0, 1, 10, "ab")},
		{"a name too long", "bytes in a name", request(append([]any{long}, okStat[1:]...)...)},
		{"nanoseconds past a second", "nanoseconds", wireOf(formatVersion, 7, 1, int64(5), 1_000_000_000)},
		{"a time flag of 2", "time flag", wireOf(formatVersion, 7, 2)},
		{"a setup flag of 2", "setup flag", wireOf(formatVersion, 7, 0, 0, 0, 0, 0, 0, 0, 0, 2)},
		{"a service flag of 2", "service flag", wireOf(formatVersion, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2)},
		{"a count past int64", "largest int64", request(counts(uint64(1)<<63, 0, 0, 0, 0, 0, 0, 0, 1, 200, 2, 0, 1, 100, 2)...)},
		{"a Stat of nothing", "counted nothing", request(counts(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)...)},
		{"more errors than samples", "errors", request(counts(2, 2, 1, 0, 0, 0, 0, 0, 1, 200, 2, 0, 1, 100, 2)...)},
		{"a status out of range", "status 70000", request(counts(2, 0, 0, 0, 0, 0, 0, 0, 1, 70000, 2, 0, 1, 100, 2)...)},
		{"statuses twice", "status 200 out of", request(counts(2, 0, 0, 0, 0, 0, 0, 0, 2, 200, 1, 200, 1, 0, 1, 100, 2)...)},
		{"statuses short", "statuses of 1 samples", request(counts(2, 0, 0, 0, 0, 0, 0, 0, 1, 200, 1, 0, 1, 100, 2)...)},
		{"error kinds past the count", "more than the 2", request(counts(2, 2, 0, 0, 0, 0, 0, 0, 1, 200, 2, 1, "x", 3, 0, 1, 100, 2)...)},
		{"too many parts", "5 parts", request(counts(2, 2, 0, 0, 0, 0, 0, 0, 1, 200, 2, 1, "x", 1, 5, 1, 100, 2)...)},
		{"a part going down", "down to", request(counts(2, 2, 0, 0, 0, 0, 0, 0, 1, 200, 2, 1, "x", 1, 1, int64(5), int64(4), 1, 100, 2)...)},
		{"a wakes flag of 2", "wakes flag", wireOf(formatVersion, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2)},
		{"wakes of another name", "not \"wake\"", wireOf(append([]any{formatVersion, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, "late"}, append(okWake, 0)...)...)},
		{"a slot gap of 0", "slot gap 0", wakes(append(okWake, 2, int64(5), 1, 1, 0, 1, 1)...)},
		{"too many slots", "slots, at most", wakes(append(okWake, maxSlots+1)...)},
		{"a slot count past int64", "largest int64", wakes(append(okWake, 1, int64(5), uint64(1)<<63, 0)...)},
		{"names out of order", "out of order", wireOf(append(append(append([]any{formatVersion, 7, 0, 0, 2, "b"}, okStat[1:]...), okStat...), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)...)},
		{"a bucket past the last", "past the last", request(counts(2, 0, 0, 0, 0, 0, 0, 0, 1, 200, 2, 0, 1, metrics.NumBuckets, 2)...)},
		{"a later bucket past the last", "past the last", request(counts(2, 0, 0, 0, 0, 0, 0, 0, 1, 200, 2, 0, 2, 100, 1, metrics.NumBuckets-101, 1)...)},
		{"an empty bucket", "bucket of 0", request(counts(2, 0, 0, 0, 0, 0, 0, 0, 1, 200, 2, 0, 2, 100, 0, 0, 2)...)},
		{"a histogram short", "histogram of 1 values, not 2", request(counts(2, 0, 0, 0, 0, 0, 0, 0, 1, 200, 2, 0, 1, 100, 1)...)},
		{"a histogram past the count", "bucket of 3", request(counts(2, 0, 0, 0, 0, 0, 0, 0, 1, 200, 2, 0, 1, 100, 3)...)},
		{"more buckets than there are", "at most 23552", request(counts(2, 0, 0, 0, 0, 0, 0, 0, 1, 200, 2, 0, metrics.NumBuckets+1)...)},
		{"more abnormal closes than closes", "abnormal closes of", socket("w", 0, 1, 2, 0, 0, 0, 0, 0, 0, 0)},
		{"close reasons short", "close reasons of 0", socket("w", 0, 2, 1, 0, 0, 0, 0, 0, 0, 0)},
		{"a SocketStat of nothing", "counted nothing", socket("w", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)},
		{"types out of order", "out of order", socket("w", 1, 0, 0, 0, 0, 0, 0, 2, "b", 1, 1, "a", 1, 1, 0, 0)},
		{"one type too many", "52 message types", socket("w", 1, 0, 0, 0, 0, 0, 0, metrics.MaxTypes+2)},
		{"a broken setup", "counted nothing", wireOf(formatVersion, 7, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, "a", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)},
		{"a broken service", "counted nothing", wireOf(formatVersion, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, "a", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)},
	}
}

func bytesOf(c byte, n int) []byte { return []byte(strings.Repeat(string([]byte{c}), n)) }

// untouched reports whether s is as NewSnapshot made it.
func untouched(s *metrics.Snapshot) bool {
	return s.Seq == 0 && s.Start.IsZero() && s.End.IsZero() && s.Setup == nil && s.Service == nil && len(s.Requests) == 0 &&
		len(s.Actions) == 0 && len(s.Polls) == 0 && len(s.Deliveries) == 0 && len(s.Arrivals) == 0 && len(s.Sockets) == 0 && s.Wakes == nil
}

func TestMergeEncodedReadsHandMade(t *testing.T) {
	into := metrics.NewSnapshot()
	if _, err := MergeEncoded(request(okStat...), into); err != nil {
		t.Fatal(err)
	}
	st := into.Requests["a"]
	if st == nil || st.Count != 2 || st.BytesIn != 10 || st.BytesOut != 20 || st.BodyIn != 30 || st.HTTP2 != 1 || st.Status[200] != 2 ||
		st.Hist().TotalCount() != 2 || st.Hist().Max() != 100 {
		t.Fatalf("hand-made stat read as %+v", st)
	}
	if _, err := MergeEncoded(socket("w", 1, 1, 1, 0, 0, 0, 0, 1, "t", 3, 9, 0, 1, "why", 1, 0), into); err != nil {
		t.Fatal(err)
	}
	if w := into.Sockets["w"]; w == nil || w.Abnormal != 1 || w.In["t"].Bytes != 9 || w.Reasons["why"].Count != 1 {
		t.Fatalf("hand-made socket read as %+v", w)
	}
	if _, err := MergeEncoded(wakes(append(okWake, 2, int64(-3), 2, 0, 4, 0, 2)...), into); err != nil {
		t.Fatal(err)
	}
	if w := into.Wakes; w == nil || w.Late.Count != 2 || w.Late.Hist().Max() != 100 || w.Slots[-3] != [2]int64{2, 0} || w.Slots[1] != [2]int64{0, 2} {
		t.Fatalf("hand-made wakes read as %+v", w)
	}
}

func TestMergeEncodedRefusesHostile(t *testing.T) {
	for _, c := range hostileInputs() {
		into := metrics.NewSnapshot()
		_, err := MergeEncoded(c.b, into)
		switch {
		case err == nil:
			t.Errorf("%s: read", c.name)
		case !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: %v; want it to say %q", c.name, err, c.want)
		case !untouched(into):
			t.Errorf("%s: refused, but merged some of it", c.name)
		}
		if c.name == "another version" && !errors.Is(err, ErrVersion) {
			t.Errorf("%v is not ErrVersion", err)
		}
	}
}

func TestMergeEncodedRefusesTruncated(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	s := randomSnapshot(r, mixes[0], 150)
	b := AppendSnapshot(nil, s)
	if s.Setup == nil || len(s.Sockets) == 0 || len(b) < 500 {
		t.Fatalf("%d bytes, want a snapshot with a setup and sockets", len(b))
	}
	into := metrics.NewSnapshot()
	for i := range b {
		if _, err := MergeEncoded(b[:i], into); err == nil {
			t.Fatalf("the first %d of %d bytes read", i, len(b))
		}
		if !untouched(into) {
			t.Fatalf("the first %d of %d bytes were refused, but merged", i, len(b))
		}
	}
}

// TestHugeLengthsAllocateNothing: a length field is checked against what
// is left of the input before anything is read, let alone allocated.
func TestHugeLengthsAllocateNothing(t *testing.T) {
	into := metrics.NewSnapshot()
	for _, b := range [][]byte{
		wireOf(formatVersion, 7, 0, 0, uint64(math.MaxUint64)),
		wireOf(formatVersion, 7, 0, 0, 1, uint64(1)<<62),
		request(counts1(uint64(1) << 62)...),
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := MergeEncoded(b, into); err == nil {
				t.Fatal("read")
			}
		})
		runtime.ReadMemStats(&after)
		if per := (after.TotalAlloc - before.TotalAlloc) / 101; allocs > 30 || per > 1024 {
			t.Errorf("refusing %x took %v allocations, %d bytes", b, allocs, per)
		}
	}
}

// counts1 is a Stat whose histogram claims n buckets.
func counts1(n uint64) []any {
	return []any{"a", 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 200, 2, 0, n}
}

// allocated is the bytes allocated by the process so far.
func allocated() uint64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}

// FuzzMergeEncoded: any bytes merge into a fresh snapshot or are refused
// with the snapshot untouched; never a panic. What merged encodes again
// and reads back the same, and merges with others all at once as one by
// one. Memory is bounded by the names merged (a histogram each, ~190 KB)
// and the input's size.
func FuzzMergeEncoded(f *testing.F) {
	// Few names: each costs a histogram of 184 KB, which slows fuzzing.
	other := request(okStat...)
	for seed, m := range []mix{mixes[0], mixes[3]} {
		r := rand.New(rand.NewPCG(uint64(seed), 5))
		b := AppendSnapshot(nil, randomSnapshot(r, m, 3))
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add(AppendSnapshot(nil, metrics.NewSnapshot()))
	f.Add(request(okStat...))
	f.Add(socket("w", 1, 1, 1, 0, 0, 0, 0, 1, "t", 3, 9, 0, 1, "why", 1, 0))
	for _, c := range hostileInputs() {
		f.Add(c.b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		into := metrics.NewSnapshot()
		before := allocated()
		seq, err := MergeEncoded(b, into)
		stats := 0
		for _, s := range []*metrics.Snapshot{into, into.Setup, into.Service} {
			if s != nil {
				stats += len(s.Requests) + len(s.Actions) + len(s.Polls) + len(s.Deliveries) + len(s.Arrivals)
			}
		}
		if grew, bound := allocated()-before, uint64(1<<20+200<<10*stats+64*len(b)); grew > bound {
			t.Fatalf("merging %d bytes into %d Stats allocated %d KB (bound %d KB)", len(b), stats, grew>>10, bound>>10)
		}
		if err != nil {
			if !untouched(into) {
				t.Fatalf("refused (%v), but merged", err)
			}
			return
		}
		// The round trips below cost ~1 ms a Stat (histograms of 184 KB,
		// copied to encode): an input the fuzzer made with hundreds of names
		// would take the 10 s the test command gives the whole target,
		// seeds and cached corpus included. The merge above checked it.
		if stats > 16 {
			return
		}
		again := metrics.NewSnapshot()
		if seq2, err := MergeEncoded(AppendSnapshot(nil, into), again); err != nil || seq2 != seq {
			t.Fatalf("what merged does not read back: seq %d vs %d, %v", seq2, seq, err)
		}
		if d := snapshotDiff(into, again); len(d) > 0 {
			t.Fatalf("what merged reads back otherwise: %s", strings.Join(d, "; "))
		}
		each, all := metrics.NewSnapshot(), metrics.NewSnapshot()
		for _, e := range [][]byte{b, other} {
			if _, err := MergeEncoded(e, each); err != nil {
				t.Fatal(err)
			}
		}
		if _, errs := MergeEncodedAll([][]byte{b, b[:len(b)-1], other}, all); errs[0] != nil || errs[1] == nil || errs[2] != nil {
			t.Fatalf("merged all at once: %v", errs)
		}
		if d := snapshotDiff(each, all); len(d) > 0 && !overflowed(each) {
			t.Fatalf("merged all at once otherwise than one by one: %s", strings.Join(d, "; "))
		}
	})
}

// overflowed reports whether a histogram of s dropped values past
// math.MaxInt64: one by one drops some of the buckets that all at once adds
// up first.
func overflowed(s *metrics.Snapshot) bool {
	for _, s := range []*metrics.Snapshot{s, s.Setup, s.Service} {
		if s == nil {
			continue
		}
		for _, t := range tables(s) {
			for _, st := range t {
				if st.Hist().TotalCount() != st.Count {
					return true
				}
			}
		}
	}
	return false
}
