package report

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/headroom-dev/headroom/compare"
	"github.com/headroom-dev/headroom/result"
)

// The profiles' section names each phase with its CPU per unit, lists the
// cumulative functions without the serving plumbing and with generic
// shapes shortened, then the flat ones.
func TestProfilesAreReported(t *testing.T) {
	r := fixture(t, "base-1")
	r.Profiles = &result.Profiles{Targets: []string{"http://127.0.0.1:8065/debug/pprof"}, SliceS: 10,
		Slices: []result.ProfileSlice{{File: "profiles/t1-0001.pb.gz"}, {Error: "status 404"}},
		Phases: []result.ProfilePhase{{Phase: "setup", StartS: 0, EndS: 12, Slices: 1, ProfiledS: 10, CPUSeconds: 11.6, CPUCores: 1.16, PerUnitMs: 1010, Unit: "user set up",
			Cum: []result.FuncCPU{{Name: "net/http.(*conn).serve", CumS: 11.6, CumPc: 100}, {Name: "github.com/x/testbed.hashPassword", CumS: 11.4, CumPc: 98.3},
				{Name: "crypto/pbkdf2.Key[go.shape.interface { Sum([]uint8) []uint8 }]", CumS: 11.4, CumPc: 98.3}},
			Flat: []result.FuncCPU{{Name: "crypto/internal/fips140/sha256.blockSHANI", FlatS: 3.7, FlatPc: 31.9}}}}}
	md := strings.Join(strings.Fields(string(Markdown(ForResult(r)))), " ")
	mustContain(t, md, "## Server CPU profiles", "2 CPU profiles of 10 s each", "1 failed",
		"users' setup (the ramp, to the window)", "CPU 11.6 s, 1.16 cores, 1,010 ms a user set up",
		"| github.com/x/testbed.hashPassword | 11.4 | 98.3 |", `crypto/pbkdf2.Key\[...\]`, "(flat): crypto/internal/fips140/sha256.blockSHANI 31.9%")
	if strings.Contains(md, "(\\*conn).serve") {
		t.Errorf("net/http's serving in the cumulative table")
	}
}

// A phase's flame graph is an SVG of its own in the Markdown report and
// inline in the HTML one: well-formed, a box and a tooltip a function,
// names escaped, each box as wide as its share of its caller's.
func TestFlameGraphsAreDrawn(t *testing.T) {
	r := fixture(t, "base-1")
	hash := &result.Flame{Name: "main.hash<T>", Value: 3, Children: []*result.Flame{{Name: "crypto/sha256.block", Value: 1.5}}}
	r.Profiles = &result.Profiles{Targets: []string{"http://127.0.0.1:8065/debug/pprof"}, SliceS: 10,
		Phases: []result.ProfilePhase{{Phase: "setup", EndS: 12, Slices: 1, ProfiledS: 10, CPUSeconds: 4,
			Flame: &result.Flame{Name: "all", Value: 4, Children: []*result.Flame{hash, {Name: "main.json", Value: 1}}}}}}
	d := ForResult(r)
	var fl *Flame
	for _, b := range d.Blocks {
		if f, ok := b.(*Flame); ok {
			fl = f
		}
	}
	if fl == nil || fl.Name != "flame-setup-t1" {
		t.Fatalf("flame graph %+v: want one named flame-setup-t1", fl)
	}
	svg := fl.SVG()
	width := svgBoxes(t, svg)
	if len(width) != 4 || width["all"] != 1200 || width["main.hash<T>"] != 900 || width["crypto/sha256.block"] != 450 || width["main.json"] != 300 {
		t.Errorf("boxes %v: want all 1200 px, main.hash<T> 900, its sha256.block 450, main.json 300", width)
	}
	dir := t.TempDir()
	if _, err := WriteMarkdown(dir, d); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	file, err := os.ReadFile(filepath.Join(dir, "flame-setup-t1.svg"))
	if err != nil || !bytes.Equal(file, svg) || !strings.Contains(string(md), "(flame-setup-t1.svg)") {
		t.Errorf("Markdown: flame-setup-t1.svg (%v) linked and written as drawn", err)
	}
	page, err := HTML(d)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(page, svg[:bytes.IndexByte(svg, '\n')]) || !strings.Contains(string(page), "main.hash&lt;T&gt;") {
		t.Errorf("HTML: the flame graph is not inline, or a name is not escaped")
	}
}

// A profile comparison names its cause only when the CPU a unit changed,
// and says what the new build no longer runs.
func TestProfileComparisonNamesCauseAndGone(t *testing.T) {
	c := &compare.Comparison{Base: compare.SideInfo{Label: "v10.9"}, New: compare.SideInfo{Label: "v11.1"}, Profiles: []compare.ProfileComparison{
		{Phase: "setup", Unit: "user set up", Cause: "crypto/pbkdf2.Key", SampledS: 20,
			CPUPerUnit: compare.Metric{Name: "server CPU a user set up (setup)", Verdict: compare.Regression},
			Gone:       []compare.Metric{{Name: "golang.org/x/crypto/bcrypt.bcrypt", Base: 76.8}}},
		{Phase: "window", Unit: "request", SampledS: 20, CPUPerUnit: compare.Metric{Name: "server CPU a request (window)", Verdict: compare.NoChange}},
	}}
	md := strings.Join(strings.Fields(string(Markdown(&Doc{Blocks: profileCompareBlocks(c)}))), " ")
	mustContain(t, md, "Most of the change is in crypto/pbkdf2.Key and what it calls. Not run at all by v11.1: golang.org/x/crypto/bcrypt.bcrypt (76.8 ms a user set up in v10.9).",
		"No significant change in the server's CPU a request: no cause named")
}

// svgBoxes is each box's width in a flame graph's SVG, by its function.
func svgBoxes(t *testing.T, svg []byte) map[string]float64 {
	t.Helper()
	var doc struct {
		G []struct {
			Title string `xml:"title"`
			Rect  struct {
				W float64 `xml:"width,attr"`
			} `xml:"rect"`
		} `xml:"g"`
	}
	if err := xml.Unmarshal(svg, &doc); err != nil {
		t.Fatalf("not well-formed SVG: %v\n%s", err, svg)
	}
	width := map[string]float64{}
	for _, g := range doc.G {
		name, _, _ := strings.Cut(g.Title, ":")
		width[name] = g.Rect.W
	}
	return width
}

// A differential flame graph is as wide as the new side, where a function
// only the base ran has no box; a second graph, as wide as the base, then
// shows it, and is drawn only then.
func TestDiffFlameShowsWhatTheNewSideNoLongerRuns(t *testing.T) {
	tree := func(gone float64) *result.Flame {
		return &result.Flame{Name: "all", Value: 170, Base: 80 + gone, Children: []*result.Flame{
			{Name: "crypto/pbkdf2.Key", Value: 167, Base: 0},
			{Name: "golang.org/x/crypto/bcrypt.bcrypt", Value: 0, Base: gone},
			{Name: "encoding/json.Marshal", Value: 3, Base: 80}}}
	}
	flames := func(root *result.Flame) []*Flame {
		c := &compare.Comparison{Base: compare.SideInfo{Label: "v10.9"}, New: compare.SideInfo{Label: "v11.1"}, Profiles: []compare.ProfileComparison{
			{Phase: "setup", Unit: "user set up", SampledS: 20, Flame: root,
				CPUPerUnit: compare.Metric{Name: "server CPU a user set up (setup)", Verdict: compare.Regression}}}}
		var out []*Flame
		for _, b := range profileCompareBlocks(c) {
			if f, ok := b.(*Flame); ok {
				out = append(out, f)
			}
		}
		return out
	}
	fl := flames(tree(80))
	if len(fl) != 2 || fl[0].Name != "flame-diff-setup-t1" || fl[1].Name != "flame-diff-setup-t1-base" || !fl[1].FromBase {
		t.Fatalf("graphs %+v: want flame-diff-setup-t1, then flame-diff-setup-t1-base drawn from the base", fl)
	}
	if w := svgBoxes(t, fl[0].SVG()); w["golang.org/x/crypto/bcrypt.bcrypt"] != 0 || w["crypto/pbkdf2.Key"] < 1170 {
		t.Errorf("as wide as the new side: boxes %v, want pbkdf2 ~1179 px and no bcrypt", w)
	}
	w := svgBoxes(t, fl[1].SVG())
	if w["all"] != 1200 || w["golang.org/x/crypto/bcrypt.bcrypt"] != 600 || w["encoding/json.Marshal"] != 600 || w["crypto/pbkdf2.Key"] != 0 {
		t.Errorf("as wide as the base: boxes %v, want bcrypt 600 px, json 600, no pbkdf2", w)
	}
	if !strings.Contains(fl[1].Title, "what v11.1 no longer runs") {
		t.Errorf("title %q: say what the second graph shows", fl[1].Title)
	}
	if fl := flames(tree(0)); len(fl) != 1 {
		t.Errorf("%d graphs where the new side runs every function the base did: want 1", len(fl))
	}
}

// A run's report draws the flame graphs of its setup, window and holds,
// and of each target's level with the most users.
func TestFlamePhasesDrawn(t *testing.T) {
	phs := []result.ProfilePhase{{Phase: "setup"}, {Phase: "level 10"}, {Phase: "level 40"}, {Phase: "level 20"}, {Phase: "level 40 (2)"},
		{Phase: "hold 38"}, {Target: 1, Phase: "level 5"}, {Target: 1, Phase: "level 3"}}
	got := flamePhases(phs)
	want := map[int]bool{0: true, 4: true, 5: true, 6: true}
	if len(got) != len(want) {
		t.Errorf("drawn %v, want %v (setup, the last level 40, hold 38, target 2's level 5)", got, want)
	}
	for i := range want {
		if !got[i] {
			t.Errorf("drawn %v, want %v (setup, the last level 40, hold 38, target 2's level 5)", got, want)
		}
	}
}

// A profile's names are whatever its server wrote: a flame graph of names
// with control characters, invalid UTF-8 and many-byte characters, cut to
// fit their boxes, is still well-formed XML, and no label is cut inside a
// character.
func TestFlameGraphOfHostileNamesIsValidXML(t *testing.T) {
	long := strings.Repeat("日本語", 40) // 3 bytes a character
	root := &result.Flame{Name: "all", Value: 4, Children: []*result.Flame{
		{Name: "main.a\x00b\x1b[2J\x07" + long, Value: 2},
		{Name: "main.bad\xff\xfe" + long, Value: 1},
		{Name: "main.\uFFFE" + long, Value: 1},
	}}
	svg := (&Flame{Name: "f", Title: "title \x01" + long, Unit: "s", Root: root}).SVG()
	d := xml.NewDecoder(bytes.NewReader(svg))
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
		if cd, ok := tok.(xml.CharData); ok && !utf8.Valid(cd) {
			t.Errorf("text that is not UTF-8: %q", cd)
		}
	}
	if !utf8.Valid(svg) || bytes.ContainsAny(svg, "\x00\x1b\x07\x01") {
		t.Errorf("the SVG holds invalid UTF-8 or control characters")
	}
}
