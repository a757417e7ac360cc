package result

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/headroom-dev/headroom/metrics"
)

// encodeRaw builds a V2 compressed encoding with the given header fields
// and payload, as a writer (or an attacker) could.
func encodeRaw(sig int32, low, high int64, payloadLen int32, payload []byte) string {
	var inner bytes.Buffer
	binary.Write(&inner, binary.BigEndian, []int32{payloadCookie | 0x10, payloadLen, 0, sig})
	binary.Write(&inner, binary.BigEndian, []int64{low, high})
	binary.Write(&inner, binary.BigEndian, 1.0)
	inner.Write(payload)
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	w.Write(inner.Bytes())
	w.Close()
	var out bytes.Buffer
	binary.Write(&out, binary.BigEndian, []int32{compressedCookie | 0x10, int32(z.Len())})
	out.Write(z.Bytes())
	return base64.StdEncoding.EncodeToString(out.Bytes())
}

func encode(t testing.TB, h *hdr.Histogram) string {
	t.Helper()
	b, err := h.Encode(hdrV2)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDecodeAgreesWithHdrhistogram: histograms decoded bucket by bucket
// equal hdrhistogram-go's own decoding, over the whole range.
func TestDecodeAgreesWithHdrhistogram(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var d histDecoder
	for n := range 50 {
		h := metrics.NewHistogram()
		for range n * 40 {
			h.RecordValues(1+r.Int64N(metrics.HighestMicros>>r.IntN(32)), 1+r.Int64N(1000))
		}
		h.RecordValue(metrics.LowestMicros)
		h.RecordValue(metrics.HighestMicros)
		enc := encode(t, h)
		want, err := hdr.Decode([]byte(enc))
		if err != nil {
			t.Fatal(err)
		}
		buckets, total, err := d.decode(enc, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := metrics.NewHistogram()
		if err := addTo(got, buckets); err != nil {
			t.Fatal(err)
		}
		if total != want.TotalCount() || !got.Equals(want) {
			t.Fatalf("histogram %d: decoded %d values, differs from hdrhistogram-go's %d", n, total, want.TotalCount())
		}
	}
}

// TestDecodeRefusesWithAReason: every corruption is an error that says
// what is wrong; a header claiming a range that hdrhistogram-go would
// allocate 50 MB for is refused without allocating it.
func TestDecodeRefusesWithAReason(t *testing.T) {
	good := encode(t, metrics.NewHistogram())
	raw, _ := base64.StdEncoding.DecodeString(good)
	// Every bucket empty, then one more with a count.
	pastEnd := append(zigzagBytes(-int64(len(headroomGeometry().values))), zigzagBytes(1)...)
	cases := []struct{ name, enc, want string }{
		{"not base64", "not hdr", "not base64"},
		{"empty", "", "too short"},
		{"cookie", base64.StdEncoding.EncodeToString([]byte("12345678abcd")), "not an HdrHistogram V2 compressed encoding"},
		{"truncated", base64.StdEncoding.EncodeToString(raw[:len(raw)-3]), "truncated"},
		{"not zlib", base64.StdEncoding.EncodeToString(append(raw[:8:8], make([]byte, len(raw)-8)...)), "corrupt compressed data"},
		{"wide range", encodeRaw(5, 1, math.MaxInt64, 0, nil), "headroom reads its own, 1 to 3600000000 µs at 3"},
		{"other digits", encodeRaw(2, 1, metrics.HighestMicros, 0, nil), "at 2 significant digits"},
		{"huge payload", encodeRaw(3, 1, metrics.HighestMicros, math.MaxInt32, nil), "at most"},
		{"short payload", encodeRaw(3, 1, metrics.HighestMicros, 10, []byte{2, 2}), "payload of 2 bytes, 10 announced"},
		{"long payload", encodeRaw(3, 1, metrics.HighestMicros, 1, []byte{2, 2}), "payload longer"},
		{"run past the end", encodeRaw(3, 1, metrics.HighestMicros, 4, []byte{0xff, 0xff, 0xff, 0x0f}), "past the end"},
		{"inside a number", encodeRaw(3, 1, metrics.HighestMicros, 1, []byte{0x80}), "ends inside a number"},
		{"too many buckets", encodeRaw(3, 1, metrics.HighestMicros, int32(len(pastEnd)), pastEnd), "more buckets"},
		{"overflowing counts", encodeRaw(3, 1, metrics.HighestMicros, 18, bytes.Repeat([]byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 2)), "past the largest integer"},
	}
	var d histDecoder
	for _, c := range cases {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _, err := d.decode(c.enc, nil)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
			t.Errorf("%s: allocated %d KB", c.name, grew>>10)
		}
	}
}

// zigzagBytes encodes v as the V2 payload does (up to 9 bytes).
func zigzagBytes(v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	var out []byte
	for i := 0; i < 8; i++ {
		if u < 0x80 {
			return append(out, byte(u))
		}
		out = append(out, byte(u)|0x80)
		u >>= 7
	}
	return append(out, byte(u))
}

// TestEncodeHistIsHdrhistograms: what encodeHist writes, hdrhistogram-go's
// own Decode reads back as the same histogram, and its payload (the
// compressed bytes aside) is byte for byte hdrhistogram-go's.
func TestEncodeHistIsHdrhistograms(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	payload := func(enc string) []byte {
		raw, _ := base64.StdEncoding.DecodeString(enc)
		z, err := zlib.NewReader(bytes.NewReader(raw[8:]))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(z)
		return b.Bytes()
	}
	for n := range 60 {
		h := metrics.NewHistogram()
		for range n * 30 {
			h.RecordValues(1+r.Int64N(metrics.HighestMicros>>r.IntN(32)), 1+r.Int64N(1<<r.IntN(40)))
		}
		if n%3 == 0 {
			h.RecordValue(metrics.HighestMicros)
		}
		enc, err := encodeHist(h)
		if err != nil {
			t.Fatal(err)
		}
		got, err := hdr.Decode([]byte(enc))
		if err != nil {
			t.Fatalf("histogram %d: hdrhistogram-go cannot decode it: %v", n, err)
		}
		if !got.Equals(h) {
			t.Fatalf("histogram %d: decoded to a different histogram (%d values, want %d)", n, got.TotalCount(), h.TotalCount())
		}
		if p, want := payload(enc), payload(encode(t, h)); !bytes.Equal(p, want) {
			t.Fatalf("histogram %d: payload of %d bytes differs from hdrhistogram-go's %d", n, len(p), len(want))
		}
	}
}

// BenchmarkEncodeHist encodes a request's histogram of a 10 s checkpoint
// (2,000 samples from 1 ms to 1 s), with encodeHist and hdrhistogram-go.
func BenchmarkEncodeHist(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	h := metrics.NewHistogram()
	for range 2000 {
		h.RecordValue(1000 + r.Int64N(1_000_000))
	}
	b.Run("headroom", func(b *testing.B) {
		for b.Loop() {
			encodeHist(h)
		}
	})
	b.Run("hdrhistogram-go", func(b *testing.B) {
		for b.Loop() {
			h.Encode(hdrV2)
		}
	})
}
