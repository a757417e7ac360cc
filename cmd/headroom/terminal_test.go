//go:build linux

package main

import (
	"os"
	"path/filepath"
	"testing"
)

// What reaches a terminal cannot drive it: an escape sequence's ESC, a
// bell, NUL, DEL and the C1 controls print as "?", byte for byte, while
// newlines, the progress line's carriage returns, tabs and other
// characters pass as they are.
func TestTerminalShowsControlCharacters(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "tty"))
	if err != nil {
		t.Fatal(err)
	}
	in := "\x1b[2J\x1b[Hfake\x07 \x00x\x7f \u009b31m é日\r\n\tok"
	n, err := terminal{f}.Write([]byte(in))
	f.Close()
	if err != nil || n != len(in) {
		t.Fatalf("wrote %d of %d: %v", n, len(in), err)
	}
	got, _ := os.ReadFile(f.Name())
	if want := "?[2J?[Hfake? ?x? ??31m é日\r\n\tok"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
