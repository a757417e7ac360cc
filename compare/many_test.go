package compare

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// writeManyNames writes a result with n request names of 5 requests each,
// without building a histogram per name (that alone would take 5 GB):
// the names share a few encoded histograms.
func writeManyNames(t *testing.T, dir string, n int, slow time.Duration) {
	t.Helper()
	var encoded []string
	var sums []metrics.Summary
	for i := range 50 {
		st := metrics.NewStat()
		for j := range 5 {
			st.Add(&metrics.Sample{Kind: metrics.Request, Status: 200, Latency: slow + time.Duration(1+i+j)*time.Millisecond})
		}
		b, err := st.Hist().Encode(hdr.V2CompressedEncodingCookieBase)
		if err != nil {
			t.Fatal(err)
		}
		encoded = append(encoded, string(b))
		sums = append(sums, st.Summarize("", 10*time.Second))
	}
	r := &result.Result{Format: result.Format, Kind: result.KindRun, Status: result.Completed,
		StartedAt: time.Date(2026, 1, 1, 0, 0, 0, int(slow), time.UTC), Window: result.Window{Seconds: 10}}
	h := result.Histograms{Format: result.Format, Unit: "us", Window: "window", Requests: map[string]string{}}
	for i := range n {
		s := sums[i%50]
		s.Name = fmt.Sprintf("GET /api/item/%05d", i)
		r.Requests = append(r.Requests, s)
		h.Requests[s.Name] = encoded[i%50]
	}
	os.MkdirAll(dir, 0o755)
	for file, v := range map[string]any{result.ResultFile: r, result.HistogramsFile: h} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestManyNamesCompareBounded: a result with 30,000 request names took
// 118 s and 18 GB to compare, a 190 KB histogram decoded per name and
// several more allocated per name and figure. Names past the run's cap are
// now folded on read, and each name's figures are computed once, so two
// such results compare in well under 1 GB allocated in all, and the
// comparison says what was folded.
func TestManyNamesCompareBounded(t *testing.T) {
	const names = 30_000
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeManyNames(t, a, names, 0)
	writeManyNames(t, b, names, time.Millisecond)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	base, err := Load("base", []string{a})
	if err != nil {
		t.Fatal(err)
	}
	nw, err := Load("new", []string{b})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compare(base, nw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<30 {
		t.Errorf("reading and comparing allocated %d MB, want under 1 GB", grew>>20)
	}
	if got := len(c.Window.Requests); got != metrics.MaxNames+1 {
		t.Errorf("%d rows, want the %d names kept and %q", got, metrics.MaxNames, metrics.OtherName)
	}
	folded := 0
	for _, n := range c.Notes {
		if strings.Contains(n, fmt.Sprintf("%d were folded under %q", names-metrics.MaxNames, metrics.OtherName)) {
			folded++
		}
	}
	if folded != 2 {
		t.Errorf("notes %q: want one per side saying names were folded", c.Notes)
	}
	for _, r := range c.Window.Requests {
		if r.Name == metrics.OtherName && r.BaseCount != 5*(names-metrics.MaxNames) {
			t.Errorf("%s: %d requests on base, want %d", r.Name, r.BaseCount, 5*(names-metrics.MaxNames))
		}
	}
}
