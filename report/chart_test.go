package report

import (
	"bytes"
	"image/png"
	"math"
	"slices"
	"testing"
)

func TestNiceTicks(t *testing.T) {
	labels := func(lo, hi float64, n int) []string {
		var out []string
		for _, tick := range (niceTicks{n: n}).Ticks(lo, hi) {
			if tick.Label != "" {
				out = append(out, tick.Label)
			}
		}
		return out
	}
	for _, tc := range []struct {
		lo, hi float64
		n      int
		want   []string
	}{
		{0, 299, 8, []string{"0", "50", "100", "150", "200", "250"}},
		{0, 157.5, 6, []string{"0", "50", "100", "150"}},
		{-1, 1, 6, []string{"-1.0", "-0.5", "0.0", "0.5", "1.0"}},
		{0, 0.012, 6, []string{"0.0000", "0.0025", "0.0050", "0.0075", "0.0100"}},
		{1700000000, 1700000600, 8, []string{"1700000000", "1700000100", "1700000200", "1700000300", "1700000400", "1700000500", "1700000600"}},
		{5, 5, 6, nil},
	} {
		if got := labels(tc.lo, tc.hi, tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("ticks(%g, %g) = %q, want %q", tc.lo, tc.hi, got, tc.want)
		}
	}
	// A range far smaller than its values still ends.
	if ticks := (niceTicks{n: 6}).Ticks(1e17, 1e17+64); len(ticks) > 16 {
		t.Errorf("%d ticks for a tiny range at 1e17", len(ticks))
	}
}

// TestChartEdgeCases draws the series a run can produce at its edges:
// one point, X and Y of different lengths, infinities, nothing at all.
func TestChartEdgeCases(t *testing.T) {
	for _, c := range []*Chart{
		{Name: "one", Series: []Series{{Name: "a", X: []float64{3}, Y: []float64{5}}}},
		{Name: "zero", Series: []Series{{Name: "a", X: []float64{3}, Y: []float64{0}}}},
		{Name: "ragged", Series: []Series{{Name: "a", X: []float64{1, 2, 3}, Y: []float64{1, 2}}, {Name: "b", X: []float64{1}, Y: []float64{4, 5}}}},
		{Name: "inf", Series: []Series{{Name: "a", X: []float64{1, 2, 3, 4}, Y: []float64{1, math.Inf(1), 3, 4}}}},
		{Name: "empty"},
		{Name: "nan", Series: []Series{{Name: "a", X: []float64{math.NaN()}, Y: []float64{1}}}},
	} {
		data, err := c.PNG()
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		img, err := png.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		checkChartImage(t, c, img)
		if _, err := c.SVG(); err != nil {
			t.Fatalf("%s: SVG: %v", c.Name, err)
		}
	}
}

func TestChartsDeterministic(t *testing.T) {
	for _, c := range charts(testDoc()) {
		a, err := c.PNG()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := c.PNG()
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two renderings differ", c.Name)
		}
		svg, err := c.SVG()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(svg, []byte("<svg")) || !bytes.Contains(svg, []byte(c.Title)) {
			t.Errorf("%s: SVG lacks <svg> or its title", c.Name)
		}
	}
}
