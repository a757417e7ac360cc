package report

import (
	"fmt"
	"html"
	"strings"
)

// Fragment is d's blocks as HTML to put in a page of the same style
// (Style), without the title: the live view's (--ui) body, redrawn each
// second. Its charts are canvases named by data-chart (the chart's Name),
// left for the page's script to draw: a PNG a second would cost the run.
// It writes the markup the report's template does (same elements and
// classes) directly: the template, by reflection, took half a tick's
// cost for a table of 200 request names.
func Fragment(d *Doc) ([]byte, error) {
	blocks, err := htmlBlocks(d.Blocks, true)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	esc := html.EscapeString
	cell := func(tag string, c htmlCell) {
		b.WriteString("<" + tag)
		if c.Class != "" {
			b.WriteString(` class="` + esc(c.Class) + `"`)
		}
		b.WriteString(">" + esc(c.Text) + "</" + tag + ">")
	}
	for _, hb := range blocks {
		switch {
		case hb.Level > 0:
			fmt.Fprintf(&b, "<h%d", hb.Level)
			if hb.ID != "" {
				b.WriteString(` id="` + esc(hb.ID) + `"`)
			}
			fmt.Fprintf(&b, ">%s</h%d>\n", esc(hb.Text), hb.Level)
		case hb.Para:
			b.WriteString("<p>" + esc(hb.Text) + "</p>\n")
		case hb.Items != nil:
			b.WriteString("<ul>\n")
			for _, it := range hb.Items {
				b.WriteString("<li>" + esc(it) + "</li>\n")
			}
			b.WriteString("</ul>\n")
		case hb.Table != nil:
			b.WriteString(`<div class="table"><table>` + "\n")
			if len(hb.Table.Header) > 0 {
				b.WriteString("<thead><tr>")
				for _, c := range hb.Table.Header {
					cell("th", c)
				}
				b.WriteString("</tr></thead>\n")
			}
			b.WriteString("<tbody>\n")
			for _, r := range hb.Table.Rows {
				b.WriteString("<tr>")
				for _, c := range r {
					cell("td", c)
				}
				b.WriteString("</tr>\n")
			}
			b.WriteString("</tbody>\n</table></div>\n")
		case hb.Canvas != nil:
			fmt.Fprintf(&b, `<figure><canvas data-chart="%s" width="560" height="300" aria-label="%s"></canvas></figure>`+"\n",
				esc(hb.Canvas.Name), esc(hb.Canvas.Alt))
		case hb.Flame != "":
			b.WriteString(`<figure class="flame">` + string(hb.Flame) + "</figure>\n")
		}
	}
	return []byte(b.String()), nil
}
