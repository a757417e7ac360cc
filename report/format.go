package report

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// num formats a figure with about three significant digits and thousands
// separators: 0.123, 12.3, 1,234; "-" for NaN.
func num(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "-"
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return thousands(int64(v))
	case math.Abs(v) >= 1000:
		return thousands(int64(math.Round(v)))
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case math.Abs(v) >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func count(n int64) string { return thousands(n) }

// errPct is the share of failed or timed-out requests, in percent.
func errPct(s metrics.Summary) string {
	if s.Count == 0 {
		return "-"
	}
	return pctText(100 * float64(s.Errors+s.Timeouts) / float64(s.Count))
}

func pctText(p float64) string {
	if p == 0 {
		return "0%"
	}
	if p < 0.01 {
		return "<0.01%"
	}
	return num(p) + "%"
}

func seconds(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Second).String()
}

// summaryTable is the per-request (or per-action) table of one span.
func summaryTable(first string, ss []metrics.Summary) *Table {
	t := &Table{
		Header: []string{first, "count", "req/s", "mean (ms)", "p50 (ms)", "p95 (ms)", "p99 (ms)", "max (ms)", "errors", "timeouts"},
		Right:  []int{1, 2, 3, 4, 5, 6, 7, 8, 9},
	}
	noReq := anyNoRequest(ss)
	if noReq {
		t.Header = append(t.Header, "no request")
		t.Right = append(t.Right, len(t.Header)-1)
	}
	for _, s := range ss {
		row := []string{s.Name, count(s.Count), num(s.RPS), num(s.MeanMs), num(s.P50Ms), num(s.P95Ms),
			num(s.P99Ms), num(s.MaxMs), errPct(s), count(s.Timeouts)}
		if noReq {
			row = append(row, count(s.NoRequest))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// NoRequestNote explains the "no request" column of an action table.
const NoRequestNote = "no request: how many of the action's runs sent no request (nothing to do yet, as editing a post " +
	"when the user has none): their latency is the scenario's own code, not a server's."

// anyNoRequest reports whether an action of ss sent no request at least once.
func anyNoRequest(ss []metrics.Summary) bool {
	for _, s := range ss {
		if s.NoRequest > 0 {
			return true
		}
	}
	return false
}

// series builds a chart line from a timeline.
func series(name string, tl []metrics.Point, y func(metrics.Point) float64, dashed bool) Series {
	s := Series{Name: name, Dashed: dashed}
	for _, p := range tl {
		s.X = append(s.X, p.T)
		s.Y = append(s.Y, y(p))
	}
	return s
}

// timelineCharts are the charts of one or more runs' timelines, each run
// one line: users, requests/s, mean and p99 latency, errors/s.
func timelineCharts(prefix string, runs []namedRun) []Block {
	specs := []struct {
		name, title, y string
		f              func(metrics.Point) float64
	}{
		{"users", "Users over time", "users", func(p metrics.Point) float64 { return float64(p.Users) }},
		{"rps", "Requests per second", "requests/s", func(p metrics.Point) float64 { return p.RPS }},
		{"mean", "Mean latency", "mean (ms)", func(p metrics.Point) float64 { return nanIfNone(p, p.MeanMs) }},
		{"p99", "p99 latency", "p99 (ms)", func(p metrics.Point) float64 { return nanIfNone(p, p.P99Ms) }},
		{"errors", "Errors and timeouts per second", "errors/s", func(p metrics.Point) float64 { return float64(p.Errors + p.Timeouts) }},
	}
	var out []Block
	for _, sp := range specs {
		c := &Chart{Name: prefix + sp.name, Title: sp.title, XLabel: "time since start (s)", YLabel: sp.y}
		for _, r := range runs {
			c.Series = append(c.Series, series(r.name, r.res.Timeline, sp.f, r.dashed))
		}
		out = append(out, c)
	}
	return append(out, connectedCharts(prefix, runs)...)
}

// nanNone is a point a chart leaves out.
var nanNone = math.NaN()

func nanIfNone(p metrics.Point, v float64) float64 {
	if p.Requests == 0 {
		return math.NaN()
	}
	return v
}

// namedRun is one run's line in a chart.
type namedRun struct {
	name   string
	res    *result.Result
	dashed bool
}

// serverCharts are CPU, memory and goroutines of each scraped endpoint
// over time, one line per run.
func serverCharts(prefix string, runs []namedRun) []Block {
	n := 0
	for _, r := range runs {
		if r.res.Server != nil {
			n = max(n, len(r.res.Server.Targets))
		}
	}
	var out []Block
	for i := range n {
		specs := []struct {
			key, title, y string
			f             func(result.ServerPoint) float64
		}{
			{"cpu", "CPU", "cores", func(p result.ServerPoint) float64 { return p.CPUCores }},
			{"memory", "Memory", "MiB", func(p result.ServerPoint) float64 { return p.MemoryMB }},
			{"goroutines", "Goroutines", "goroutines", func(p result.ServerPoint) float64 { return p.Goroutines }},
		}
		for _, sp := range specs {
			c := &Chart{Name: fmt.Sprintf("%sserver%d-%s", prefix, i+1, sp.key), XLabel: "time since start (s)", YLabel: sp.y}
			for _, r := range runs {
				if r.res.Server == nil || i >= len(r.res.Server.Targets) {
					continue
				}
				tg := r.res.Server.Targets[i]
				if !has(tg.Has, sp.key) {
					continue
				}
				c.Title = fmt.Sprintf("%s of %s (%s)", sp.title, tg.Instance, tg.Kind)
				s := Series{Name: r.name, Dashed: r.dashed}
				for _, p := range tg.Timeline {
					s.X, s.Y = append(s.X, p.T), append(s.Y, sp.f(p))
				}
				c.Series = append(c.Series, s)
			}
			if len(c.Series) > 0 {
				out = append(out, c)
			}
		}
		out = append(out, timingCharts(prefix, runs, i)...)
	}
	return out
}

// timingCharts are the server's latency families (API time, store time)
// over time for endpoint i: each scrape's mean over the requests since the
// one before, one line per run.
func timingCharts(prefix string, runs []namedRun, i int) []Block {
	titles := map[string]string{}
	for _, r := range runs {
		if r.res.Server == nil || i >= len(r.res.Server.Targets) {
			continue
		}
		for _, g := range r.res.Server.Targets[i].Window.Timings {
			titles[g.Metric] = g.Title
		}
		for _, p := range r.res.Server.Targets[i].Timeline {
			for m := range p.MeanMs {
				if titles[m] == "" {
					titles[m] = m
				}
			}
		}
	}
	var metrics []string
	for m := range titles {
		metrics = append(metrics, m)
	}
	sort.Strings(metrics)
	var out []Block
	for j, m := range metrics {
		c := &Chart{Name: fmt.Sprintf("%sserver%d-timing%d", prefix, i+1, j+1), Title: titles[m] + ": mean over time (" + m + ")",
			XLabel: "time since start (s)", YLabel: "mean (ms)"}
		for _, r := range runs {
			if r.res.Server == nil || i >= len(r.res.Server.Targets) {
				continue
			}
			s := Series{Name: r.name, Dashed: r.dashed}
			for _, p := range r.res.Server.Targets[i].Timeline {
				v, ok := p.MeanMs[m]
				if !ok {
					v = math.NaN()
				}
				s.X, s.Y = append(s.X, p.T), append(s.Y, v)
			}
			c.Series = append(c.Series, s)
		}
		out = append(out, c)
	}
	return out
}

func has(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// timingTables are a server window's latency families as tables.
func timingTables(w result.ServerWindow) []Block {
	var out []Block
	for _, g := range w.Timings {
		t := &Table{Header: []string{g.Label, "count", "per s", "mean (ms)", "p99 (ms, buckets)"}, Right: []int{1, 2, 3, 4}}
		what := g.Metric
		if g.Type == "summary" {
			what += ", a summary: no p99"
		}
		for _, it := range g.Items {
			p99 := num(it.P99Ms)
			if g.Type == "summary" {
				p99 = "–"
			}
			t.Rows = append(t.Rows, []string{it.Name, count(int64(math.Round(it.Count))), num(it.RPS), num(it.MeanMs), p99})
		}
		out = append(out, &Para{Text: g.Title + " (" + what + "):"}, t)
	}
	return out
}
