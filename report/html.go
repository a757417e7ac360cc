package report

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"strings"
)

// WriteHTML writes d as dir/report.html, one self-contained file, and
// returns its path. It creates dir if needed and replaces an existing
// report.html through a temporary file and a rename.
func WriteHTML(dir string, d *Doc) (string, error) {
	page, err := HTML(d)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("html report: %w", err)
	}
	path := filepath.Join(dir, "report.html")
	if err := writeFile(path, page); err != nil {
		return "", err
	}
	return path, nil
}

// HTML is d as one self-contained HTML page: inline CSS, charts as inline
// PNG images, flame graphs as inline SVG, no script and no reference to
// anything outside the file (its Content-Security-Policy forbids loading
// any), so it can be mailed,
// attached to a ticket or opened offline. Text is escaped. Verdict cells
// are coloured (red for a regression, green for an improvement) and say
// the word, so the verdict survives printing in grey. Heading levels below
// 2 are drawn as 2, above 4 as 4.
//
// Charts are PNG data URIs, not inline SVG. Measured with three noisy
// 600-point series: gonum's SVG is 31 KB, but only without its fonts, and
// then the text is laid out for Liberation Sans and drawn in whatever font
// the viewer has; with the fonts embedded it is 1.1 MB per chart. The
// 256-colour PNG is 39 KB (52 KB as base64), looks the same everywhere and
// is the very image the Markdown report links to. Six such charts make a
// page of about 330 KB.
func HTML(d *Doc) ([]byte, error) {
	blocks, err := htmlBlocks(d.Blocks, false)
	if err != nil {
		return nil, err
	}
	v := htmlPage{Title: d.Title, Blocks: blocks}
	for _, b := range blocks {
		if b.Level == 2 {
			v.TOC = append(v.TOC, b)
		}
	}
	if len(v.TOC) < 3 {
		v.TOC = nil // a contents list for two sections is noise
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, v); err != nil {
		return nil, fmt.Errorf("html report: %w", err)
	}
	return buf.Bytes(), nil
}

// htmlBlocks are blocks as the template reads them; a chart is a PNG, or
// a canvas for a script to draw (canvas).
func htmlBlocks(blocks []Block, canvas bool) ([]htmlBlock, error) {
	var out []htmlBlock
	sections := 0
	for _, blk := range blocks {
		var hb htmlBlock
		switch b := blk.(type) {
		case *Heading:
			hb.Level = min(max(b.Level, 2), 4)
			hb.Text = b.Text
			if hb.Level == 2 {
				sections++
				hb.ID = fmt.Sprintf("s%d", sections)
			}
		case *Para:
			hb.Para, hb.Text = true, b.Text
		case *List:
			hb.Items = b.Items
			if hb.Items == nil {
				continue
			}
		case *Table:
			hb.Table = htmlTableOf(b)
		case *Chart:
			alt := b.Title
			if alt == "" {
				alt = b.Name
			}
			if canvas {
				hb.Canvas = &htmlChart{Alt: alt, Name: b.Name}
				break
			}
			png, err := b.PNG()
			if err != nil {
				return nil, err
			}
			hb.Chart = &htmlChart{
				Alt: alt,
				// A data URI is trusted: it is this package's own PNG.
				Src: template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(png)),
			}
		case *Flame:
			hb.Flame = template.HTML(b.SVG())
		default:
			continue
		}
		out = append(out, hb)
	}
	return out, nil
}

// htmlPage and the types below are a Doc as the template reads it.
type htmlPage struct {
	Title  string
	TOC    []htmlBlock // level-2 headings, for the contents list
	Blocks []htmlBlock
}

// htmlBlock is one block: a heading (Level > 0), a paragraph (Para), a
// list (Items), a table or a chart.
type htmlBlock struct {
	Level int
	ID    string
	Para  bool
	Text  string
	Items []string
	Table *htmlTable
	Chart *htmlChart
	// Canvas is a chart left for the live page's script to draw.
	Canvas *htmlChart
	// Flame is a flame graph's SVG, inline (its boxes' tooltips work
	// only so); trusted: this package's own, every text in it escaped.
	Flame template.HTML
}

type htmlTable struct {
	Header []htmlCell
	Rows   [][]htmlCell
}

// htmlCell is a cell and its class: "num" for a right-aligned column, and
// the verdict ("regression", "improvement") if it starts with one.
type htmlCell struct {
	Text  string
	Class string
}

type htmlChart struct {
	Alt  string
	Src  template.URL
	Name string // a canvas's chart
}

func htmlTableOf(t *Table) *htmlTable {
	ncol := len(t.Header)
	for _, r := range t.Rows {
		ncol = max(ncol, len(r))
	}
	right := make([]bool, ncol)
	for _, i := range t.Right {
		if i >= 0 && i < ncol {
			right[i] = true
		}
	}
	row := func(cells []string, body bool) []htmlCell {
		out := make([]htmlCell, ncol)
		for i := range out {
			if i < len(cells) {
				out[i].Text = cells[i]
			}
			var class []string
			if right[i] {
				class = append(class, "num")
			}
			if v := verdict(out[i].Text); body && v != "" {
				class = append(class, v)
			}
			out[i].Class = strings.Join(class, " ")
		}
		return out
	}
	ht := &htmlTable{}
	if len(t.Header) > 0 {
		ht.Header = row(t.Header, false)
	}
	for _, r := range t.Rows {
		ht.Rows = append(ht.Rows, row(r, true))
	}
	return ht
}

// pageTemplate is parsed once; executing it is safe from any goroutine.
var pageTemplate = template.Must(template.New("report").Parse(pageHTML))

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
` + Style + `</style>
</head>
<body>
<main>
{{- with .Title}}
<h1>{{.}}</h1>
{{- end}}
{{- with .TOC}}
<nav><strong>Contents</strong>
<ol>
{{- range .}}
<li><a href="#{{.ID}}">{{.Text}}</a></li>
{{- end}}
</ol>
</nav>
{{- end}}
{{- range .Blocks}}
{{- if eq .Level 2}}
<h2{{with .ID}} id="{{.}}"{{end}}>{{.Text}}</h2>
{{- else if eq .Level 3}}
<h3>{{.Text}}</h3>
{{- else if eq .Level 4}}
<h4>{{.Text}}</h4>
{{- else if .Para}}
<p>{{.Text}}</p>
{{- else if .Items}}
<ul>
{{- range .Items}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- else if .Table}}
<div class="table"><table>
{{- with .Table.Header}}
<thead><tr>{{range .}}<th{{with .Class}} class="{{.}}"{{end}}>{{.Text}}</th>{{end}}</tr></thead>
{{- end}}
<tbody>
{{- range .Table.Rows}}
<tr>{{range .}}<td{{with .Class}} class="{{.}}"{{end}}>{{.Text}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table></div>
{{- else if .Chart}}
<figure><img src="{{.Chart.Src}}" width="900" height="400" alt="{{.Chart.Alt}}"></figure>
{{- else if .Flame}}
<figure class="flame">{{.Flame}}</figure>
{{- end}}
{{- end}}
</main>
</body>
</html>
`

// Style is the reports' CSS, which the live view's page (--ui) shares.
const Style = `:root { color-scheme: light; }
body { margin: 0 auto; padding: 1.5rem 1rem 3rem; max-width: 960px; color: #1f2328; background: #fff;
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Liberation Sans", Arial, sans-serif; }
h1 { font-size: 1.8rem; margin: 0 0 1rem; }
h2 { font-size: 1.35rem; margin: 2rem 0 .6rem; padding-bottom: .2rem; border-bottom: 1px solid #d0d7de; }
h3 { font-size: 1.1rem; margin: 1.4rem 0 .5rem; }
h4 { font-size: 1rem; margin: 1.2rem 0 .4rem; }
p, ul { margin: .5rem 0; }
nav { margin: 0 0 1rem; padding: .5rem 1rem; background: #f6f8fa; border-radius: 6px; }
nav ol { margin: .2rem 0; padding-left: 1.4rem; }
a { color: #0969da; text-decoration: none; }
.table { overflow-x: auto; margin: .6rem 0; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: .3rem .7rem; border: 1px solid #d0d7de; text-align: left; vertical-align: top; }
th { background: #f6f8fa; font-weight: 600; }
tbody tr:nth-child(even) td { background: #fafbfc; }
.num { text-align: right; white-space: nowrap; }
tbody tr td.regression { background: #ffebe9; color: #a40e26; font-weight: 600; }
tbody tr td.improvement { background: #dafbe1; color: #116329; font-weight: 600; }
figure { margin: 1rem 0; }
figure img, figure svg { display: block; max-width: 100%; height: auto; }
@media print {
  body { max-width: none; padding: 0; font-size: 11pt; }
  nav { display: none; }
  h2, h3, h4 { break-after: avoid; }
  figure, tr { break-inside: avoid; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
`
