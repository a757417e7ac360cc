package serverstats

import (
	"fmt"
	"testing"
)

// mysqld is mysqld_exporter 0.14's exposition of MariaDB 10.11 (the
// series read, some beside them that must not be, and the exporter's own
// process figures), with the data statements, the SHOWs and the rows read
// at the given counts.
func mysqld(selects, inserts, shows, rowsRead, handlerReads int) string {
	return fmt.Sprintf(`# TYPE mysql_global_status_commands_total counter
mysql_global_status_commands_total{command="select"} %d
mysql_global_status_commands_total{command="insert"} %d
mysql_global_status_commands_total{command="update"} 7
mysql_global_status_commands_total{command="delete_multi"} 1
mysql_global_status_commands_total{command="show_status"} %d
mysql_global_status_commands_total{command="set_option"} %d
# TYPE mysql_global_status_queries untyped
mysql_global_status_queries %d
# TYPE mysql_global_status_rows_read untyped
mysql_global_status_rows_read %d
# TYPE mysql_global_status_handlers_total counter
mysql_global_status_handlers_total{handler="read_rnd_next"} %d
# TYPE mysql_up gauge
mysql_up 1
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 3.5
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 2.4e+07
`, selects, inserts, shows, shows, selects+inserts+2*shows+8, rowsRead, handlerReads)
}

// postgres is postgres_exporter 0.11's pg_stat_database on PostgreSQL 15:
// the exporter's own database ("postgres"), the templates, the shared
// objects ("") and the application's.
func postgres(appCommits, appRollbacks, appRows, ownCommits, ownRows int) string {
	const row = "pg_stat_database_%s{datid=%q,datname=%q,server=\"/tmp/pgx:15499\"} %d\n"
	var s string
	for _, f := range []struct {
		name            string
		app, own, templ int
	}{{"xact_commit", appCommits, ownCommits, 877}, {"xact_rollback", appRollbacks, 0, 0}, {"tup_returned", appRows, ownRows, 70381}} {
		s += "# TYPE pg_stat_database_" + f.name + " counter\n"
		s += fmt.Sprintf(row, f.name, "0", "", 0) + fmt.Sprintf(row, f.name, "1", "template1", f.templ) +
			fmt.Sprintf(row, f.name, "5", "postgres", f.own) + fmt.Sprintf(row, f.name, "16384", "mattermost", f.app)
	}
	return s + "# TYPE pg_up gauge\npg_up 1\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.25\n"
}

// A database exporter's endpoint is a database: its work over the window
// from the counters that count the application's work, not the exporter's
// own (SHOWs, temporary tables, its own database), and none of the
// exporter's process figures taken for the database's.
func TestDatabaseWork(t *testing.T) {
	my := window(t, mysqld(100, 20, 50, 1000, 5000), mysqld(400, 50, 60, 9000, 90000))
	if my.Kind != "database" || len(my.Has) != 0 || my.Window.CPUCoresMean != 0 {
		t.Errorf("mysqld_exporter: kind %q, has %v, CPU %v; want a database, none of the exporter's process figures", my.Kind, my.Has, my.Window.CPUCoresMean)
	}
	if d := my.Window.Database; d == nil || d.System != "mysql" || d.Queries != 330 || d.RowsRead != 8000 || d.Transactions != 0 {
		t.Errorf("mysqld_exporter: %+v; want 330 data statements (the SHOWs and SETs left out) and 8,000 rows read (MariaDB's Rows_read, not the handlers')", d)
	}

	pg := window(t, postgres(1000, 10, 50000, 2, 1736), postgres(1600, 15, 80000, 26, 2573))
	if d := pg.Window.Database; pg.Kind != "database" || d == nil || d.System != "postgresql" || d.Transactions != 605 || d.RowsRead != 30000 || d.Queries != 0 {
		t.Errorf("postgres_exporter: kind %q, %+v; want 605 transactions and 30,000 rows of the application's database, the exporter's left out", pg.Kind, d)
	}
	// An application whose database is "postgres" itself: that one.
	alone := window(t, postgres(0, 0, 0, 100, 500), postgres(0, 0, 0, 160, 900))
	if d := alone.Window.Database; d == nil || d.Transactions != 60 || d.RowsRead != 400 {
		t.Errorf("only postgres at work: %+v; want its 60 transactions and 400 rows", d)
	}
	// MySQL (no Rows_read): InnoDB's rows read.
	const innodb = "# TYPE mysql_global_status_commands_total counter\nmysql_global_status_commands_total{command=\"select\"} %d\n" +
		"# TYPE mysql_global_status_innodb_row_ops_total counter\nmysql_global_status_innodb_row_ops_total{operation=\"read\"} %d\n" +
		"mysql_global_status_innodb_row_ops_total{operation=\"inserted\"} 5\n"
	if d := window(t, fmt.Sprintf(innodb, 10, 100), fmt.Sprintf(innodb, 30, 700)).Window.Database; d == nil || d.Queries != 20 || d.RowsRead != 600 {
		t.Errorf("MySQL: %+v; want 20 queries, 600 InnoDB rows read", d)
	}
	// A restart between the scrapes counts from zero, as increase() does.
	if d := window(t, mysqld(100, 20, 50, 1000, 0), mysqld(10, 0, 1, 40, 0)).Window.Database; d == nil || d.Queries != 18 || d.RowsRead != 40 {
		t.Errorf("after a restart: %+v; want the 18 queries and 40 rows since", d)
	}
	// An application server is not a database.
	if d := window(t, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1\n", "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 2\n").Window.Database; d != nil {
		t.Errorf("a process endpoint: %+v, want no database", d)
	}
}
