package serverprof

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"github.com/google/pprof/profile"
	"google.golang.org/protobuf/encoding/protowire"
)

// What headroom holds of one profile, whoever made it: a profile endpoint
// (--profile) or a result directory from someone else's run (compare).
const (
	// MaxHeld bounds the memory a parsed profile may take, estimated from
	// its encoding before it is parsed: a sample of one frame is 6 bytes
	// on the wire and ~170 in memory, so a 1 MB body can ask for 30 MB.
	// A Go server's CPU profile of 10 s holds a few MiB; its heap profile
	// a few tens.
	MaxHeld = 96 << 20
	// MaxDepth is the frames of a stack kept, from its leaf (Go's
	// profiler records 128 at most); deeper ones are cut.
	MaxDepth = 512
	// MaxName is the bytes of a function's name kept.
	MaxName = 1024
)

// Decoded is a profile as decode returns it, and how many of its stacks
// were cut to MaxDepth.
type decoded struct {
	*profile.Profile
	cut int
}

// decode parses b, a pprof profile gzipped or not, holding no more than
// its limits: MaxBody gunzipped, MaxHeld parsed, stacks cut to MaxDepth
// frames and names to MaxName bytes.
func decode(b []byte) (decoded, error) {
	if gzipMagic(b) {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return decoded{}, fmt.Errorf("not a pprof profile: %v", err)
		}
		if b, err = io.ReadAll(io.LimitReader(zr, MaxBody+1)); err != nil {
			return decoded{}, fmt.Errorf("not a pprof profile: %v", err)
		}
		if len(b) > MaxBody {
			return decoded{}, errors.New("larger than 32 MiB gunzipped: not read")
		}
		if gzipMagic(b) {
			return decoded{}, errors.New("not a pprof profile: gzipped twice")
		}
	}
	if n, err := held(b); err == nil && n > MaxHeld {
		return decoded{}, fmt.Errorf("a profile that would take %d MiB to hold (%d MiB at most): not read", n>>20, MaxHeld>>20)
	}
	p, err := profile.ParseData(b)
	if err != nil {
		return decoded{}, err
	}
	d := decoded{Profile: p}
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

// readFile reads a profile headroom wrote, from a result directory that
// may be someone else's: through root (no path out of it), a regular
// file, at most MaxBody.
func readFile(root *os.Root, rel string) (decoded, error) {
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
	d, err := decode(b)
	if err != nil {
		return decoded{}, fmt.Errorf("%s: %v", rel, err)
	}
	return d, nil
}

func gzipMagic(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }

// cutName is s cut to MaxName bytes, on a rune's boundary.
func cutName(s string) string {
	if len(s) <= MaxName {
		return s
	}
	i := MaxName
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// held estimates the memory, in bytes, that profile.Parse takes to hold
// the encoded profile b (the fields of profile.proto that grow with the
// input, each at what github.com/google/pprof/profile spends on it); an
// error when b is no protocol buffer, which Parse then says better.
func held(b []byte) (int64, error) {
	var n int64
	err := fields(b, func(num protowire.Number, v []byte) {
		switch num {
		case 2: // sample
			n += 150
			_ = fields(v, func(num protowire.Number, v []byte) {
				switch num {
				case 1: // location_id: an index and a pointer each
					n += 16 * varints(v)
				case 2: // value
					n += 8 * varints(v)
				case 3: // label
					n += 100
				}
			})
		case 3: // mapping
			n += 200
		case 4: // location, and its lines
			n += 120
			_ = fields(v, func(num protowire.Number, _ []byte) {
				if num == 4 {
					n += 60
				}
			})
		case 5: // function
			n += 120
		case 6: // string_table
			n += 16 + int64(len(v))
		default:
			n += 16
		}
	})
	return n, err
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
