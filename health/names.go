package health

import (
	"slices"
	"sort"
	"strings"

	"github.com/headroom-dev/headroom/internal/textdist"
	"github.com/headroom-dev/headroom/prom"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// Metrics returns the metric names the check's query selects by name (x in
// rate(x[1m]), or {__name__="x"}), each once, in the order they appear; nil
// if the query does not parse. A selector by a regular expression on the
// name names none.
func (c Check) Metrics() []string {
	expr, err := prom.Parse(c.Query)
	if err != nil {
		return nil
	}
	var out []string
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name != "" && !slices.Contains(out, name) {
			out = append(out, name)
		}
		return nil
	})
	return out
}

// Nearest returns up to n of names nearest to name, nearest first: those
// within a third of name's length in edits (insert, delete or replace one
// character; at least 2 allowed) and within 3 edits of the nearest, ties
// in alphabetical order. A typo (respones for response) finds its metric
// alone; a family named without its suffix finds its _sum, _count and
// _bucket; an unrelated name finds none.
func Nearest(name string, names []string, n int) []string {
	limit := max(2, len(name)/3)
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for _, m := range names {
		if d := textdist.Levenshtein(name, m, limit); d <= limit {
			cs = append(cs, cand{m, d})
		}
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].d != cs[j].d {
			return cs[i].d < cs[j].d
		}
		return cs[i].name < cs[j].name
	})
	var out []string
	for _, c := range cs[:min(n, len(cs))] {
		if c.d > cs[0].d+3 {
			break
		}
		out = append(out, c.name)
	}
	return out
}

// Synthetic reports whether headroom itself makes a metric rather than a
// scraped target: its own loadtest_* metrics (they exist once traffic
// starts) and the up and scrape_duration_seconds series the Scraper adds
// for every target.
func Synthetic(name string) bool {
	return strings.HasPrefix(name, "loadtest_") || name == "up" || name == "scrape_duration_seconds"
}
