package result

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"testing"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	hrmetrics "github.com/headroom-dev/headroom/metrics"
)

// fixtureFile is a file of one of the real results report's tests use.
func fixtureFile(t testing.TB, run, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "report", "testdata", "runs", run, file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// allocated is the bytes allocated by the process so far.
func allocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// FuzzReadResult: any result.json is a Result that reads back the same
// once written, or an error; never a panic.
func FuzzReadResult(f *testing.F) {
	for _, run := range []string{"base-1", "step-1", "ceil-1"} {
		b := fixtureFile(f, run, ResultFile)
		f.Add(b)
		f.Add(b[:len(b)/2])
		f.Add([]byte(strings.Replace(string(b), `"count": `, `"count": -`, 1)))
	}
	f.Add([]byte(`{"format": "headroom-result/1", "kind": "run", "requests": [{"count": NaN}]}`))
	f.Add([]byte(`{"format": "headroom-result/1", "kind": "step"}`))
	f.Add([]byte(`{"format": "headroom-result/1", "kind": "run", "totals": {"count": 1e400}}`))
	f.Add([]byte(`{"format": "headroom-result/1", "kind": "ceiling", "ceiling": {"checks": [{}], "check_timeline": [{"values": [1]}]}}`))
	f.Add([]byte(strings.Repeat("[", 100000)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeResult(b)
		if err != nil {
			return
		}
		if err := r.validate(); err != nil {
			t.Fatalf("read a result that does not validate: %v", err)
		}
		for _, list := range [][]hrmetrics.Summary{r.Requests, r.Actions} {
			if len(list) > hrmetrics.MaxNames+1 {
				t.Fatalf("%d names after folding", len(list))
			}
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("a result read does not encode: %v", err)
		}
		if _, err := decodeResult(again); err != nil {
			t.Fatalf("a result read does not read back once written: %v", err)
		}
	})
}

// FuzzReadHistograms: any histograms.json decodes or is an error, never
// panics, and never allocates more than a bounded multiple of its size:
// the memory of a decoded file is its kept histograms' (at most
// MaxNames+1 per table, ~190 KB each) and its populated buckets'.
func FuzzReadHistograms(f *testing.F) {
	for _, run := range []string{"base-1", "step-1"} {
		b := fixtureFile(f, run, HistogramsFile)
		f.Add(b)
		f.Add(b[:len(b)*2/3])
	}
	wide := encodeRaw(5, 1, 1<<62, 0, nil)
	f.Add([]byte(`{"format": "headroom-result/1", "requests": {"x": "` + wide + `"}}`))
	f.Add([]byte(`{"format": "headroom-result/1", "levels": {"-3": {}}}`))
	f.Add([]byte(`{"format": "headroom-result/1", "levels": {"9999999999999999999": {}}}`))
	f.Add([]byte(`{"format": "headroom-result/1", "unit": "ms"}`))
	headroomGeometry()
	f.Fuzz(func(t *testing.T, b []byte) {
		before := allocated()
		h, err := decodeHistogramsFile(b)
		if err != nil {
			return
		}
		var d histDecoder
		tables := []map[string]string{h.Requests, h.Actions}
		for _, l := range h.Levels {
			tables = append(tables, l.Requests, l.Actions)
		}
		kept := 0
		for _, table := range tables {
			to := map[string]*hrmetrics.Stat{}
			if err := d.decodeTable(table, to); err != nil {
				return
			}
			if len(to) > hrmetrics.MaxNames+1 {
				t.Fatalf("%d histograms kept in a table", len(to))
			}
			kept += len(to)
		}
		if grew, bound := allocated()-before, uint64(64<<20+200<<10*kept+64*len(b)); grew > bound {
			t.Fatalf("decoding %d bytes into %d histograms allocated %d MB (bound %d MB)", len(b), kept, grew>>20, bound>>20)
		}
	})
}

// FuzzDecodeHistogram: any string decodes as hdrhistogram-go decodes it,
// or is an error; never a panic, and never more than the payload's
// worth of memory, whatever range the header claims.
func FuzzDecodeHistogram(f *testing.F) {
	h := hrmetrics.NewHistogram()
	for _, v := range []int64{1, 20, 20, 1500, 1e6, hrmetrics.HighestMicros} {
		h.RecordValue(v)
	}
	good, _ := h.Encode(hdrV2)
	f.Add(string(good))
	f.Add(string(good[:len(good)-6]))
	f.Add(encodeRaw(5, 1, 1<<62, 0, nil))
	f.Add(encodeRaw(3, 1, hrmetrics.HighestMicros, 1<<30, nil))
	f.Add(encodeRaw(3, 1, hrmetrics.HighestMicros, 4, []byte{0xff, 0xff, 0xff, 0x0f}))
	f.Add(encodeRaw(3, 0, hrmetrics.HighestMicros, 1, []byte{2}))
	f.Add("")
	headroomGeometry() // computed once per process, not per input
	f.Fuzz(func(t *testing.T, enc string) {
		var d histDecoder
		before := allocated()
		buckets, total, err := d.decode(enc, nil)
		if grew := allocated() - before; grew > uint64(1<<20+4*len(enc)) {
			t.Fatalf("decoding %d bytes allocated %d KB", len(enc), grew>>10)
		}
		if err != nil {
			return
		}
		got := hrmetrics.NewHistogram()
		if err := addTo(got, buckets); err != nil {
			t.Fatalf("decoded buckets do not record: %v", err)
		}
		want, err := hdr.Decode([]byte(enc))
		if err != nil {
			t.Fatalf("decoded here, hdrhistogram-go says %v", err)
		}
		if total != want.TotalCount() || !got.Equals(want) {
			t.Fatalf("decoded %d values, hdrhistogram-go %d, or the buckets differ", total, want.TotalCount())
		}
	})
}
