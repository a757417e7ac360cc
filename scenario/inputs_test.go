package scenario

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"go.starlark.net/starlark"
)

// Mistakes in a scenario's numbers are LoadErrors, before any traffic.
func TestNumericMistakesAreLoadErrors(t *testing.T) {
	const acts = "def a(user):\n    pass\nactions = [action('A', a)]\n"
	for src, want := range map[string]string{
		// time.Duration(1e300 s) wraps around to a negative number
		"think_time = think.constant(1e300)\n":                           "s.star:4:", // and the message below
		"think_time = think.constant(1000000000000000000000000000000)\n": "duration 1000000000000000000000000000000 s is too long: at most 2562047h47m16s",
		"think_time = think.constant(-1e300)\n":                          "duration -1e+300 s is too long",
		"think_time = think.uniform(0, \"3000000h\")\n":                  `duration "3000000h" is too long: at most 2562047h47m16s`,
		"think_time = think.reference(0, \"2000000h\")\n":                "think.reference: avg 2000000h0m0s is too long: at most 1281023h53m38s",
		"think_time = think.uniform(\"2s\", \"1s\")\n":                   "need 0 <= min <= max",
		"checks = []\n": "s.star:4:1: checks is empty",
	} {
		_, err := load("s.star", acts+src)
		var le *LoadError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v\nwant a LoadError holding %q", src, err, want)
		}
	}
	_, err := load("s.star", acts+"think_time = think.constant(1e300)\n")
	if err == nil || !strings.Contains(err.Error(), "duration 1e+300 s is too long: at most 2562047h47m16s (about 292 years)") {
		t.Errorf("think.constant(1e300): %v", err)
	}
	_, err = load("s.star", acts+"checks = []\n")
	if err == nil || !strings.Contains(err.Error(), "hint: give at least one check(...), or remove checks to use the defaults") {
		t.Errorf("checks = []: %v", err)
	}

	path := filepath.Join(t.TempDir(), "c.star")
	if err := os.WriteFile(path, []byte("checks = []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadChecksFile(context.Background(), path, Limits{})
	var le *LoadError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "checks is empty") || !strings.Contains(err.Error(), "leave out --checks") {
		t.Errorf("a --checks file with checks = []: %v", err)
	}
}

func TestDurationsAtTheEdges(t *testing.T) {
	for _, s := range []string{"0", "1.5s", ".5ms", "1h2m3s", "-2s", "2562047h"} {
		want, _ := time.ParseDuration(s)
		if got, err := Duration(starlark.String(s)); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"soon", "1", "1.5.5s", "", "1e3s"} {
		if _, err := Duration(starlark.String(s)); err == nil || !strings.Contains(err.Error(), "bad duration") {
			t.Errorf("%q: %v, want a bad duration", s, err)
		}
	}
}

// Weights are relative: two of 1e308 make a sum that overflows to +Inf,
// after which only one action ever ran.
func TestHugeWeightsKeepTheirProportion(t *testing.T) {
	for _, c := range []struct {
		weights string
		share   float64 // of the first action
	}{
		{"1e308, 1e308", 0.5},
		{"1e308, 1e307", 10.0 / 11},
		{"1.7e308, 1.7e308", 0.5},
		{"6.5, 1", 6.5 / 7.5},
	} {
		w := strings.Split(c.weights, ", ")
		sc, err := load("w.star", "def a(user):\n    pass\nactions = [action('A', a, weight="+w[0]+"), action('B', a, weight="+w[1]+")]\n")
		if err != nil {
			t.Fatal(err)
		}
		u := NewUser(sc, Env{ID: 1, Seed: 1, Record: &samples{}})
		const n = 20_000
		first := 0
		for range n {
			if u.Next() == sc.Actions[0] {
				first++
			}
		}
		if got := float64(first) / n; math.Abs(got-c.share) > 0.02 {
			t.Errorf("weights %s: first action's share %.3f, want %.3f", c.weights, got, c.share)
		}
	}
}

func TestRequestArgumentsOutOfRangeFailTheAction(t *testing.T) {
	for src, want := range map[string]string{
		"user.http.get('/x', timeout=-1)":                                    "timeout= must be more than 0, got -1s; leave it out for the run's --timeout",
		"user.http.get('/x', timeout=0)":                                     "timeout= must be more than 0, got 0s",
		"user.http.get('/x', timeout=1e300)":                                 "timeout=: duration 1e+300 s is too long",
		"user.http.get('/x', expect=1000000000000)":                          "expect= holds 1000000000000, which no response has: statuses are 100 to 999",
		"user.http.get('/x', expect=-1)":                                     "expect= holds -1, which no response has",
		"user.http.get('/x', expect=[200, 1000000000000000000000000000000])": "expect= holds 1000000000000000000000000000000, which no response has",
		"user.http.get('/x', expect=[])":                                     "expect= is empty, so no response could succeed",
		"user.rand.chance(2)":                                                "rand.chance: p is 2, want a probability in [0, 1]",
		"user.rand.chance(float('nan'))":                                     "rand.chance: p is nan, want a probability in [0, 1]",
		"user.rand.int(3, 2)":                                                "rand.int: hi 2 < lo 3",
	} {
		d := &fakeDoer{status: 200}
		rec, out := runAction(t, "def act(user):\n    "+src+"\n", d)
		if msg := last(rec).Message; out != metrics.Failed || !strings.Contains(msg, want) {
			t.Errorf("%s: outcome %v, message %q; want %q", src, out, msg, want)
		}
		if len(d.sent) != 0 {
			t.Errorf("%s: sent %d requests", src, len(d.sent))
		}
	}
}

func TestRandAtTheEdges(t *testing.T) {
	// int: hi - lo + 1 overflowed to 0 here, and IntN(0) panics.
	// chance: an int was refused ("got int, want float").
	rec, out := runAction(t, `
def act(user):
    if not user.rand.chance(1) or user.rand.chance(0):
        fail("chance(1) or chance(0)")
    for i in range(200):
        x = user.rand.int(-9223372036854775808, 9223372036854775807)
        if user.rand.int(5, 5) != 5:
            fail("int(5, 5)")
        y = user.rand.int(-9223372036854775808, -9223372036854775807)
        if y != -9223372036854775808 and y != -9223372036854775807:
            fail("int near the bottom: %d" % y)
        z = user.rand.int(4611686018427387904, 9223372036854775807)
        if z < 4611686018427387904:
            fail("int near the top: %d" % z)
`, &fakeDoer{})
	if out != metrics.OK {
		t.Fatalf("outcome %v: %q", out, last(rec).Message)
	}
}

func TestThinkTimesNeverWrapAround(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, th := range []Think{
		Exponential{MeanD: maxDuration / 3, Max: maxDuration},
		Reference{Min: 0, Avg: time.Hour, Rates: []Rate{{Rate: 1e300, Share: 1}}},
		Constant(time.Hour),
	} {
		f := th.Factor(r)
		for range 1000 {
			if d := th.Next(r, f); d < 0 {
				t.Fatalf("%#v: a pause of %v", th, d)
			}
		}
		if m := th.Mean(); m < 0 {
			t.Errorf("%#v: mean %v", th, m)
		}
	}
	// think.exponential's default max, 10 times the mean, saturates.
	sc, err := load("s.star", "def a(user):\n    pass\nactions = [action('A', a)]\nthink_time = think.exponential('2000000h')\n")
	if err != nil {
		t.Fatal(err)
	}
	if e := sc.Types[0].Think.(Exponential); e.Max != maxDuration {
		t.Errorf("max %v, want %v", e.Max, maxDuration)
	}
	// Shares too are relative: two of 1e308 both get users.
	ref := Reference{Avg: time.Second, Rates: []Rate{{Rate: 1, Share: 1e308}, {Rate: 2, Share: 1e308}}}
	twos := 0
	for range 1000 {
		if ref.Factor(r) == 2 {
			twos++
		}
	}
	if twos < 400 || twos > 600 {
		t.Errorf("%d of 1000 users drew the second rate, want about half", twos)
	}
	if m := ref.Mean(); m != 1500*time.Millisecond {
		t.Errorf("mean %v, want 1.5s", m)
	}
}
