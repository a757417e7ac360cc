//go:build linux

package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/result"
)

// TestDatabaseQueriesPerRequest: a real MariaDB with Debian's
// mysqld_exporter beside it, scraped by runs against a server whose every
// request runs its statements there (the mariadb client, one process a
// request: 1 statement on the base side, 3 on the new), each a count over
// a table of 10 rows. Each run's result has the database's queries and
// rows read over its window, which divided by its requests are the
// statements and rows a request sent, the exporter's own (one SELECT a
// scrape, SHOW STATUS's temporary table) left out; compare puts the two
// sides' figures a request side by side. The real exporter's counters,
// end to end: a renamed series or a wrong one (Questions counts the
// exporter's SHOWs; the handlers count SHOW STATUS's rows) fails it.
func TestDatabaseQueriesPerRequest(t *testing.T) {
	t.Parallel()
	db := startMariaDB(t)
	sql, sock, me := db.sql, db.sock, db.user // the client and the exporter come as the server's user
	dir := t.TempDir()
	if out, err := sql("CREATE DATABASE load_test; CREATE TABLE load_test.t (id INT PRIMARY KEY); " +
		"INSERT INTO load_test.t VALUES (1),(2),(3),(4),(5),(6),(7),(8),(9),(10)"); err != nil {
		t.Fatalf("creating the table: %v\n%s", err, out)
	}
	exporter := findProgram(t, "prometheus-mysqld-exporter")
	ports := freePorts(t, 2)
	exporterURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0])
	// As scripts/openedx-forum.sh starts it: SHOW GLOBAL STATUS alone.
	startProcess(t, "env", fmt.Sprintf("DATA_SOURCE_NAME=%s@unix(%s)/", me, sock), exporter,
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", ports[0]), "--no-collect.global_variables", "--no-collect.slave_status",
		"--no-collect.info_schema.innodb_cmp", "--no-collect.info_schema.innodb_cmpmem", "--no-collect.info_schema.query_response_time")
	waitAnswer(t, exporterURL)

	// The application: each request runs its statements, as many as the
	// side's release sends.
	var per atomic.Int64
	srv := &http.Server{Addr: fmt.Sprintf("127.0.0.1:%d", ports[1]), ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := int(per.Load())
			if r.URL.Path == "/login" { // a login asks 50 times a request's
				n *= 50
			}
			if _, err := sql(strings.Repeat("SELECT COUNT(*) FROM load_test.t; ", n)); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		})}
	go func() { _ = srv.ListenAndServe() }()
	t.Cleanup(func() { _ = srv.Close() })
	target := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	waitAnswer(t, target+"/")
	star := filepath.Join(dir, "get.star")
	if err := os.WriteFile(star, []byte(`
def setup(user):
    user.http.get("/login", name="GET /login")
def get(user):
    user.http.get("/", name="GET /")
actions = [action("get", get)]
think_time = think.constant("100ms")
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var runs []string
	for _, n := range []int{1, 3} {
		per.Store(int64(n))
		out := filepath.Join(dir, fmt.Sprintf("statements-%d", n))
		code, _, stdout, stderr := outcome(t, command(t, "", nil, "run", star, "--target", target, "--users", "2", "--ramp", "1s",
			"--duration", "4s", "--scrape", exporterURL, "--quiet", "--no-report", "--out", out))
		if code != 0 {
			t.Fatalf("%d statement(s) a request: exit %d\nstdout:\n%s\nstderr:\n%s", n, code, stdout, stderr)
		}
		r, err := result.Read(out)
		if err != nil {
			t.Fatal(err)
		}
		tg := r.Server.Targets[0]
		d := tg.Window.Database
		if tg.Kind != "database" || d == nil || d.System != "mysql" {
			t.Fatalf("%d statement(s) a request: the exporter's endpoint is a %q, database %+v; want a mysql database", n, tg.Kind, d)
		}
		reqs := float64(r.Totals.Count)
		q, rows := d.Queries/reqs, d.RowsRead/reqs
		t.Logf("%d statement(s) a request: %.0f requests, %.0f queries (%.2f a request), %.0f rows read (%.2f a request), %d scrapes",
			n, reqs, d.Queries, q, d.RowsRead, rows, tg.Scrapes)
		// About 20 requests a second in a window of ~3 s, 4 scrapes or so:
		// the exporter's SELECT a scrape adds under 0.1 a request, and the
		// window's edges (a scrape a second, requests in flight) a request
		// or two's statements either way.
		if reqs < 20 || q < 0.93*float64(n) || q > float64(n)+0.3 {
			t.Errorf("%d statement(s) a request: %.2f queries a request over %.0f requests; want %d (and under 0.1 more: the exporter's SELECT a scrape)", n, q, reqs, n)
		}
		if rows < 0.93*10*float64(n) || rows > 1.07*10*float64(n) {
			t.Errorf("%d statement(s) a request: %.2f rows read a request; want %d (each a count over 10 rows)", n, rows, 10*n)
		}
		// Users' setup, from the start to the window: the two logins'
		// 50n statements each, n for each request made before the window
		// (ramp_totals: a user set up while the other was not yet, however
		// long a busy machine stretched that), the exporter's SELECT a
		// scrape (a few), and a request or two in flight at the edges.
		if st := tg.Setup; st == nil || st.Database == nil || r.Setup == nil || r.Setup.Users != 2 {
			t.Errorf("%d statement(s) a request: users' setup %+v of %+v; want the database's work over 2 users' setup", n, st, r.Setup)
		} else {
			want := float64(2*50*n) + float64(n)*float64(r.RampTotals.Count)
			t.Logf("%d statement(s) a request: %.0f queries over users' setup (%.1f s, %d requests before the window), %.1f a user set up; want %.0f",
				n, st.Database.Queries, st.Seconds, r.RampTotals.Count, st.Database.Queries/2, want)
			if d := st.Database.Queries - want; d < -2*float64(n) || d > 2*float64(n)+6 {
				t.Errorf("%d statement(s) a request: %.0f queries over users' setup; want %.0f (the logins' and the requests' before the window), give or take two requests and the scrapes'", n, st.Database.Queries, want)
			}
		}
		runs = append(runs, out)
	}
	c := compareDirs(t, runs[:1], runs[1:])
	if len(c.Server) != 1 || len(c.Server[0].Database) != 2 {
		t.Fatalf("compare's servers %+v: want the database's queries and rows read a request", c.Server)
	}
	q := c.Server[0].Database[0]
	if q.Name != "database 1 (mysql) queries a request" || q.Base < 0.93 || q.Base > 1.3 || q.New < 2.8 || q.New > 3.3 {
		t.Errorf("compare: %s %.2f → %.2f; want 1 → 3", q.Name, q.Base, q.New)
	}
	if sd := c.Server[0].SetupDatabase; len(sd) != 2 || sd[0].Name != "database 1 (mysql) queries a user set up" || sd[0].New < 2.5*sd[0].Base {
		t.Errorf("compare's users' setup: %+v; want the queries a user set up, about 50 → 150", sd)
	}
}

// mariaDB is a MariaDB server a test started, reached through its socket
// alone (no TCP), stopped cleanly when the test ends.
type mariaDB struct {
	*process
	sock, user string
	sql        func(statements string) (string, error) // the mariadb client's output
}

// startMariaDB starts a MariaDB server of its own (Debian's, which
// scripts/test.sh installs) in a temporary directory, and waits until it
// answers.
func startMariaDB(t *testing.T) *mariaDB {
	t.Helper()
	installDB, mariadbd, client := findProgram(t, "mariadb-install-db"), findProgram(t, "mariadbd"), findProgram(t, "mariadb")
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // mariadb-install-db checks the path as the user
		t.Fatal(err)
	}
	data, sock := filepath.Join(dir, "db"), filepath.Join(dir, "db.sock")
	if out, err := exec.Command(installDB, "--no-defaults", "--datadir="+data, "--user="+me.Username,
		"--auth-root-authentication-method=socket", "--skip-test-db").CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	// No TCP at all: the client and the exporter come over the socket.
	db := startProcess(t, mariadbd, "--no-defaults", "--datadir="+data, "--user="+me.Username, "--socket="+sock,
		"--skip-networking", "--pid-file="+filepath.Join(dir, "db.pid"), "--log-error="+filepath.Join(dir, "db.log"))
	t.Cleanup(func() { // before startProcess's SIGINT, which mariadbd ignores: a clean shutdown
		_ = db.Process.Signal(syscall.SIGTERM)
		select {
		case <-db.done:
		case <-time.After(10 * time.Second):
		}
	})
	sql := func(statements string) (string, error) {
		out, err := exec.Command(client, "--no-defaults", "--socket="+sock, "-u"+me.Username, "--batch", "--skip-column-names", "-e", statements).CombinedOutput()
		return string(out), err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := sql("SELECT 1"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "db.log"))
			t.Fatalf("MariaDB did not answer in 30 s:\n%s", log)
		}
	}
	return &mariaDB{process: db, sock: sock, user: me.Username, sql: sql}
}

// findProgram is name's path, on PATH or in Debian's sbin; the test fails,
// and does not skip, without it: the test command installs it.
func findProgram(t *testing.T, name string) string {
	t.Helper()
	for _, p := range []string{name, "/usr/sbin/" + name, "/usr/bin/" + name} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Fatalf("no %s: scripts/test.sh installs mariadb-server and prometheus-mysqld-exporter", name)
	return ""
}
