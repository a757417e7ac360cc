package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/compare"
	"github.com/headroom-dev/headroom/internal/testing/hostile"
	"github.com/headroom-dev/headroom/result"
)

// A result directory is often someone else's (a CI artifact of their pull
// request): what report and compare make of one must never panic, and
// what they write must be what it claims, whatever the directory holds.

// profiledFixture is fixture run's result.json with --profile's section
// added, its flame graph named as a hostile server might name functions.
func profiledFixture(t testing.TB, run string) []byte {
	t.Helper()
	r, err := result.Read(filepath.Join("testdata", "runs", run))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"main.(*T).ServeHTTP", "é" + strings.Repeat("名", 40), "<script>&amp;\"'", "\x1b[2J\x1b[Hfake", "a\x00b\ufffe"}
	flame := &result.Flame{Name: "all", Value: 1}
	at := flame
	for i, n := range names {
		c := &result.Flame{Name: n, Value: 1 - float64(i)*0.1}
		at.Children = append(at.Children, c, &result.Flame{Name: n + "2", Value: 0.05})
		at = c
	}
	r.Profiles = &result.Profiles{Targets: []string{"http://127.0.0.1:1/debug/pprof"}, SliceS: 10,
		Slices: []result.ProfileSlice{{StartS: 0, EndS: 10, File: "profiles/t1-1.pb.gz"}, {StartS: 10, EndS: 20, Error: "refused: \x1b[31mred"}},
		Phases: []result.ProfilePhase{{Phase: "window", StartS: 0, EndS: 20, Slices: 1, ProfiledS: 10, CPUSeconds: 1, CPUCores: 0.1,
			PerUnitMs: 2, Unit: "request", File: "profiles/window-t1.pb.gz", Flame: flame,
			Flat: []result.FuncCPU{{Name: names[3], FlatS: 0.5, CumS: 0.5, FlatPc: 50, CumPc: 50}},
			Cum:  []result.FuncCPU{{Name: names[2], FlatS: 0.1, CumS: 1, FlatPc: 10, CumPc: 100}}}}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// resultDir writes a result directory: result.json, the fixture's
// histograms of its kind, and prof as each profile it names.
func resultDir(t testing.TB, resultJSON, prof []byte) string {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "profiles"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{result.ResultFile: resultJSON, "profiles/window-t1.pb.gz": prof, "profiles/t1-1.pb.gz": prof}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var kind struct{ Kind string }
	json.Unmarshal(resultJSON, &kind)
	run := map[string]string{result.KindStep: "step-1", result.KindCeiling: "ceil-1"}[kind.Kind]
	if run == "" {
		run = "base-1"
	}
	hists, err := os.ReadFile(filepath.Join("testdata", "runs", run, result.HistogramsFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, result.HistogramsFile), hists, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkDoc renders d every way and holds each to what it claims: Markdown
// with no control characters but newlines and tabs (a terminal or an
// editor would run them), each flame graph an SVG document that parses.
func checkDoc(t *testing.T, d *Doc) {
	md := Markdown(d)
	for i, c := range md {
		if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
			t.Fatalf("control character %#x in the Markdown at %d: %q", c, i, md[max(i-40, 0):min(i+40, len(md))])
		}
	}
	if err := Text(io.Discard, d); err != nil {
		t.Fatal(err)
	}
	for _, b := range d.Blocks {
		f, ok := b.(*Flame)
		if !ok {
			continue
		}
		dec := xml.NewDecoder(bytes.NewReader(f.SVG()))
		for {
			_, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("flame graph %s is no XML: %v", f.Name, err)
			}
		}
	}
}

// profileSeeds are the profiles a fuzzed directory starts from: a good
// one, a gzip bomb, a deep stack, garbage, nothing.
func profileSeeds() [][]byte {
	return [][]byte{hostile.CPUProfile(time.Second, "main.work", "main.main"), hostile.GzipBomb(1 << 20),
		hostile.DeepProfile(700), []byte("\x1f\x8bnot gzip"), nil}
}

// FuzzReportOfAResult: any result directory that reads is reported
// (Markdown, text, flame graphs) without a panic, and the report is clean.
func FuzzReportOfAResult(f *testing.F) {
	for _, run := range []string{"base-1", "step-1", "ceil-1"} {
		b := profiledFixture(f, run)
		f.Add(b)
		f.Add([]byte(strings.Replace(string(b), `"target":0`, `"target":7`, 1)))
		f.Add([]byte(strings.Replace(string(b), `profiles/window-t1.pb.gz`, `../../../../dev/zero`, 1)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := result.Read(resultDir(t, b, nil))
		if err != nil {
			return
		}
		checkDoc(t, ForResult(r))
	})
}

// FuzzCompareDirs: any result directory, its profiles among it, compared
// with a real one of its kind that was profiled, loads and compares or
// is refused with an error; its comparison is reported clean.
func FuzzCompareDirs(f *testing.F) {
	good := profileSeeds()[0]
	bases := map[string]*compare.Side{}
	for _, run := range []string{"base-1", "step-1", "ceil-1"} {
		b := profiledFixture(f, run)
		for _, p := range profileSeeds() {
			f.Add(b, p)
		}
		f.Add([]byte(strings.Replace(string(b), `"phase":"window"`, `"phase":"setup"`, 1)), good)
		var kind struct{ Kind string }
		json.Unmarshal(b, &kind)
		var err error
		if bases[kind.Kind], err = compare.Load("base", []string{resultDir(f, b, good)}); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, b, prof []byte) {
		dir := resultDir(t, b, prof)
		r, err := result.Read(dir)
		if err != nil {
			return
		}
		nw, err := compare.Load("new", []string{dir})
		if err != nil {
			return
		}
		base := bases[r.Kind]
		if base == nil {
			return // a kind compare does not know: Load refused it already, or will
		}
		c, err := compare.Compare(base, nw, compare.Options{})
		if err != nil {
			return
		}
		checkDoc(t, ForComparison(c))
	})
}

// The fuzz targets' seeds reach what they are for: a result that reads,
// whose report draws the flame graph of its hostile names, and a
// comparison of two profiled directories that compares their profiles.
func TestFuzzSeedsReachTheProfiles(t *testing.T) {
	b := profiledFixture(t, "base-1")
	good := profileSeeds()[0]
	r, err := result.Read(resultDir(t, b, good))
	if err != nil {
		t.Fatal(err)
	}
	d := ForResult(r)
	flames := 0
	for _, bl := range d.Blocks {
		if _, ok := bl.(*Flame); ok {
			flames++
		}
	}
	if flames == 0 {
		t.Errorf("no flame graph in the report of a profiled result")
	}
	checkDoc(t, d)
	base, err := compare.Load("base", []string{resultDir(t, b, good)})
	if err != nil {
		t.Fatal(err)
	}
	nw, err := compare.Load("new", []string{resultDir(t, b, good)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := compare.Compare(base, nw, compare.Options{})
	if err != nil || len(c.Profiles) == 0 {
		t.Fatalf("%v: %d profile phases compared (notes %q), want the window's", err, len(c.Profiles), c.Notes)
	}
	checkDoc(t, ForComparison(c))
}
