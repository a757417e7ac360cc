package result

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sync"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/headroom-dev/headroom/metrics"
)

const hdrV2 = hdr.V2CompressedEncodingCookieBase

// The V2 encoding's cookies (the low nibble's 0x10 is a word size and is
// ignored, as hdrhistogram-go does) and its uncompressed header: cookie,
// payload length, normalizing index offset, significant digits (int32 each),
// lowest and highest trackable values (int64 each), conversion ratio.
const (
	compressedCookie = hdr.V2CompressedEncodingCookieBase
	payloadCookie    = hdr.V2EncodingCookieBase
	headerSize       = hdr.ENCODING_HEADER_SIZE
)

// bucket is one non-empty bucket of a decoded histogram: its index in
// headroom's counts array and its count.
type bucket struct {
	idx   int32
	count int64
}

// geometry is what decoding needs of headroom's histogram layout: the
// lowest value of each bucket, by its index in the counts array, taken
// from hdrhistogram-go itself.
type geometry struct {
	values []int64 // index -> lowest value of the bucket, microseconds; len is the counts array's
}

// headroomGeometry is computed once, on first use, and never changes.
var headroomGeometry = sync.OnceValue(func() geometry {
	h := metrics.NewHistogram()
	snap := h.Export()
	for i := range snap.Counts {
		snap.Counts[i] = 1
	}
	bars := hdr.Import(snap).Distribution()
	g := geometry{values: make([]int64, len(bars))}
	for i, b := range bars {
		g.values[i] = b.From
	}
	return g
})

// histDecoder decodes the base64 V2-compressed histograms of a result
// file without building a histogram per name: it returns the non-empty
// buckets, which addTo records into a histogram.
//
// It reads headroom's geometry only (metrics.LowestMicros to
// metrics.HighestMicros at metrics.SigFigs, as every headroom result
// holds): hdrhistogram-go sizes a histogram from the header, and a header
// of a few bytes can claim a range that takes ~50 MB (1 to 2^63 at five
// digits), gigabytes over a file of them. The payload is then bounded by
// the geometry (at most 9 bytes per bucket, ~210 KB), and the buffers are
// reused: decoding allocates, besides the buckets it returns, the largest
// payload and the largest decoded input once per decoder. Not safe for
// concurrent use.
type histDecoder struct {
	z       io.ReadCloser
	raw     []byte
	header  [headerSize]byte
	payload []byte
}

// decode decodes enc into its non-empty buckets, appended to into, and
// returns them with their total count.
func (d *histDecoder) decode(enc string, into []bucket) ([]bucket, int64, error) {
	var err error
	d.raw, err = base64.StdEncoding.AppendDecode(d.raw[:0], []byte(enc))
	if err != nil {
		return into, 0, fmt.Errorf("not base64: %v", err)
	}
	if len(d.raw) < 8 {
		return into, 0, fmt.Errorf("%d bytes, too short for a histogram", len(d.raw))
	}
	if c := int32(binary.BigEndian.Uint32(d.raw)) &^ 0xf0; c != compressedCookie {
		return into, 0, fmt.Errorf("not an HdrHistogram V2 compressed encoding (cookie %#x)", uint32(c))
	}
	clen := int64(binary.BigEndian.Uint32(d.raw[4:]))
	if clen > int64(len(d.raw)-8) {
		return into, 0, fmt.Errorf("truncated: %d compressed bytes announced, %d present", clen, len(d.raw)-8)
	}
	if err := d.reset(bytes.NewReader(d.raw[8 : 8+clen])); err != nil {
		return into, 0, fmt.Errorf("corrupt compressed data: %v", err)
	}
	if _, err := io.ReadFull(d.z, d.header[:]); err != nil {
		return into, 0, fmt.Errorf("truncated header: %v", err)
	}
	h := d.header[:]
	if c := int32(binary.BigEndian.Uint32(h)) &^ 0xf0; c != payloadCookie {
		return into, 0, fmt.Errorf("not an HdrHistogram V2 payload (cookie %#x)", uint32(c))
	}
	plen := int64(int32(binary.BigEndian.Uint32(h[4:])))
	sig := int32(binary.BigEndian.Uint32(h[12:]))
	low, high := int64(binary.BigEndian.Uint64(h[16:])), int64(binary.BigEndian.Uint64(h[24:]))
	if sig != metrics.SigFigs || low != metrics.LowestMicros || high != metrics.HighestMicros {
		return into, 0, fmt.Errorf("histogram of %d to %d at %d significant digits; headroom reads its own, %d to %d µs at %d",
			low, high, sig, metrics.LowestMicros, metrics.HighestMicros, metrics.SigFigs)
	}
	values := headroomGeometry().values
	if max := int64(len(values)) * 9; plen < 0 || plen > max {
		return into, 0, fmt.Errorf("payload of %d bytes announced, at most %d possible", plen, max)
	}
	// One byte more than announced, to tell trailing data from a payload of
	// the right length; only a clean end (io.EOF) has checked zlib's
	// checksum, and a compressed stream cut short is an error of its own.
	if int64(cap(d.payload)) < plen+1 {
		d.payload = make([]byte, plen+1)
	}
	buf := d.payload[:plen+1]
	n, ended := 0, false
	for n < len(buf) && !ended {
		m, err := d.z.Read(buf[n:])
		n += m
		switch {
		case err == io.EOF:
			ended = true
		case err != nil:
			return into, 0, fmt.Errorf("corrupt compressed data: %v", err)
		}
	}
	switch {
	case int64(n) > plen: // the loop ends before the stream's end only here
		return into, 0, fmt.Errorf("payload longer than the %d bytes announced", plen)
	case int64(n) < plen:
		return into, 0, fmt.Errorf("payload of %d bytes, %d announced", n, plen)
	}
	return decodePayload(buf[:n], len(values), into)
}

func (d *histDecoder) reset(r io.Reader) error {
	if d.z == nil {
		z, err := zlib.NewReader(r)
		d.z = z
		return err
	}
	return d.z.(zlib.Resetter).Reset(r, nil)
}

// decodePayload reads the V2 payload: a positive number is a bucket's
// count, a negative one a run of empty buckets.
func decodePayload(p []byte, countsLen int, into []bucket) ([]bucket, int64, error) {
	var idx, total int64
	for len(p) > 0 {
		v, n := zigzag(p)
		if n == 0 {
			return into, 0, fmt.Errorf("payload ends inside a number")
		}
		p = p[n:]
		if v < 0 {
			if v == math.MinInt64 || -v > int64(countsLen)-idx {
				return into, 0, fmt.Errorf("run of empty buckets past the end of the histogram")
			}
			idx -= v
			continue
		}
		if idx >= int64(countsLen) {
			return into, 0, fmt.Errorf("more buckets than the histogram has")
		}
		if v > 0 {
			if v > math.MaxInt64-total {
				return into, 0, fmt.Errorf("counts add up past the largest integer")
			}
			total += v
			into = append(into, bucket{idx: int32(idx), count: v})
		}
		idx++
	}
	return into, total, nil
}

// zigzag reads one ZigZag LEB128 number of the V2 encoding: 7 bits a
// byte, at most 9 bytes, the ninth with all 8. n is 0 when p ends first.
func zigzag(p []byte) (v int64, n int) {
	var u uint64
	for i := range 9 {
		if i >= len(p) {
			return 0, 0
		}
		b := p[i]
		if i == 8 {
			u |= uint64(b) << 56
			n = 9
			break
		}
		u |= uint64(b&0x7f) << (7 * i)
		if b&0x80 == 0 {
			n = i + 1
			break
		}
	}
	return int64(u>>1) ^ -int64(u&1), n
}

// addTo records buckets into h, which has headroom's geometry.
func addTo(h *hdr.Histogram, buckets []bucket) error {
	values := headroomGeometry().values
	for _, b := range buckets {
		if err := h.RecordValues(values[b.idx], b.count); err != nil {
			return fmt.Errorf("counts add up past the largest integer")
		}
	}
	return nil
}

// encodeHist writes h in the V2 compressed encoding, as hdrhistogram-go's
// Encode does and its Decode (or any HdrHistogram's) reads, but compressed
// at zlib's best speed with a writer reused, not at its best compression
// with a new one: Encode cost ~1.5 ms a name, 5% of a core for a chat run's
// checkpoint every 10 s (docs/BENCHMARKS.md). The runs of empty buckets are
// written as hdrhistogram-go writes them, so only the compressed bytes
// differ.
func encodeHist(h *hdr.Histogram) (string, error) {
	e := histEncoders.Get().(*histEncoder)
	defer histEncoders.Put(e)
	snap := h.Export()
	counts := snap.Counts
	end := len(counts)
	for end > 0 && counts[end-1] == 0 {
		end--
	}
	p := e.payload[:0]
	for i := 0; i < end; {
		if counts[i] != 0 {
			p = appendZigzag(p, counts[i])
			i++
			continue
		}
		run := 0
		for i < end && counts[i] == 0 {
			run++
			i++
		}
		if run == 1 {
			p = appendZigzag(p, 0)
		} else {
			p = appendZigzag(p, -int64(run))
		}
	}
	e.payload = p
	var header [headerSize]byte
	binary.BigEndian.PutUint32(header[0:], uint32(payloadCookie|0x10)) // 0x10: the word size, as hdrhistogram-go writes it
	binary.BigEndian.PutUint32(header[4:], uint32(len(p)))
	// header[8:12], the normalizing index offset, is 0 as hdrhistogram-go writes it.
	binary.BigEndian.PutUint32(header[12:], uint32(snap.SignificantFigures))
	binary.BigEndian.PutUint64(header[16:], uint64(snap.LowestTrackableValue))
	binary.BigEndian.PutUint64(header[24:], uint64(snap.HighestTrackableValue))
	binary.BigEndian.PutUint64(header[32:], math.Float64bits(1))

	e.zbuf.Reset()
	e.zbuf.Write(make([]byte, 8)) // the cookie and the compressed length, written below
	e.z.Reset(&e.zbuf)
	if _, err := e.z.Write(header[:]); err != nil {
		return "", err
	}
	if _, err := e.z.Write(p); err != nil {
		return "", err
	}
	if err := e.z.Close(); err != nil {
		return "", err
	}
	out := e.zbuf.Bytes()
	binary.BigEndian.PutUint32(out[0:], uint32(compressedCookie|0x10))
	binary.BigEndian.PutUint32(out[4:], uint32(len(out)-8))
	return base64.StdEncoding.EncodeToString(out), nil
}

type histEncoder struct {
	payload []byte
	zbuf    bytes.Buffer
	z       *zlib.Writer
}

var histEncoders = sync.Pool{New: func() any {
	z, _ := zlib.NewWriterLevel(io.Discard, zlib.BestSpeed) // a valid level: no error
	return &histEncoder{z: z}
}}

// appendZigzag appends v as the V2 encoding's ZigZag LEB128 number (the
// inverse of zigzag).
func appendZigzag(p []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	for i := 0; i < 8; i++ {
		if u>>7 == 0 {
			return append(p, byte(u))
		}
		p = append(p, byte(u&0x7f|0x80))
		u >>= 7
	}
	return append(p, byte(u))
}
