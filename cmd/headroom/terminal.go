package main

import (
	"io"
	"os"

	"golang.org/x/term"
)

// terminal is a terminal that what headroom prints cannot drive: what a
// target answered, a server's error or a profile's names reach stderr, and
// an escape sequence among them once cleared the screen and printed text
// of its own. Control characters other than newline, carriage return (the
// progress line's) and tab, DEL and the C1 controls print as "?".
type terminal struct{ f *os.File }

// Write writes p with its control characters shown as "?", byte for byte.
func (t terminal) Write(p []byte) (int, error) {
	var clean []byte
	set := func(i int) {
		if clean == nil {
			clean = append([]byte(nil), p...)
		}
		clean[i] = '?'
	}
	for i, c := range p {
		switch {
		case c < 0x20 && c != '\n' && c != '\r' && c != '\t', c == 0x7f:
			set(i)
		case c == 0xc2 && i+1 < len(p) && p[i+1] >= 0x80 && p[i+1] <= 0x9f: // U+0080-U+009F in UTF-8
			set(i)
			set(i + 1)
		}
	}
	if clean == nil {
		clean = p
	}
	if _, err := t.f.Write(clean); err != nil {
		return 0, err
	}
	return len(p), nil
}

// stdio is w, wrapped as a terminal when it is one.
func stdio(f *os.File) io.Writer {
	if term.IsTerminal(int(f.Fd())) {
		return terminal{f}
	}
	return f
}

func isTerminal(w io.Writer) bool {
	switch w := w.(type) {
	case terminal:
		return true
	case *os.File:
		return term.IsTerminal(int(w.Fd()))
	}
	return false
}
