package serverprof

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/google/pprof/profile"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/headroom-dev/headroom/internal/runecut"
)

// What headroom holds of one profile, whoever made it: a profile endpoint
// (--profile) or a result directory from someone else's run (compare).
const (
	// MaxHeld bounds the memory a parsed profile may take, estimated from
	// its encoding before it is parsed: a sample of one frame is 6 bytes
	// on the wire and ~170 in memory, so a 1 MB body can ask for 30 MB.
	// (The estimate is high: a profile of 160,000 stacks estimated at 77
	// MiB holds 57.) A Go server's CPU profile of 10 s holds a few MiB,
	// its heap profile a few more; a capture only weighs a profile as it
	// arrives (inspect), a phase parses it.
	MaxHeld = 48 << 20
	// MaxMerged bounds a phase's merge (Capture.Phase): the merge so far
	// and the slice merged into it. A merge holds both and makes a third
	// no larger than the two, so a phase takes no more than one profile
	// parsed alone; a Go server's slices merge into a few MiB, its stacks
	// the same from one slice to the next.
	MaxMerged = MaxHeld / 2
	// MaxDepth is the frames of a stack kept, from its leaf (Go's
	// profiler records 128 at most); deeper ones are cut.
	MaxDepth = 512
	// MaxName is the bytes of a function's name kept.
	MaxName = 1024
)

// Decoded is a profile as decode returns it, how many of its stacks
// were cut to MaxDepth, and what it takes to hold (estimated).
type decoded struct {
	*profile.Profile
	cut  int
	held int64
}

// errOver is a profile that would take more than it may to hold.
type errOver struct{ held, limit int64 }

func (e errOver) Error() string {
	return fmt.Sprintf("a profile that would take %d MiB to hold (%d MiB at most): not read", e.held>>20, e.limit>>20)
}

// decode parses b, a pprof profile gzipped or not, holding no more than
// its limits: MaxBody gunzipped, MaxHeld parsed, stacks cut to MaxDepth
// frames and names to MaxName bytes.
func decode(b []byte) (decoded, error) { return decodeWithin(b, MaxHeld) }

// decodeWithin is decode with room for limit bytes parsed (errOver past it).
func decodeWithin(b []byte, limit int64) (decoded, error) {
	if gzipMagic(b) {
		var err error
		if b, err = gunzip(b); err != nil {
			return decoded{}, err
		}
		if gzipMagic(b) {
			return decoded{}, errors.New("not a pprof profile: gzipped twice")
		}
	}
	n, err := held(b)
	if err == nil && n > limit {
		return decoded{}, errOver{n, limit}
	}
	p, err := profile.ParseData(b)
	if err != nil {
		return decoded{}, err
	}
	d := decoded{Profile: p, held: n}
	for _, s := range p.Sample {
		if len(s.Location) > MaxDepth {
			s.Location = s.Location[:MaxDepth] // the leaf is first
			d.cut++
		}
	}
	for _, f := range p.Function {
		f.Name, f.SystemName = cutName(f.Name), cutName(f.SystemName)
	}
	return d, nil
}

// inspect is what a capture checks of a profile as it arrives, without
// parsing it (a parse takes the memory the profile asks for, and a
// capture of several targets would take it for each at once): that it is
// a protocol buffer headroom may hold (MaxBody gunzipped, MaxHeld), and
// its sample types, "type/unit" each. A phase parses it later, within
// MaxMerged.
func inspect(b []byte) ([]string, error) {
	if gzipMagic(b) {
		var err error
		if b, err = gunzip(b); err != nil {
			return nil, err
		}
		if gzipMagic(b) {
			return nil, errors.New("not a pprof profile: gzipped twice")
		}
	}
	n, err := held(b)
	if err != nil {
		return nil, fmt.Errorf("not a pprof profile: %v", err)
	}
	if n > MaxHeld {
		return nil, errOver{n, MaxHeld}
	}
	var types [][2]uint64 // sample types' type and unit, as string indexes
	var strs [][]byte
	_ = fields(b, func(num protowire.Number, v []byte) {
		switch num {
		case 1: // sample_type
			var t [2]uint64
			_ = fields(v, func(num protowire.Number, v []byte) {
				if num == 1 || num == 2 {
					t[num-1], _ = protowire.ConsumeVarint(v)
				}
			})
			types = append(types, t)
		case 6: // string_table
			strs = append(strs, v)
		}
	})
	str := func(i uint64) string {
		if i < uint64(len(strs)) {
			return string(strs[i])
		}
		return "?"
	}
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = str(t[0]) + "/" + str(t[1])
	}
	return out, nil
}

// readFile reads a profile headroom wrote, from a result directory that
// may be someone else's: through root (no path out of it), a regular
// file, at most MaxBody.
func readFile(root *os.Root, rel string) (decoded, error) { return readWithin(root, rel, MaxHeld) }

// readWithin is readFile with room for limit bytes parsed.
func readWithin(root *os.Root, rel string, limit int64) (decoded, error) {
	fi, err := root.Lstat(rel)
	if err != nil {
		return decoded{}, err
	}
	if !fi.Mode().IsRegular() {
		return decoded{}, fmt.Errorf("%s: not a regular file (%s)", rel, fi.Mode().Type())
	}
	if fi.Size() > MaxBody {
		return decoded{}, fmt.Errorf("%s: %d MiB, larger than a profile headroom writes (32 MiB): not read", rel, fi.Size()>>20)
	}
	f, err := root.Open(rel)
	if err != nil {
		return decoded{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxBody))
	if err != nil {
		return decoded{}, err
	}
	d, err := decodeWithin(b, limit)
	if err != nil {
		return decoded{}, fmt.Errorf("%s: %w", rel, err)
	}
	return d, nil
}

// gunzip is b inflated, within MaxBody: inflated once to count it (a
// bomb is refused having held none of it), then into a buffer of its
// size (where a growing one would take twice that, its copies besides).
func gunzip(b []byte) ([]byte, error) {
	n, err := inflate(b, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("not a pprof profile: %v", err)
	}
	if n > MaxBody {
		return nil, errors.New("larger than 32 MiB gunzipped: not read")
	}
	out := bytes.NewBuffer(make([]byte, 0, n))
	if _, err := inflate(b, out); err != nil {
		return nil, fmt.Errorf("not a pprof profile: %v", err)
	}
	return out.Bytes(), nil
}

// inflate writes b, gzipped, to w, MaxBody+1 bytes at most; it returns
// how many.
func inflate(b []byte, w io.Writer) (int64, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	return io.Copy(w, io.LimitReader(zr, MaxBody+1))
}

func gzipMagic(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }

// cutName is s cut to MaxName bytes, on a rune's boundary.
func cutName(s string) string { return runecut.Mark(s, MaxName) }

// What github.com/google/pprof/profile spends to hold each part of a
// profile, in bytes: held weighs an encoded profile by them, footprint a
// parsed one.
const (
	costSample   = 150 // a Sample
	costFrame    = 16  // a location of a sample: an index and a pointer
	costValue    = 8   // a value of a sample
	costLabel    = 100 // a label of a sample
	costMapping  = 200
	costLocation = 120
	costLine     = 60
	costFunction = 120
	costString   = 16 // and its bytes
)

// held estimates the memory, in bytes, that profile.Parse takes to hold
// the encoded profile b (the fields of profile.proto that grow with the
// input); an error when b is no protocol buffer, which Parse then says
// better.
func held(b []byte) (int64, error) {
	var n int64
	err := fields(b, func(num protowire.Number, v []byte) {
		switch num {
		case 2: // sample
			n += costSample
			_ = fields(v, func(num protowire.Number, v []byte) {
				switch num {
				case 1: // location_id
					n += costFrame * varints(v)
				case 2: // value
					n += costValue * varints(v)
				case 3: // label
					n += costLabel
				}
			})
		case 3: // mapping
			n += costMapping
		case 4: // location, and its lines
			n += costLocation
			_ = fields(v, func(num protowire.Number, _ []byte) {
				if num == 4 {
					n += costLine
				}
			})
		case 5: // function
			n += costFunction
		case 6: // string_table
			n += costString + int64(len(v))
		default:
			n += 16
		}
	})
	return n, err
}

// footprint is held's estimate for p, parsed: what a merge holds of it.
func footprint(p *profile.Profile) int64 {
	n := int64(len(p.Mapping)) * costMapping
	for _, s := range p.Sample {
		n += costSample + costFrame*int64(len(s.Location)) + costValue*int64(len(s.Value)) + costLabel*int64(len(s.Label)+len(s.NumLabel))
	}
	for _, l := range p.Location {
		n += costLocation + costLine*int64(len(l.Line))
	}
	for _, f := range p.Function {
		n += costFunction + 3*costString + int64(len(f.Name)+len(f.SystemName)+len(f.Filename))
	}
	return n
}

// fields calls f with each field of the encoded message b: its number, and
// its bytes when it is length-delimited (a packed repeated field, a
// message, a string), else one varint's.
func fields(b []byte, f func(protowire.Number, []byte)) error {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		var v []byte
		if typ == protowire.BytesType {
			v, l = protowire.ConsumeBytes(b)
		} else {
			l = protowire.ConsumeFieldValue(num, typ, b)
			v = b[:max(l, 0)]
		}
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		f(num, v)
	}
	return nil
}

// varints is how many varints b holds: one for each byte that ends one.
func varints(b []byte) int64 {
	var n int64
	for _, c := range b {
		if c < 0x80 {
			n++
		}
	}
	return n
}
