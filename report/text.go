package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// textWidth is where the text renderer wraps paragraphs and list items.
const textWidth = 100

// Text writes d as plain text for a terminal: the same blocks as the
// Markdown and HTML forms, tables aligned in columns (numbers to the
// right), paragraphs wrapped. A chart is named, not drawn: it is in the
// other forms.
func Text(w io.Writer, d *Doc) error {
	b := bufio.NewWriter(w)
	if d.Title != "" {
		fmt.Fprintf(b, "\n%s\n", d.Title)
	}
	for _, bl := range d.Blocks {
		switch bl := bl.(type) {
		case *Heading:
			fmt.Fprintf(b, "\n%s\n", bl.Text)
			if bl.Level <= 2 {
				fmt.Fprintln(b, strings.Repeat("-", utf8.RuneCountInString(bl.Text)))
			}
		case *Para:
			wrap(b, bl.Text, "", "")
		case *List:
			for _, it := range bl.Items {
				wrap(b, it, "  - ", "    ")
			}
		case *Table:
			TextTable(b, bl)
		case *Chart:
			fmt.Fprintf(b, "(chart: %s, in the HTML and Markdown reports)\n", bl.Title)
		case *Flame:
			fmt.Fprintf(b, "(flame graph: %s, in the HTML and Markdown reports)\n", bl.Title)
		}
	}
	return b.Flush()
}

// TextTable writes t as aligned columns, two spaces apart, the columns in
// t.Right aligned to the right.
func TextTable(w io.Writer, t *Table) {
	width := make([]int, len(t.Header))
	grow := func(row []string) {
		for i, c := range row {
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	grow(t.Header)
	for _, r := range t.Rows {
		grow(r)
	}
	right := make([]bool, len(width))
	for _, i := range t.Right {
		if i < len(right) {
			right[i] = true
		}
	}
	line := func(row []string) {
		var b strings.Builder
		for i := range width {
			c := ""
			if i < len(row) {
				c = row[i]
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if right[i] {
				b.WriteString(pad + c)
			} else {
				b.WriteString(c + pad)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(t.Header)
	for _, r := range t.Rows {
		line(r)
	}
}

// wrap writes text word-wrapped at textWidth, the first line after first
// and the others after rest.
func wrap(w io.Writer, text, first, rest string) {
	line, n := first, utf8.RuneCountInString(first)
	empty := true
	for _, word := range strings.Fields(text) {
		wn := utf8.RuneCountInString(word)
		if !empty && n+1+wn > textWidth {
			fmt.Fprintln(w, line)
			line, n, empty = rest, utf8.RuneCountInString(rest), true
		}
		if !empty {
			line += " "
			n++
		}
		line += word
		n += wn
		empty = false
	}
	fmt.Fprintln(w, line)
}
