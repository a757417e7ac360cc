// Package runecut cuts text to a number of bytes on a rune's boundary:
// names and messages from outside that headroom keeps within a bound.
package runecut

import "unicode/utf8"

// Prefix is s's first n bytes at most, ending on a rune's boundary.
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := max(n, 0)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// Mark is Prefix with "…" after it when it cut.
func Mark(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Prefix(s, n) + "…"
}
