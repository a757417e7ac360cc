//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/headroom-dev/headroom/compare"
	"github.com/headroom-dev/headroom/report"
)

// dbServer is pythonServer, a thread a connection, running each request
// the release's statement (the second argument) on the database through
// one of four mariadb clients it keeps (the rest of the arguments: a
// statement in flight for each of the test's users), reading the
// statement's one row back, and rendering it (a few ms of Python): its
// own CPU a request is the same whatever the statement, the database's is
// the statement's.
var dbServer = pythonServer("ThreadingHTTPServer", `b"%d %s" % (hash_password("page", 30000), query())`, `SQL = sys.argv[2]
CLIENTS = queue.Queue()
for _ in range(4):
    CLIENTS.put(subprocess.Popen(sys.argv[3:] + ["--unbuffered"], stdin=subprocess.PIPE, stdout=subprocess.PIPE))

def query():
    db = CLIENTS.get()
    try:
        db.stdin.write((SQL + ";\n").encode())
        db.stdin.flush()
        return db.stdout.readline()
    finally:
        CLIENTS.put(db)`)

// TestProfilesSayWhichProcessMoved: a Python server and the MariaDB it
// queries, each profiled in one run by its own `headroom profiler` (py-spy
// for the server, perf for the database), two releases: the base counts
// rows through the primary key (a quarter of 400,000), the new
// one lost the key's condition and scans the table. compare names each
// figure by its process and finds the database's CPU a request grown
// and the server's not, and names a function of mariadbd as the cause:
// several profiles per run, a native database beside a Python server,
// end to end.
func TestProfilesSayWhichProcessMoved(t *testing.T) {
	t.Parallel() // beside the rest: what is judged is CPU sampled, not time
	sampling.Lock()
	defer sampling.Unlock()
	python, pyspy := pythonAndPySpy(t)
	db := startMariaDB(t)
	if os.Geteuid() == 0 { // ahead of the other tests, as the server and the profilers: CPU sampled is what is judged
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, db.Process.Pid, -10); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := db.sql("CREATE DATABASE load_test; USE load_test; CREATE TABLE t (id INT PRIMARY KEY, v INT); " +
		"INSERT INTO t SELECT seq, seq % 1000 FROM seq_1_to_400000"); err != nil {
		t.Fatalf("creating the table: %v\n%s", err, out)
	}
	statements := [2]string{
		"SELECT COUNT(*) FROM load_test.t WHERE id <= 100000 AND v = 5", // base: a range of the key
		"SELECT COUNT(*) FROM load_test.t WHERE v = 5",                  // new: the whole table
	}
	server := filepath.Join(t.TempDir(), "server.py")
	if err := os.WriteFile(server, []byte(dbServer), 0o644); err != nil {
		t.Fatal(err)
	}
	client := []string{findProgram(t, "mariadb"), "--no-defaults", "--socket=" + db.sock, "-u" + db.user, "--batch", "--skip-column-names"}
	nice := func(cmd ...string) []string {
		if os.Geteuid() == 0 { // ahead of the other tests, as the profiler tests' servers
			return append([]string{"nice", "-n", "-10"}, cmd...)
		}
		return cmd
	}
	c := profiledRuns(t, [2]int{0, 1}, "12s", "2s", func(port, side int) (*process, []profiled) {
		cmd := nice(append([]string{python, server, strconv.Itoa(port), statements[side]}, client...)...)
		srv := startProcess(t, cmd[0], cmd[1:]...)
		return srv, []profiled{
			{srv.Process.Pid, []string{"--sampler", "py-spy", "--py-spy", pyspy}},
			{db.Process.Pid, []string{"--sampler", "perf"}},
		}
	})
	window := map[int]*compare.ProfileComparison{}
	for i := range c.Profiles {
		if pc := &c.Profiles[i]; pc.Phase == "window" {
			window[pc.Target] = pc
		}
	}
	lines := report.ProfileLines(c)
	t.Logf("compare's profiles:\n%s\nnotes %q", strings.Join(lines, "\n"), c.Notes)
	srv, dbw := window[0], window[1]
	if srv == nil || dbw == nil {
		t.Fatalf("the window of both processes compared: got %d of them; notes %q", len(window), c.Notes)
	}
	if !strings.HasPrefix(srv.Binary, "python") || dbw.Binary != "mariadbd" {
		t.Errorf("processes %q and %q: want python… and mariadbd, their programs", srv.Binary, dbw.Binary)
	}
	if dbw.CPUPerUnit.Name != "mariadbd CPU a request (window)" {
		t.Errorf("the database's figure is named %q: want it named by its process", dbw.CPUPerUnit.Name)
	}
	t.Logf("%s %.1f → %.1f; server %.2f → %.2f ms (%s), database %.2f → %.2f ms (%s), cause %q, sampled %.2f and %.2f s a side", c.Window.Throughput.Name, c.Window.Throughput.Base, c.Window.Throughput.New,
		srv.CPUPerUnit.Base, srv.CPUPerUnit.New, srv.CPUPerUnit.DeltaText(), dbw.CPUPerUnit.Base, dbw.CPUPerUnit.New, dbw.CPUPerUnit.DeltaText(), dbw.Cause, srv.SampledS, dbw.SampledS)
	// The scan reads 4 times the rows of the range; with a connection's
	// cost a request the database's CPU a request grows 2 to 4 times.
	// Broken (figures of the wrong process, or sides swapped) it is ×1
	// or under.
	if dbw.CPUPerUnit.Delta < 0.7 {
		t.Errorf("the database's CPU a request %+.0f%%: want it grown twofold or more (a scan of 4 times the rows)", 100*dbw.CPUPerUnit.Delta)
	}
	// The server does the same a request on both sides (a line written
	// to the client, one read back, the page rendered: 2 to 3 ms, 0.3 s
	// or more sampled a side); the database's figures as the server's
	// would be ×5 or more.
	if d := srv.CPUPerUnit.Delta; d < -0.5 || d > 1 {
		t.Errorf("the server's CPU a request %+.0f%%: want about the same (its work a request is the same)", 100*d)
	}
	// Each user has a statement in flight (four clients, 15 ms or more a
	// statement) beside the server's few ms: the database, ahead of the
	// other tests, is busy through the window's 10 s of whole slices (5 s
	// sampled alone; beside the suite and another engineer's builds, one
	// client's statement at a time gave 0.7 s); compare names a cause
	// from 1 s sampled.
	if !strings.Contains(dbw.Cause, "rnd_next") && !strings.Contains(dbw.Cause, "rr_sequential") {
		t.Errorf("cause %q (%.2f s sampled a side): want the scan, handler::ha_rnd_next (mariadbd) or what calls it", dbw.Cause, dbw.SampledS)
	}
	if !strings.Contains(strings.Join(lines, "\n"), "Target 2 (mariadbd), the measured window") {
		t.Errorf("compare's terminal lines do not name the database's process:\n%s", strings.Join(lines, "\n"))
	}
}
