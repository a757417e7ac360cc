package scenario

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestThinkDistributions(t *testing.T) {
	cases := []struct {
		name     string
		think    Think
		min, max time.Duration // every draw in [min, max]
	}{
		{"constant", Constant(time.Second), time.Second, time.Second},
		{"uniform", Uniform{Min: time.Second, Max: 3 * time.Second}, time.Second, 3 * time.Second},
		{"exponential", Exponential{MeanD: time.Second, Max: 10 * time.Second}, 0, 10 * time.Second},
		// factor 1: [min, 2*avg - min)
		{"reference", Reference{Min: time.Second, Avg: 5 * time.Second, Rates: []Rate{{1, 1}}}, time.Second, 9 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			const n = 200000
			sum := 0.0
			for range n {
				f := c.think.Factor(r)
				d := c.think.Next(r, f)
				if d < c.min || d > c.max {
					t.Fatalf("draw %v outside [%v, %v]", d, c.min, c.max)
				}
				sum += float64(d)
			}
			mean := sum / n
			want := float64(c.think.Mean())
			if math.Abs(mean-want)/want > 0.01 {
				t.Errorf("mean of %d draws = %v, want %v ± 1%%", n, time.Duration(mean), c.think.Mean())
			}
		})
	}
}

func TestReferenceRateFactorIsDrawnByShare(t *testing.T) {
	ref := Reference{Min: 0, Avg: time.Second, Rates: []Rate{{Rate: 5.4, Share: 0.25}, {Rate: 1, Share: 0.75}}}
	r := rand.New(rand.NewPCG(3, 4))
	fast := 0
	const users = 100000
	for range users {
		if ref.Factor(r) == 5.4 {
			fast++
		}
	}
	if share := float64(fast) / users; math.Abs(share-0.25) > 0.01 {
		t.Errorf("share of users with rate 5.4 = %.3f, want 0.25", share)
	}
	// the factor multiplies the pause
	if d := ref.Next(rand.New(rand.NewPCG(5, 6)), 5.4); d > time.Duration(5.4*2*float64(time.Second)) {
		t.Errorf("pause %v exceeds 5.4 x 2 s", d)
	}
	if got, want := ref.Mean(), time.Duration((0.25*5.4+0.75)*float64(time.Second)); got != want {
		t.Errorf("mean %v, want %v", got, want)
	}
}
