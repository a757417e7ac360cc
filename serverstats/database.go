package serverstats

import (
	"math"
	"slices"

	dto "github.com/prometheus/client_model/go"

	"github.com/headroom-dev/headroom/result"
)

// A database's work, from its exporter's counters (an endpoint given to
// --scrape that is mysqld_exporter or postgres_exporter): what the
// database did over a span, which the reports give per request of the
// span, so that a release that sends more queries a request shows as such.
//
// The counters, each checked against the exporter's output here
// (prometheus-mysqld-exporter 0.14 on MariaDB 10.11, and
// prometheus-postgres-exporter 0.11 on PostgreSQL 15):
//
//   - MySQL and MariaDB: queries are the data statements the server ran,
//     mysql_global_status_commands_total of the commands in dataCommands
//     (SHOW, SET and the like left out: the exporter sends a SELECT and
//     three SHOWs a scrape, so one of its own a second is counted); rows
//     read are MariaDB's mysql_global_status_rows_read (rows read from
//     tables, temporary ones left out: SHOW STATUS reads ~560 rows into
//     one a scrape) or else MySQL's InnoDB rows read,
//     mysql_global_status_innodb_row_ops_total{operation="read"}.
//   - PostgreSQL: its statistics count no statements, so transactions,
//     pg_stat_database_xact_commit and _xact_rollback; rows read are
//     pg_stat_database_tup_returned (rows the scans returned); the
//     application's databases added up, which leaves out the exporter's
//     own (~12 transactions and ~400 rows a scrape, in "postgres", where
//     it connects by default) and the templates, unless "postgres" is the
//     only one with work.

// dataCommands are MySQL's Com_* counters of data statements.
var dataCommands = []string{"select", "insert", "insert_select", "update", "update_multi", "delete", "delete_multi", "replace", "replace_select", "call_procedure"}

// Keys of a target's database counters among its histograms (a counter is
// a cum with only count), so that marks keep them as they keep the
// latency families. Their family names cannot be a metric's: a space.
var (
	dbQueries      = key{family: "db queries"}
	dbTransactions = key{family: "db transactions"}
	dbRowsRead     = key{family: "db rows read"}
)

// databaseCounters reads the counters of a database exporter; system is
// "" when the endpoint is none.
func databaseCounters(m map[string]*dto.MetricFamily) (system string, counts map[key]float64) {
	sum := func(name, lbl string, values ...string) float64 {
		mf := m[name]
		if mf == nil {
			return math.NaN()
		}
		total := 0.0
		for _, s := range mf.GetMetric() {
			if lbl == "" || slices.Contains(values, label(s, lbl)) {
				total += value(s)
			}
		}
		return total
	}
	counts = map[key]float64{}
	switch {
	case m["mysql_global_status_commands_total"] != nil:
		counts[dbQueries] = sum("mysql_global_status_commands_total", "command", dataCommands...)
		counts[dbRowsRead] = sum("mysql_global_status_rows_read", "")
		if math.IsNaN(counts[dbRowsRead]) {
			counts[dbRowsRead] = sum("mysql_global_status_innodb_row_ops_total", "operation", "read")
		}
		system = "mysql"
	case m["pg_stat_database_xact_commit"] != nil:
		apps := appDatabases(m["pg_stat_database_xact_commit"])
		counts[dbTransactions] = sum("pg_stat_database_xact_commit", "datname", apps...) + sum("pg_stat_database_xact_rollback", "datname", apps...)
		counts[dbRowsRead] = sum("pg_stat_database_tup_returned", "datname", apps...)
		system = "postgresql"
	default:
		return "", nil
	}
	for k, v := range counts {
		if math.IsNaN(v) {
			delete(counts, k)
		}
	}
	return system, counts
}

// database is what a database did between two states of its counters;
// nil when the endpoint is no database, or a state lacks them (a span
// that began before the first scrape).
func database(system string, from, to map[key]cum) *result.DatabaseWork {
	if system == "" {
		return nil
	}
	d := &result.DatabaseWork{System: system}
	found := false
	for _, c := range []struct {
		k   key
		out *float64
	}{{dbQueries, &d.Queries}, {dbTransactions, &d.Transactions}, {dbRowsRead, &d.RowsRead}} {
		begin, ok1 := from[c.k]
		end, ok2 := to[c.k]
		if !ok1 || !ok2 {
			continue
		}
		*c.out = end.count - begin.count
		if *c.out < 0 { // the database restarted: counted from zero, as increase() does
			*c.out = end.count
		}
		found = true
	}
	if !found {
		return nil
	}
	return d
}

// appDatabases are the databases PostgreSQL's exporter reports other than
// its own ("postgres"), the templates and the shared objects (""); or
// "postgres" alone when no other has committed a transaction.
func appDatabases(commits *dto.MetricFamily) []string {
	var out []string
	for _, s := range commits.GetMetric() {
		switch name := label(s, "datname"); name {
		case "", "postgres", "template0", "template1":
		default:
			if value(s) > 0 {
				out = append(out, name)
			}
		}
	}
	if len(out) == 0 {
		return []string{"postgres"}
	}
	return out
}
