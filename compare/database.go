package compare

import (
	"fmt"
	"math"

	"github.com/headroom-dev/headroom/result"
)

// dbSpan is a database endpoint's work over one run's span, and the
// units of the span (the requests the run's users made in it, or the
// users set up).
type dbSpan struct {
	d        *result.DatabaseWork
	requests float64
}

// dbFigures are what a database counts a unit of work: its statements
// (MySQL, MariaDB) or transactions (PostgreSQL), and the rows it read.
var dbFigures = []struct {
	name   string
	system string // "" for every system
	of     func(*result.DatabaseWork) float64
}{
	{"queries", "mysql", func(d *result.DatabaseWork) float64 { return d.Queries }},
	{"transactions", "postgresql", func(d *result.DatabaseWork) float64 { return d.Transactions }},
	{"rows read", "", func(d *result.DatabaseWork) float64 { return d.RowsRead }},
}

// compareDatabase judges scrape endpoint i's database work a unit ("a
// request", "a user set up"), one Metric a figure its system counts; nil
// unless every run of both sides has it, from the same system.
func compareDatabase(i int, unit string, base, new []dbSpan, o Options) []Metric {
	if len(base) == 0 || len(new) == 0 {
		return nil
	}
	system := ""
	for _, s := range append(append([]dbSpan{}, base...), new...) {
		if s.d == nil || (system != "" && s.d.System != system) {
			return nil
		}
		system = s.d.System
	}
	perRequest := func(s dbSpan, of func(*result.DatabaseWork) float64) float64 {
		if s.requests <= 0 {
			return math.NaN()
		}
		return of(s.d) / s.requests
	}
	var out []Metric
	for _, f := range dbFigures {
		if f.system != "" && f.system != system {
			continue
		}
		m := Metric{Name: fmt.Sprintf("database %d (%s) %s %s", i+1, system, f.name, unit)}
		for _, s := range base {
			m.BaseRuns = append(m.BaseRuns, perRequest(s, f.of))
		}
		for _, s := range new {
			m.NewRuns = append(m.NewRuns, perRequest(s, f.of))
		}
		m.Base, m.New = mean(m.BaseRuns), mean(m.NewRuns)
		m.judge(o)
		out = append(out, m)
	}
	return out
}
