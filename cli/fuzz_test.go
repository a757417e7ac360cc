package cli

import (
	"flag"
	"math"
	"testing"
)

// FuzzFlagValues feeds any text to the flags that parse numbers of their
// own (rates, rate stages, sizes and shares of memory, percentages,
// bounded numbers): none panics, what one takes is within its range, and
// what it takes it prints back as a value it takes again, unchanged.
//
//	go test -run='^$' -fuzz=FuzzFlagValues -fuzztime=2m ./cli/
func FuzzFlagValues(f *testing.F) {
	for _, s := range []string{"500", "500/s", "30/m", "1e7/s", "-1", "NaN", "0/h", "100/s:30s,0/s:1m", "4GiB", "50%", "0", "63MiB", "5%", "0.95", " 7 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var p float64
		values := map[string]flag.Value{
			"rate": &rateValue{}, "stages": &stagesValue{}, "memory": &memory{}, "percent": new(percent),
			"number": &number{p: &p, min: 0.5, max: 1, open: true, want: "a probability in (0.5, 1)"},
		}
		for name, v := range values {
			if v.Set(s) != nil {
				continue
			}
			printed := v.String()
			if err := v.Set(printed); err != nil || v.String() != printed {
				t.Fatalf("--%s %q printed %q, which it reads as %q (%v)", name, s, printed, v.String(), err)
			}
		}
		if r := values["rate"].(*rateValue); r.set && (r.perSecond < 0 || r.perSecond > 1e7 || math.IsNaN(r.perSecond)) {
			t.Fatalf("--rate %q took %v", s, r.perSecond)
		}
		for _, st := range values["stages"].(*stagesValue).stages {
			if st.Target < 0 || st.Target > 1e7 || st.Duration < 0 || st.Duration > maxDuration {
				t.Fatalf("--rate-stages %q took %+v", s, st)
			}
		}
		if pc := float64(*values["percent"].(*percent)); pc < 0 || pc >= 1 {
			t.Fatalf("a percentage %q took %v", s, pc)
		}
		if m := values["memory"].(*memory); m.text != "" {
			if b, share, err := parseMemory(m.text); err != nil || share < 0 || share > 1 || (b > 0 && b < minMemory) {
				t.Fatalf("--max-memory %q took %d bytes, share %v (%v)", s, b, share, err)
			}
		}
		if p != 0 && (p <= 0.5 || p > 1) {
			t.Fatalf("a number in (0.5, 1] took %v from %q", p, s)
		}
	})
}
