package compare

import (
	"fmt"
	"math"
	"slices"

	"github.com/headroom-dev/headroom/result"
)

// LevelSpan is one step level both sides held.
type LevelSpan struct {
	Users int `json:"users"`
	Span
	// ServerCPU is, for each endpoint every run scraped (by position, as
	// Comparison.Server), the server's CPU a request over the level's held
	// window: its CPU (cores, mean) over the requests a second it served
	// (every request of the level), in milliseconds.
	ServerCPU []Metric `json:"server_cpu_per_request_ms,omitempty"`
	// Database is, for each database exporter every run scraped, its work
	// a request over the level's held window (compareDatabase).
	Database []Metric `json:"database_per_request,omitempty"`
}

// Onset is where one request's (or action's) latency first changed, level
// by level: the lowest level at which one of its figures (mean, p50, p95,
// p99) was judged a regression or an improvement, and every level that was.
type Onset struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // "request" or "action"
	// Users is the first level with a verdict; Verdict the verdict there
	// (a regression of any figure before an improvement of another), with
	// the figures that had it and the first one's change as DeltaText.
	Users   int      `json:"users"`
	Verdict string   `json:"verdict"`
	Figures []string `json:"figures"`
	Change  string   `json:"change"`
	// Levels are all the levels where a figure was judged Verdict; Of how
	// many levels both sides made the request at.
	Levels []int `json:"levels"`
	Of     int   `json:"of"`
}

// compareLevels compares the step levels that every run of both sides
// held, and returns the others apart.
func compareLevels(base, new *Side, o Options) ([]LevelSpan, []int) {
	held := func(s *Side) map[int][]window {
		out := map[int][]window{}
		for _, r := range s.Runs {
			for _, l := range r.Result.Step.Levels {
				out[l.Users] = append(out[l.Users], newWindow(l.Requests, l.Actions, r.Levels[l.Users]))
			}
		}
		return out
	}
	b, n := held(base), held(new)
	var users, apart []int
	for _, m := range []map[int][]window{b, n} {
		for u := range m {
			if slices.Contains(users, u) || slices.Contains(apart, u) {
				continue
			}
			if len(b[u]) == len(base.Runs) && len(n[u]) == len(new.Runs) {
				users = append(users, u)
			} else {
				apart = append(apart, u)
			}
		}
	}
	slices.Sort(users)
	slices.Sort(apart)
	var out []LevelSpan
	for _, u := range users {
		out = append(out, LevelSpan{Users: u, Span: compareSpan(b[u], n[u], o), ServerCPU: levelServerCPU(base, new, u, o), Database: levelDatabase(base, new, u, o)})
	}
	return out, apart
}

// levelServerCPU is the server's CPU a request at the level of users, for
// each endpoint that every run scraped there; nil when some run has none.
func levelServerCPU(base, new *Side, users int, o Options) []Metric {
	perRun := func(s *Side) [][]float64 { // [run][endpoint]
		var out [][]float64
		for _, r := range s.Runs {
			for _, l := range r.Result.Step.Levels {
				if l.Users != users {
					continue
				}
				var ms []float64
				for _, w := range l.Server {
					ms = append(ms, cpuPerRequest(w, l.Totals.RPS))
				}
				out = append(out, ms)
			}
		}
		return out
	}
	b, n := perRun(base), perRun(new)
	if len(b) == 0 || len(n) == 0 {
		return nil
	}
	endpoints := len(b[0])
	for _, runs := range append(b, n...) {
		endpoints = min(endpoints, len(runs))
	}
	var out []Metric
	for i := range endpoints {
		if math.IsNaN(b[0][i]) && math.IsNaN(n[0][i]) {
			continue // a database exporter: levelDatabase's
		}
		m := Metric{Name: fmt.Sprintf("server %d CPU a request (ms)", i+1), Unit: "ms"}
		for _, runs := range b {
			m.BaseRuns = append(m.BaseRuns, runs[i])
		}
		for _, runs := range n {
			m.NewRuns = append(m.NewRuns, runs[i])
		}
		m.Base, m.New = mean(m.BaseRuns), mean(m.NewRuns)
		m.judge(o)
		out = append(out, m)
	}
	return out
}

// levelDatabase is each database endpoint's work a request at the level
// of users.
func levelDatabase(base, new *Side, users int, o Options) []Metric {
	spans := func(s *Side, i int) []dbSpan {
		var out []dbSpan
		for _, r := range s.Runs {
			for _, l := range r.Result.Step.Levels {
				if l.Users == users {
					if i >= len(l.Server) {
						return nil
					}
					out = append(out, dbSpan{l.Server[i].Database, float64(l.Totals.Count)})
				}
			}
		}
		return out
	}
	var out []Metric
	for i := 0; ; i++ {
		b, n := spans(base, i), spans(new, i)
		if b == nil || n == nil {
			return out
		}
		out = append(out, compareDatabase(i, "a request", b, n, o)...)
	}
}

// cpuPerRequest is a window's CPU over the requests a second it served, in
// milliseconds a request (NaN, no data, when it served none).
func cpuPerRequest(w result.ServerWindow, rps float64) float64 {
	if rps <= 0 || w.Database != nil { // an exporter's CPU is not the database's
		return math.NaN()
	}
	return 1000 * w.CPUCoresMean / rps
}

// onsets finds, for every request and action, the first level at which a
// latency figure changed; those that changed at no level are left out.
// judgedFigures is how many latency figures (mean, p50, p95, p99 of every
// row at every level) were judged at all: at a confidence c, about
// (1−c) of them are judged a change by chance alone.
func onsets(levels []LevelSpan) (out []Onset, judgedFigures int) {
	for _, kind := range []string{"action", "request"} {
		byName := map[string]*Onset{}
		var order []string
		for _, l := range levels {
			rows := l.Requests
			if kind == "action" {
				rows = l.Actions
			}
			for _, r := range rows {
				on := byName[r.Name]
				if on == nil {
					on = &Onset{Name: r.Name, Kind: kind}
					byName[r.Name] = on
					order = append(order, r.Name)
				}
				on.Of++
				for _, m := range []*Metric{&r.Mean, &r.P50, &r.P95, &r.P99} {
					if m.Verdict == Regression || m.Verdict == Improvement || m.Verdict == NoChange {
						judgedFigures++
					}
				}
				verdict, figures, first := judged(r)
				switch {
				case verdict == "":
				case on.Verdict == "":
					on.Users, on.Verdict, on.Figures, on.Change = l.Users, verdict, figures, first.DeltaText()
					on.Levels = []int{l.Users}
				case verdict == on.Verdict:
					on.Levels = append(on.Levels, l.Users)
				}
			}
		}
		for _, name := range order {
			if on := byName[name]; on.Verdict != "" {
				out = append(out, *on)
			}
		}
	}
	return out, judgedFigures
}

// judged is a row's latency verdict: regression when any of mean, p50,
// p95 and p99 regressed, else improvement when any improved, else "";
// with the figures that did and the first of them.
func judged(r Row) (verdict string, figures []string, first *Metric) {
	latency := []struct {
		name string
		m    *Metric
	}{{"mean", &r.Mean}, {"p50", &r.P50}, {"p95", &r.P95}, {"p99", &r.P99}}
	for _, v := range []string{Regression, Improvement} {
		for _, f := range latency {
			if f.m.Verdict == v {
				if first == nil {
					first = f.m
				}
				figures = append(figures, f.name)
			}
		}
		if first != nil {
			return v, figures, first
		}
	}
	return "", nil, nil
}
