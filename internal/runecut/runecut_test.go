package runecut

import (
	"testing"
	"unicode/utf8"
)

func TestCutsOnARunesBoundary(t *testing.T) {
	for _, c := range []struct {
		s      string
		n      int
		prefix string
		mark   string
	}{
		{"abc", 5, "abc", "abc"},
		{"abc", 3, "abc", "abc"},
		{"abcdef", 3, "abc", "abc…"},
		{"aé", 2, "a", "a…"}, // é is 2 bytes: not cut inside it
		{"é", 0, "", "…"},
	} {
		if got := Prefix(c.s, c.n); got != c.prefix || !utf8.ValidString(got) {
			t.Errorf("Prefix(%q, %d) = %q, want %q", c.s, c.n, got, c.prefix)
		}
		if got := Mark(c.s, c.n); got != c.mark {
			t.Errorf("Mark(%q, %d) = %q, want %q", c.s, c.n, got, c.mark)
		}
	}
}
