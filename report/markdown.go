package report

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// WriteMarkdown writes d as dir/report.md, with each chart beside it as
// dir/<Name>.png (a flame graph as dir/<Name>.svg), and returns the path
// of report.md. It creates dir if needed and replaces files of the same names; each file is written under
// a temporary name and renamed, so a reader never sees half a file. A
// chart whose Name is empty, repeated, or not a plain file name stem
// (letters, digits, '.', '-', '_'; not starting with '.') is an error.
func WriteMarkdown(dir string, d *Doc) (string, error) {
	if err := checkChartNames(d); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("markdown report: %w", err)
	}
	for _, b := range d.Blocks {
		var err error
		switch c := b.(type) {
		case *Chart:
			var png []byte
			if png, err = c.PNG(); err == nil {
				err = writeFile(filepath.Join(dir, c.Name+".png"), png)
			}
		case *Flame:
			err = writeFile(filepath.Join(dir, c.Name+".svg"), c.SVG())
		}
		if err != nil {
			return "", err
		}
	}
	path := filepath.Join(dir, "report.md")
	if err := writeFile(path, Markdown(d)); err != nil {
		return "", err
	}
	return path, nil
}

// Markdown is d as GitHub-flavoured Markdown. Charts are image links to
// <Name>.png in the same directory, as WriteMarkdown writes them. Text is
// escaped so that it reads as written: "*", "[", "<" and the like never
// turn into formatting. Verdict cells are bold. Heading levels below 2 are
// drawn as 2 (the title is the only level 1), above 6 as 6.
func Markdown(d *Doc) []byte {
	var b bytes.Buffer
	sep := func() {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
	}
	if d.Title != "" {
		fmt.Fprintf(&b, "# %s\n", escape(d.Title))
	}
	for _, blk := range d.Blocks {
		sep()
		switch v := blk.(type) {
		case *Heading:
			level := min(max(v.Level, 2), 6)
			fmt.Fprintf(&b, "%s %s\n", strings.Repeat("#", level), escape(v.Text))
		case *Para:
			fmt.Fprintf(&b, "%s\n", escapeLineStart(escape(v.Text)))
		case *List:
			for _, item := range v.Items {
				fmt.Fprintf(&b, "- %s\n", escapeLineStart(escape(item)))
			}
		case *Table:
			writeTable(&b, v)
		case *Chart:
			alt := v.Title
			if alt == "" {
				alt = v.Name
			}
			fmt.Fprintf(&b, "![%s](%s.png)\n", escape(alt), v.Name)
		case *Flame:
			fmt.Fprintf(&b, "![%s](%s.svg)\n", escape(v.Title), v.Name)
		}
	}
	return b.Bytes()
}

// writeTable writes a pipe table with its columns padded to a common
// width, so the raw text lines up too.
func writeTable(b *bytes.Buffer, t *Table) {
	ncol := len(t.Header)
	for _, r := range t.Rows {
		ncol = max(ncol, len(r))
	}
	if ncol == 0 {
		return
	}
	right := make([]bool, ncol)
	for _, i := range t.Right {
		if i >= 0 && i < ncol {
			right[i] = true
		}
	}
	cells := func(row []string) []string {
		out := make([]string, ncol)
		for i := range min(len(row), ncol) {
			out[i] = tableCell(row[i])
		}
		return out
	}
	header := cells(t.Header)
	rows := make([][]string, len(t.Rows))
	width := make([]int, ncol)
	for i, h := range header {
		width[i] = max(3, utf8.RuneCountInString(h))
	}
	for i, r := range t.Rows {
		rows[i] = cells(r)
		for j, c := range rows[i] {
			width[j] = max(width[j], utf8.RuneCountInString(c))
		}
	}
	line := func(row []string) {
		b.WriteString("|")
		for i, c := range row {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if right[i] {
				fmt.Fprintf(b, " %s%s |", pad, c)
			} else {
				fmt.Fprintf(b, " %s%s |", c, pad)
			}
		}
		b.WriteString("\n")
	}
	line(header)
	b.WriteString("|")
	for i, w := range width {
		if right[i] {
			fmt.Fprintf(b, " %s: |", strings.Repeat("-", w-1))
		} else {
			fmt.Fprintf(b, " %s |", strings.Repeat("-", w))
		}
	}
	b.WriteString("\n")
	for _, r := range rows {
		line(r)
	}
}

// tableCell escapes a cell, "|" included, and makes a verdict bold.
func tableCell(s string) string {
	c := strings.ReplaceAll(escape(s), "|", `\|`)
	if verdict(s) != "" && c != "" {
		c = "**" + c + "**"
	}
	return c
}

// verdict is "regression" or "improvement" when a cell starts with that
// word (in any case), and "" otherwise.
func verdict(cell string) string {
	for _, v := range []string{"regression", "improvement"} {
		if len(cell) >= len(v) && strings.EqualFold(cell[:len(v)], v) {
			return v
		}
	}
	return ""
}

// escape makes plain text safe inside a Markdown line: line breaks become
// spaces, other control characters "?" (a server's answer may hold an
// escape sequence, and report.md is read in terminals too), and the
// characters that start inline formatting are escaped.
// "_" inside a word (request_total) is left alone: GitHub does not read
// it as emphasis, and metric names stay readable in the raw text.
func escape(s string) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }), " ")
	var b strings.Builder
	prev := rune(0)
	for i, r := range s {
		if unicode.IsControl(r) && r != '\t' {
			b.WriteByte('?')
			prev = r
			continue
		}
		switch r {
		case '\\', '`', '*', '[', ']', '<', '~':
			b.WriteByte('\\')
		case '_':
			next, _ := utf8.DecodeRuneInString(s[i+1:])
			if !isWordRune(prev) || !isWordRune(next) {
				b.WriteByte('\\')
			}
		}
		b.WriteRune(r)
		prev = r
	}
	return b.String()
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// escapeLineStart removes or escapes what would turn a line into
// something else: an indent (a code block), a heading, quote or list
// marker followed by a space ("# ", "> ", "- ", "+ ", "1. ", "1) "), or
// a rule made only of "-" or "=".
func escapeLineStart(s string) string {
	s = strings.TrimLeft(s, " \t")
	if s == "" {
		return s
	}
	if strings.Trim(s, "-") == "" || strings.Trim(s, "=") == "" {
		return `\` + s
	}
	marker := len(s) - len(strings.TrimLeft(s, "0123456789"))
	switch {
	case marker > 0 && marker < len(s) && (s[marker] == '.' || s[marker] == ')'):
		// an ordered list marker: "1." or "1)"
	case strings.ContainsRune("#>-+", rune(s[0])):
		marker = 0
	default:
		return s
	}
	rest := s[marker+1:]
	if s[0] == '#' {
		rest = strings.TrimLeft(s, "#") // "### x" is a heading too
	}
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return s
	}
	return s[:marker] + `\` + s[marker:]
}

// checkChartNames rejects chart names that cannot serve as file name
// stems, or that two charts share.
func checkChartNames(d *Doc) error {
	seen := map[string]bool{}
	for _, b := range d.Blocks {
		var name, title string
		switch c := b.(type) {
		case *Chart:
			name, title = c.Name, c.Title
		case *Flame:
			name, title = c.Name, c.Title
		default:
			continue
		}
		if !validName(name) {
			return fmt.Errorf("chart %q (%s): name must be letters, digits, '.', '-' or '_', not starting with '.'", name, title)
		}
		if seen[name] {
			return fmt.Errorf("chart %q: two charts have this name", name)
		}
		seen[name] = true
	}
	return nil
}

func validName(name string) bool {
	if name == "" || name[0] == '.' {
		return false
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_'
		if !ok {
			return false
		}
	}
	return true
}

// writeFile writes data to path through a temporary file in the same
// directory and a rename, so path holds either its old or its new content.
func writeFile(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	_, werr := f.Write(data)
	err = errors.Join(werr, f.Chmod(0o644), f.Close())
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
