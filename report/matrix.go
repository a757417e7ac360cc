package report

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/headroom-dev/headroom/result"
)

// Group is one configuration of a ceiling matrix and its repeats.
type Group struct {
	Name    string
	Dirs    []string
	Results []*result.Result
}

// ForMatrix is the ceiling-tests table: one row per configuration with
// the supported users (mean of its repeats, and their spread) and the
// bottleneck, then every run.
func ForMatrix(groups []Group) *Doc {
	d := &Doc{Title: "headroom ceiling matrix"}
	t := &Table{Header: []string{"configuration", "setup", "runs", "supported users (mean)", "repeats", "spread", "req/s at ceiling", "bottleneck"},
		Right: []int{2, 3, 5, 6}}
	runs := &Table{Header: []string{"configuration", "run", "supported users", "interval", "found in", "bottleneck", "trustworthy"}, Right: []int{2, 4}}
	for _, g := range groups {
		var users, rps []float64
		firsts := map[string]int{}
		for i, r := range g.Results {
			ci := r.Ceiling
			su := ci.SupportedUsers
			b := firstCheck(ci)
			trust := "yes"
			if !ci.Trustworthy {
				trust = "no: " + ci.Untrusted
			}
			value, iv := "not found", su.Why
			if su.Found {
				users, rps = append(users, su.Value), append(rps, ci.ThroughputRPS)
				firsts[b]++
				value, iv = num(su.Value), interval(su)
			}
			runs.Rows = append(runs.Rows, []string{g.Name, g.Dirs[i], value, iv, seconds(ci.SearchSeconds), b, trust})
		}
		row := []string{g.Name, setup(g.Results), fmt.Sprint(len(g.Results)), "-", "-", "-", "-", "-"}
		if len(users) > 0 {
			lo, hi := minMax(users)
			row[3] = num(avg(users))
			row[4] = strings.Join(nums(users), ", ")
			row[5] = fmt.Sprintf("%s%%", num(100*(hi-lo)/avg(users)))
			row[6] = num(avg(rps))
			row[7] = mostCommon(firsts, len(users))
		}
		t.Rows = append(t.Rows, row)
	}
	d.Blocks = []Block{
		&Para{Text: "Supported users: the most users at which every health check stayed under its threshold; the mean of each configuration's repeats that found a ceiling. Spread: (max - min) / mean of the repeats. Bottleneck: the check that fired first, in how many of the repeats."},
		t,
		&Heading{Level: 2, Text: "Runs"},
		runs,
	}
	c := &Chart{Name: "matrix-users", Title: "Supported users per repeat", XLabel: "repeat", YLabel: "users"}
	for _, g := range groups {
		s := Series{Name: g.Name}
		for i, r := range g.Results {
			v := math.NaN()
			if r.Ceiling.SupportedUsers.Found {
				v = r.Ceiling.SupportedUsers.Value
			}
			s.X, s.Y = append(s.X, float64(i+1)), append(s.Y, v)
		}
		c.Series = append(c.Series, s)
	}
	d.Blocks = append(d.Blocks, c)
	return d
}

// setup is what the repeats say they are (--label), else their target.
func setup(rs []*result.Result) string {
	var labels []string
	for _, r := range rs {
		l := r.Config.Label
		if l == "" {
			l = r.Config.Target
		}
		if !slices.Contains(labels, l) {
			labels = append(labels, l)
		}
	}
	return strings.Join(labels, "; ")
}

func firstCheck(ci *result.Ceiling) string {
	var names []string
	for _, b := range ci.Bottleneck {
		if b.First {
			names = append(names, b.Check)
		}
	}
	if len(names) == 0 {
		return "none fired"
	}
	return strings.Join(names, " + ")
}

func mostCommon(m map[string]int, of int) string {
	type kv struct {
		k string
		v int
	}
	var xs []kv
	for k, v := range m {
		xs = append(xs, kv{k, v})
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].v > xs[j].v || xs[i].v == xs[j].v && xs[i].k < xs[j].k })
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf("%s (%d of %d)", x.k, x.v, of))
	}
	return strings.Join(parts, "; ")
}

func avg(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func minMax(xs []float64) (float64, float64) {
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}

func nums(xs []float64) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = num(x)
	}
	return out
}
