package agents

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// split against the definition (users handed out one by one), and its
// promises: every user placed, none taken back as n grows, each agent at
// least its whole share.
func TestSplit(t *testing.T) {
	byOne := func(n int, w []int) []int {
		out := make([]int, len(w))
		for range n {
			best := 0
			for i := range w {
				if w[i]*(out[best]+1) > w[best]*(out[i]+1) {
					best = i
				}
			}
			out[best]++
		}
		return out
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		w := make([]int, 1+r.IntN(8))
		total := 0
		for i := range w {
			w[i] = 1 + r.IntN(16)
			total += w[i]
		}
		var prev []int
		for n := 0; n <= 300; n++ {
			got := split(n, w)
			if want := byOne(n, w); !slices.Equal(got, want) {
				t.Fatalf("split(%d, %v) = %v, one by one %v", n, w, got, want)
			}
			sum := 0
			for i, a := range got {
				sum += a
				if a < n*w[i]/total || (prev != nil && a < prev[i]) {
					t.Fatalf("split(%d, %v) = %v (before: %v): below the whole share or taken back", n, w, got, prev)
				}
			}
			if sum != n {
				t.Fatalf("split(%d, %v) = %v places %d", n, w, got, sum)
			}
			prev = got
		}
	}
	if got := split(150_000, []int{4, 4, 4}); !slices.Equal(got, []int{50_000, 50_000, 50_000}) {
		t.Errorf("150,000 on three equal agents: %v", got)
	}
}
