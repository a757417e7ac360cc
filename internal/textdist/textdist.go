// Package textdist measures how far apart two names are, for "did you
// mean ...?" suggestions.
package textdist

// Levenshtein is the edit distance of a and b (insertions, deletions and
// substitutions of bytes), or limit+1 once it must be more than limit
// (the lengths alone differ by more); a negative limit means none.
func Levenshtein(a, b string, limit int) int {
	if d := len(a) - len(b); limit >= 0 && (d > limit || -d > limit) {
		return limit + 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
