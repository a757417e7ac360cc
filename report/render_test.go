package report

import (
	"bytes"
	"encoding/base64"
	"flag"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// testDoc has every kind of block and the cases renderers get wrong: a
// pipe and Markdown syntax in text, right-aligned columns, verdict cells,
// a short row, and charts with several series, gaps and no data at all.
func testDoc() *Doc {
	var t, base, cand, limit []float64
	for i := range 300 {
		x := float64(i)
		t = append(t, x)
		base = append(base, 80+15*math.Sin(x/25))
		cand = append(cand, 95+12*math.Cos(x/18))
		limit = append(limit, 150)
	}
	gappy := append([]float64(nil), cand...)
	for i := 100; i < 130; i++ {
		gappy[i] = math.NaN()
	}
	return &Doc{
		Title: "Comparison: v1.4 (base) vs v1.5 (new)",
		Blocks: []Block{
			&Para{Text: "Three repeats of each side; intervals are 95%. Names like *checkout* or <b>bold</b> and [links](x) stay text."},
			&Heading{Level: 2, Text: "Verdict"},
			&List{Items: []string{
				"p99 of GET /items rose 12% [8%, 16%]",
				"- a dash that is not a nested list",
				"1. a number that is not a numbered list",
			}},
			&Table{
				Header: []string{"request", "count", "p50 (ms)", "p99 (ms)", "change", "verdict"},
				Right:  []int{1, 2, 3, 4},
				Rows: [][]string{
					{"GET /items", "120000", "12.1", "48.0", "+12.0%", "regression (p99)"},
					{"GET /search?q=a|b", "3400", "30.5", "95.2", "-8.1%", "improvement (p99)"},
					{"POST /cart", "800", "20.0", "60.3", "+0.4%", "no change"},
					{"(other names)", "12"},
				},
			},
			&Heading{Level: 3, Text: "Latency over time"},
			&Chart{
				Name: "latency", Title: "p99 latency", XLabel: "time (s)", YLabel: "p99 (ms)",
				Series: []Series{
					{Name: "base", X: t, Y: base, Dashed: true},
					{Name: "new", X: t, Y: gappy},
					{Name: "limit", X: t, Y: limit, Dashed: true},
				},
			},
			&Chart{
				Name: "throughput", Title: "Throughput", XLabel: "time (s)", YLabel: "requests/s",
				Series: []Series{{Name: "new", X: t, Y: cand}},
			},
			&Heading{Level: 2, Text: "Errors & timeouts"},
			&Para{Text: "No errors on either side."},
			&Chart{
				Name: "errors", Title: "Errors", XLabel: "time (s)", YLabel: "errors/s",
				Series: []Series{{Name: "base", X: []float64{1, 2}, Y: []float64{math.NaN(), math.NaN()}}, {Name: "new"}},
			},
		},
	}
}

func TestMarkdownGolden(t *testing.T) {
	got := Markdown(testDoc())
	golden := filepath.Join("testdata", "comparison.md.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./report -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Markdown differs from %s (go test ./report -update rewrites it after a deliberate change)\ngot:\n%s", golden, got)
	}
}

func TestMarkdownEscapes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text, 12.5%", "plain text, 12.5%"},
		{"a*b [c](d) <e> `f` ~g", `a\*b \[c\](d) \<e> \` + "`f\\`" + ` \~g`},
		{"loadtest_requests_total", "loadtest_requests_total"},
		{"_private_", `\_private\_`},
		{"two\nlines", "two lines"},
		{"# not a heading", `\# not a heading`},
		{"#hashtag", "#hashtag"},
		{"- not a list", `\- not a list`},
		{"-5% latency", "-5% latency"},
		{"2. not a list", `2\. not a list`},
		{"2.5 ms", "2.5 ms"},
		{"> not a quote", `\> not a quote`},
		{"---", `\---`},
		{"    not code", "not code"},
		{"a server's \x1b[2J\x07answer\u009b", `a server's ?\[2J?answer?`},
	} {
		if got := escapeLineStart(escape(tc.in)); got != tc.want {
			t.Errorf("escape(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestWriteMarkdownCharts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	d := testDoc()
	path, err := WriteMarkdown(dir, d)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "report.md"); path != want {
		t.Errorf("path = %s, want %s", path, want)
	}
	md, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(md, Markdown(d)) {
		t.Error("report.md is not Markdown(d)")
	}
	for _, c := range charts(d) {
		if !bytes.Contains(md, []byte("("+c.Name+".png)")) {
			t.Errorf("report.md does not link %s.png", c.Name)
		}
		data, err := os.ReadFile(filepath.Join(dir, c.Name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s.png: %v", c.Name, err)
		}
		checkChartImage(t, c, img)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}
}

// checkChartImage checks a chart's picture: 900x400, not blank, and every
// series with data drawn in its colour, as a line or a dot.
func checkChartImage(t *testing.T, c *Chart, img image.Image) {
	t.Helper()
	if b := img.Bounds(); b.Dx() != 900 || b.Dy() != 400 {
		t.Errorf("%s: %dx%d, want 900x400", c.Name, b.Dx(), b.Dy())
	}
	if n := countPixels(img, func(p color.RGBA) bool { return p != color.RGBA{0xff, 0xff, 0xff, 0xff} }); n < 2000 {
		t.Errorf("%s: only %d pixels are not white", c.Name, n)
	}
	for i, s := range c.Series {
		want := 0 // pixels of its colour: a line, or at least a dot
		for _, run := range finiteRuns(s) {
			want = max(want, min(len(run)*15, 200))
		}
		if n := countPixels(img, near(seriesColor(i))); n < want {
			t.Errorf("%s: series %q has %d pixels of its colour, want %d or more", c.Name, s.Name, n, want)
		}
	}
}

func TestWriteMarkdownRejectsBadNames(t *testing.T) {
	for _, name := range []string{"", "../up", "a/b", ".hidden", "two words"} {
		d := &Doc{Blocks: []Block{&Chart{Name: name}}}
		if _, err := WriteMarkdown(t.TempDir(), d); err == nil {
			t.Errorf("chart name %q: no error", name)
		}
	}
	d := &Doc{Blocks: []Block{&Chart{Name: "a"}, &Chart{Name: "a"}}}
	if _, err := WriteMarkdown(t.TempDir(), d); err == nil {
		t.Error("two charts named a: no error")
	}
}

func TestHTMLSelfContained(t *testing.T) {
	d := testDoc()
	page, err := HTML(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"http://", "https://", "//cdn", "@import", "<script"} {
		if bytes.Contains(page, []byte(s)) {
			t.Errorf("page contains %q", s)
		}
	}
	root, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	var cells, headings []string
	var imgs []*html.Node
	var classes = map[string]string{} // cell text -> class
	walk(root, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		for _, a := range n.Attr {
			switch a.Key {
			case "src":
				if !strings.HasPrefix(a.Val, "data:image/png;base64,") {
					t.Errorf("<%s src=%.60q>: not a PNG data URI", n.Data, a.Val)
				}
			case "href":
				if !strings.HasPrefix(a.Val, "#") {
					t.Errorf("<%s href=%q>: not a link within the page", n.Data, a.Val)
				}
			case "style":
				if strings.Contains(a.Val, "url(") {
					t.Errorf("<%s style=%q>: a url()", n.Data, a.Val)
				}
			}
		}
		switch n.Data {
		case "style":
			if strings.Contains(textOf(n), "url(") {
				t.Error("the stylesheet has a url()")
			}
		case "td", "th":
			cells = append(cells, textOf(n))
			classes[textOf(n)] = attr(n, "class")
		case "h1", "h2", "h3", "h4":
			headings = append(headings, textOf(n))
		case "img":
			imgs = append(imgs, n)
		}
	})
	var wantCells, wantHeadings []string
	wantHeadings = append(wantHeadings, d.Title)
	for _, b := range d.Blocks {
		switch v := b.(type) {
		case *Heading:
			wantHeadings = append(wantHeadings, v.Text)
		case *Table:
			wantCells = append(wantCells, v.Header...)
			for _, r := range v.Rows {
				wantCells = append(wantCells, r...)
			}
		}
	}
	for _, c := range wantCells {
		if !contains(cells, c) {
			t.Errorf("no cell reads %q", c)
		}
	}
	for _, h := range wantHeadings {
		if !contains(headings, h) {
			t.Errorf("no heading reads %q", h)
		}
	}
	if got := classes["regression (p99)"]; got != "regression" {
		t.Errorf("regression cell has class %q", got)
	}
	if got := classes["improvement (p99)"]; got != "improvement" {
		t.Errorf("improvement cell has class %q", got)
	}
	if got := classes["12.1"]; got != "num" {
		t.Errorf("right-aligned cell has class %q", got)
	}
	cs := charts(d)
	if len(imgs) != len(cs) {
		t.Fatalf("%d images, want one per chart (%d)", len(imgs), len(cs))
	}
	for i, n := range imgs {
		data, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(attr(n, "src"), "data:image/png;base64,"))
		if err != nil {
			t.Fatalf("image %d: %v", i, err)
		}
		img, err := png.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("image %d: %v", i, err)
		}
		checkChartImage(t, cs[i], img)
	}
}

func TestWriteHTML(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	path, err := WriteHTML(dir, testDoc())
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "report.html"); path != want {
		t.Errorf("path = %s, want %s", path, want)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := HTML(testDoc())
	if !bytes.Equal(got, want) {
		t.Error("report.html is not HTML(d)")
	}
}

func charts(d *Doc) []*Chart {
	var cs []*Chart
	for _, b := range d.Blocks {
		if c, ok := b.(*Chart); ok {
			cs = append(cs, c)
		}
	}
	return cs
}

func countPixels(img image.Image, match func(color.RGBA) bool) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			if match(color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8), uint8(a >> 8)}) {
				n++
			}
		}
	}
	return n
}

// near matches colours within a small distance of c, so anti-aliased and
// colour-managed pixels of a line still count.
func near(c color.RGBA) func(color.RGBA) bool {
	return func(p color.RGBA) bool {
		d := func(a, b uint8) int { return max(int(a)-int(b), int(b)-int(a)) }
		return d(p.R, c.R)+d(p.G, c.G)+d(p.B, c.B) <= 40
	}
}

func walk(n *html.Node, f func(*html.Node)) {
	f(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, f)
	}
}

func textOf(n *html.Node) string {
	var b strings.Builder
	walk(n, func(c *html.Node) {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	})
	return strings.TrimSpace(b.String())
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
