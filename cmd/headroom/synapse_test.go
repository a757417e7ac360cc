//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// synapse is a real Synapse started by scripts/synapse.sh for one test.
type synapse struct {
	dir, client, metrics string
}

// startSynapse starts Synapse on two free ports of 127.0.0.1 with its data
// in a temp dir and the extra environment of scripts/synapse.sh, and stops
// it by PID when the test ends. It fails, and does not skip, when Synapse
// is not installed: the test command installs it (scripts/test.sh), and a
// test that passes by doing nothing would hide that it no longer runs.
func startSynapse(t *testing.T, env ...string) synapse {
	t.Helper()
	script := abs(t, "../../scripts/synapse.sh")
	ports := freePorts(t, 2)
	s := synapse{
		dir:     t.TempDir(),
		client:  "http://127.0.0.1:" + strconv.Itoa(ports[0]),
		metrics: "http://127.0.0.1:" + strconv.Itoa(ports[1]) + "/_synapse/metrics",
	}
	startScript(t, "Synapse", script, s.dir, append([]string{"PORT=" + strconv.Itoa(ports[0]), "METRICS_PORT=" + strconv.Itoa(ports[1])}, env...))
	return s
}

// startScript starts a server with `script start dir args...` (env added to the environment) and stops
// it with `script stop dir` at the test's end. A server that is not installed (the script's exit 3)
// fails the test saying how to install it: never a skip.
func startScript(t *testing.T, name, script, dir string, env []string, args ...string) {
	t.Helper()
	rel := "./scripts/" + filepath.Base(script)
	start := exec.Command(script, append([]string{"start", dir}, args...)...)
	start.Env = append(os.Environ(), env...)
	out, err := start.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 3 {
		t.Fatalf("%s is not installed: run %s install (scripts/test.sh does it before the tests)\n%s", name, rel, out)
	}
	// Registered even when start failed: a server it left running is stopped.
	t.Cleanup(func() {
		if out, err := exec.Command(script, "stop", dir).CombinedOutput(); err != nil {
			t.Errorf("%s stop: %v\n%s", rel, err, out)
		}
	})
	if err != nil {
		t.Fatalf("%s start: %v\n%s", rel, err, out)
	}
}

// freePorts returns n TCP ports of 127.0.0.1 that nothing listened on a
// moment ago (all held at once, so they differ).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// requestName is what every request name of matrix.star looks like: a
// method and a path template, with no room, event or user id in it (a name
// per room would explode the results' table).
var requestName = regexp.MustCompile(`^(GET|POST|PUT) (v1 )?/[A-Za-z0-9_./{}-]+( \((initial|edit)\))?$`)

// TestSynapse runs examples/matrix.star against a real Synapse (Matrix
// homeserver) and checks what a user of headroom would: the run completes,
// the reference's commonest actions and their Matrix requests are there
// under template names, Synapse answered them (no 429s: the rate limits
// are raised; no 5xx), and Synapse's own CPU, memory and time by servlet,
// scraped from its metrics listener, are in the result. Synapse's limit on
// each user's messages is tightened to 5 a second in bursts of 2: the
// scenario's init sends 5 messages into each of its 5 rooms, some 35 ms
// apart, and must wait out the 429s as Synapse asks (about 3 s in all),
// while users, who send one at a time with a second's thought between,
// never meet it.
func TestSynapse(t *testing.T) {
	t.Parallel() // beside the rest: a server or a browser of its own, mostly waited on
	s := startSynapse(t, "RC_MESSAGE_PER_SECOND=5", "RC_MESSAGE_BURST=2")
	scenario := abs(t, "../../examples/matrix.star")

	t.Run("run", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "run")
		// Synapse hashes each registration with bcrypt (~0.25 s of CPU):
		// on a busy 2-core machine 20 of them can outlast the default
		// minute of setup, and the window would begin with few users set
		// up. Give the server the time it needs; the window is what is
		// checked. So with each request: beside two busy loops and the
		// other servers' tests, 3 of 145 POST /createRoom took past the
		// default 10 s; a slow Synapse is slow, not failing (what is
		// checked is that it answers without errors).
		code, _, stdout, stderr := outcome(t, command(t, "", nil, "run", scenario, "--target", s.client,
			"--scrape", s.metrics, "--users", "20", "--ramp", "2s", "--duration", "20s", "--setup-timeout", "4m", "--timeout", "1m", "--out", out))
		if code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		r, err := result.Read(out)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != "completed" {
			t.Fatalf("status %q, notes %q", r.Status, r.Notes)
		}

		actions := map[string]int64{}
		for _, a := range r.Actions {
			actions[a.Name] = a.Count
		}
		// The four commonest of the reference's mix (83% of its actions):
		// some 100 actions in the window hold each of them.
		for _, name := range []string{"SwitchChannel", "ScrollChannel", "UnreadCheck", "CreatePost"} {
			if actions[name] == 0 {
				t.Errorf("action %s: none in the window; actions: %v", name, actions)
			}
		}

		names := map[string]bool{}
		var count, failed int64
		for _, q := range r.Requests {
			names[q.Name] = true
			count += q.Count
			failed += q.Errors + q.Timeouts
			if !requestName.MatchString(q.Name) || strings.ContainsAny(q.Name, "!@%") {
				t.Errorf("request name %q is not a template (ids belong in {roomId}, {eventId}, ...)", q.Name)
			}
			for status, n := range q.Status {
				// 400: a reaction the user had made already (M_DUPLICATE_ANNOTATION).
				if status != "200" && !(status == "400" && strings.Contains(q.Name, "m.reaction")) {
					t.Errorf("%s: %d responses with status %s; messages %v", q.Name, n, status, q.Messages)
				}
			}
		}
		for _, name := range []string{
			"GET /rooms/{roomId}/messages",
			"POST /rooms/{roomId}/receipt/m.read/{eventId}",
			"GET /sync",
			"PUT /rooms/{roomId}/send/m.room.message/{txnId}",
		} {
			if !names[name] {
				t.Errorf("request %q: none in the window; names: %v", name, slices.Sorted(maps.Keys(names)))
			}
		}
		// Setup (register, join, filter) and init are reported apart: no
		// setup request is in the window or its totals.
		for _, name := range []string{"POST /register", "POST /join/{roomId}", "POST /user/{userId}/filter", "POST /_synapse/admin/v1/register"} {
			if names[name] {
				t.Errorf("setup request %q in the window", name)
			}
		}
		setupNames := map[string]int64{}
		if r.Setup != nil {
			for _, q := range r.Setup.Requests {
				setupNames[q.Name] = q.Count
			}
		}
		if r.Setup == nil || r.Setup.Users != 20 || r.Setup.TimeToSetUp.Count != 20 || setupNames["POST /register"] < 20 || setupNames["POST /join/{roomId}"] < 100 {
			t.Errorf("setup section %+v; setup requests %v: want 20 users set up, each registered and joined 5 rooms", r.Setup, setupNames)
		}
		// How many requests fit in the window is Synapse's speed: 155 on
		// half a busy core. Users that stopped acting (stuck in their first
		// action, or set up too late for the window) would make 20 or fewer:
		// at least 2 a user tells them apart on any machine.
		if count < 40 || failed*100 > count {
			t.Errorf("%d requests in the window, %d failed: want at least 40 (2 a user), at most 1%% failed", count, failed)
		}

		// Each user held a /sync long poll in the background (matrix.star's
		// sync_loop): Synapse answered them as events came, or after 30 s.
		// They are polls (time waited), not requests; the posts they brought
		// carry delivery stamps: the fan-out latency of a real server.
		var polls, posted metrics.Summary
		for _, p := range r.Polls {
			if p.Name == "GET /sync (long poll)" {
				polls = p
			}
		}
		for _, d := range r.Deliveries {
			if d.Name == "posted" {
				posted = d
			}
		}
		if polls.Count < 20 || polls.Errors+polls.Timeouts > 0 || names["GET /sync (long poll)"] {
			t.Errorf("long polls %+v (in the requests too: %v): want 20 or more, none failed, apart from the requests", polls, names["GET /sync (long poll)"])
		}
		// Every user is in every room: each post reaches the other 19. The
		// timing is a real Python server's beside the whole test suite on 2
		// cores: the p99 reached 5.4 s once (max 9.3 s, p50 374 ms), and on
		// half a busy core the p50 was 3.1 s (p99 3.6 s), so the bound is
		// what a wrong stamp would break (zero: years; a unit off: a
		// thousand times, minutes), not Synapse's speed: the median under
		// 20 s, none past a long poll's 30 s and a margin.
		if posted.Count < 20 || posted.P50Ms <= 0 || posted.P50Ms > 20000 || posted.MaxMs > 40000 {
			t.Errorf("deliveries of posts %+v: want 20 or more, the median within 20 s of its send, none past 40 s", posted)
		}
		t.Logf("long polls: %d, waited p50 %.0f ms; posts delivered: %d, p50 %.1f ms, p99 %.1f ms, max %.1f ms",
			polls.Count, polls.P50Ms, posted.Count, posted.P50Ms, posted.P99Ms, posted.MaxMs)

		if r.Server == nil || len(r.Server.Targets) != 1 {
			t.Fatalf("server figures: %+v, want one target (%s)", r.Server, s.metrics)
		}
		st := r.Server.Targets[0]
		// Synapse's metrics page itself now and then answers 500 under load
		// (seen once in 38 scrapes), or not within the scrape's 2 s while its
		// one reactor thread serves the run (7 of 48 on a fresh clone's test
		// command, 2 cores): a real server's, counted in the result; some are
		// tolerated, a broken scrape is not.
		if st.URL != s.metrics || st.Scrapes < 15 || st.Failed*4 > st.Scrapes {
			t.Errorf("scrapes of %s: %d, %d failed (%s); want 15 or more, at most a quarter failed", st.URL, st.Scrapes, st.Failed, st.LastError)
		}
		if !slices.Contains(st.Has, "cpu") || !slices.Contains(st.Has, "memory") {
			t.Errorf("server exposes %v, want cpu and memory (process_cpu_seconds_total, process_resident_memory_bytes)", st.Has)
		}
		// Synapse is a Python process of 100 MiB or more, and answering some
		// 10 requests a second costs it CPU.
		if w := st.Window; w.CPUCoresMean <= 0 || w.MemoryMBMean < 50 {
			t.Errorf("server window: %.3f cores, %.0f MiB; want some CPU and at least 50 MiB", w.CPUCoresMean, w.MemoryMBMean)
		}
		// Synapse's own time by servlet, over the same window: the servlet
		// behind GET .../messages saw about the requests headroom counted.
		var messages float64
		servlets := map[string]bool{}
		for _, g := range st.Window.Timings {
			if g.Metric != "synapse_http_server_response_time_seconds" || g.Label != "servlet" {
				continue
			}
			for _, it := range g.Items {
				servlets[it.Name] = true
				if it.Count > 0 && it.MeanMs <= 0 {
					t.Errorf("servlet %s: %v requests, mean %v ms", it.Name, it.Count, it.MeanMs)
				}
				if it.Name == "RoomMessageListRestServlet" {
					messages = it.Count
				}
			}
		}
		for _, name := range []string{"RoomMessageListRestServlet", "SyncRestServlet", "ReceiptRestServlet", "RoomSendEventRestServlet"} {
			if !servlets[name] {
				t.Errorf("server time by servlet: no %s; servlets: %v", name, slices.Sorted(maps.Keys(servlets)))
			}
		}
		// Both reports show them too.
		for _, f := range []string{"report.md", "report.html"} {
			b, err := os.ReadFile(filepath.Join(out, f))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"synapse_http_server_response_time_seconds", "RoomMessageListRestServlet", "process_resident_memory_bytes"} {
				if !strings.Contains(string(b), want) {
					t.Errorf("%s does not mention %s", f, want)
				}
			}
		}
		// init met the rate limit (Synapse says so), and its 429s were
		// waited out: a request refused more often than the scenario retries
		// would have failed init, and the run with it.
		if n := scraped(t, s.metrics, "synapse_http_server_response_time_seconds_count", `code="429"`, `servlet="RoomSendEventRestServlet"`); n == 0 {
			t.Errorf("Synapse answered no send with 429: init's 25 messages should have met rc_message (5/s, bursts of 2)")
		}
		var client float64
		for _, q := range r.Requests {
			if q.Name == "GET /rooms/{roomId}/messages" {
				client = float64(q.Count)
			}
		}
		t.Logf("%d requests in the window, %d failed; scrapes of %s: %d, %d failed; GET .../messages: Synapse served %.0f in the window, headroom sent %.0f",
			count, failed, st.URL, st.Scrapes, st.Failed, messages, client)
		// The two windows line up to a scrape (a second) at each end.
		if messages < 0.7*client || messages > 1.3*client {
			t.Errorf("RoomMessageListRestServlet served %.0f requests in the window, headroom sent %.0f: want within 30%%", messages, client)
		}
	})

	t.Run("users file", func(t *testing.T) {
		// The same scenario with USERS_FILE set: users log in as the rows of
		// matrix-users.csv (registered on first use), one row each.
		dir := t.TempDir()
		src, err := os.ReadFile(scenario)
		if err != nil {
			t.Fatal(err)
		}
		const off, on = `USERS_FILE = ""`, `USERS_FILE = "matrix-users.csv"`
		if strings.Count(string(src), off) != 1 {
			t.Fatalf("examples/matrix.star: want one line %s to switch the users file on", off)
		}
		copyFile(t, abs(t, "../../examples/matrix-users.csv"), filepath.Join(dir, "matrix-users.csv"))
		star := filepath.Join(dir, "matrix.star")
		if err := os.WriteFile(star, []byte(strings.Replace(string(src), off, on, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		rows := csvRows(t, filepath.Join(dir, "matrix-users.csv"))

		// More users than rows: refused before any traffic, naming the file.
		code, _, _, stderr := outcome(t, command(t, "", nil, "run", star, "--target", s.client,
			"--users", strconv.Itoa(len(rows)+1), "--duration", "1s", "--out", filepath.Join(t.TempDir(), "too-many")))
		if code == 0 || !strings.Contains(stderr, "matrix-users.csv") || !strings.Contains(stderr, strconv.Itoa(len(rows))) {
			t.Errorf("%d users for %d rows: exit %d, want an error naming matrix-users.csv and both numbers:\n%s", len(rows)+1, len(rows), code, stderr)
		}

		out := filepath.Join(t.TempDir(), "run")
		code, _, stdout, stderr := outcome(t, command(t, "", nil, "run", star, "--target", s.client,
			"--users", "3", "--ramp", "0s", "--duration", "4s", "--out", out))
		if code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		r, err := result.Read(out)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != "completed" || r.Totals.Count == 0 || r.Totals.Errors+r.Totals.Timeouts > 0 {
			t.Errorf("status %q, %d requests, %d errors, %d timeouts: want completed, some, none failed",
				r.Status, r.Totals.Count, r.Totals.Errors, r.Totals.Timeouts)
		}
		// On the server: the first row's account exists with the file's
		// password, and it is in the rooms the first run created (init found
		// them by alias instead of making new ones: the directory lists 5).
		token := matrixLogin(t, s.client, rows[0][0], rows[0][1])
		var joined struct {
			Rooms []string `json:"joined_rooms"`
		}
		matrixGet(t, s.client+"/_matrix/client/v3/joined_rooms", token, &joined)
		var public struct {
			Chunk []struct {
				RoomID string `json:"room_id"`
			} `json:"chunk"`
		}
		matrixGet(t, s.client+"/_matrix/client/v3/publicRooms", token, &public)
		if len(public.Chunk) != 5 {
			t.Errorf("the room directory lists %d rooms, want the 5 shared ones: %+v", len(public.Chunk), public.Chunk)
		}
		for _, p := range public.Chunk {
			if !slices.Contains(joined.Rooms, p.RoomID) {
				t.Errorf("%s has not joined shared room %s (joined %v)", rows[0][0], p.RoomID, joined.Rooms)
			}
		}
	})

	t.Run("members", func(t *testing.T) {
		// --var members=6: init signs up member-1..6 and joins them to the
		// rooms; users take one account each and only log in.
		const members, users = 6, 4
		code, _, _, stderr := outcome(t, command(t, "", nil, "run", scenario, "--target", s.client, "--var", "members="+strconv.Itoa(members),
			"--users", strconv.Itoa(members+1), "--duration", "1s", "--out", filepath.Join(t.TempDir(), "too-many")))
		if code != 2 || !strings.Contains(stderr, "data.rows") || !strings.Contains(stderr, "has 6 rows") {
			t.Errorf("%d users for %d members: exit %d, want 2 and an error naming data.rows and its rows:\n%s", members+1, members, code, stderr)
		}
		out := filepath.Join(t.TempDir(), "run")
		code, _, stdout, stderr := outcome(t, command(t, "", nil, "run", scenario, "--target", s.client, "--var", "members="+strconv.Itoa(members),
			"--users", strconv.Itoa(users), "--ramp", "0s", "--duration", "4s", "--out", out))
		if code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		r, err := result.Read(out)
		if err != nil {
			t.Fatal(err)
		}
		if r.Setup == nil {
			t.Fatal("no setup section in the result")
		}
		// Answered requests (the server's rate limit, tightened here, makes
		// some 429 and the scenario retries them) by name.
		setup := map[string]int64{}
		for _, q := range r.Setup.Requests {
			setup[q.Name] = q.Status["200"]
		}
		// Joins are init's only (members x rooms); the users log in (and
		// init, as the room owner an earlier subtest signed up); no user
		// signs up.
		if setup["POST /join/{roomId}"] != members*5 || setup["POST /login"] != users+1 || setup["POST /register"] != 0 || r.Setup.Users != users {
			t.Errorf("setup requests answered 200 %v, %d users set up: want %d joins (init's), %d logins, no /register", setup, r.Setup.Users, members*5, users+1)
		}
		// The member no user took is in every shared room all the same.
		token := matrixLogin(t, s.client, "member-6", "correct-horse-battery")
		var joined struct {
			Rooms []string `json:"joined_rooms"`
		}
		matrixGet(t, s.client+"/_matrix/client/v3/joined_rooms", token, &joined)
		if len(joined.Rooms) != 5 {
			t.Errorf("member-6 is in %d rooms, want the 5 shared ones", len(joined.Rooms))
		}
	})
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// csvRows reads a username,password file (no quoting in it).
func csvRows(t *testing.T, path string) [][2]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != "username,password" {
		t.Fatalf("%s: want a header username,password and rows", path)
	}
	var rows [][2]string
	for _, l := range lines[1:] {
		u, p, ok := strings.Cut(strings.TrimSpace(l), ",")
		if !ok {
			t.Fatalf("%s: row %q is not username,password", path, l)
		}
		rows = append(rows, [2]string{u, p})
	}
	return rows
}

var matrixClient = &http.Client{Timeout: 10 * time.Second}

func matrixLogin(t *testing.T, base, user, password string) string {
	t.Helper()
	body := fmt.Sprintf(`{"type":"m.login.password","identifier":{"type":"m.id.user","user":%q},"password":%q}`, user, password)
	resp, err := matrixClient.Post(base+"/_matrix/client/v3/login", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Token string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 {
		t.Fatalf("log in as %s: status %d, %v", user, resp.StatusCode, err)
	}
	return r.Token
}

func matrixGet(t *testing.T, url, token string, v any) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := matrixClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: status %d, %v", url, resp.StatusCode, err)
	}
}

// scraped sums the samples of series at url whose labels include every
// one of want (each as name="value"; see promSum).
func scraped(t *testing.T, url, series string, want ...string) float64 {
	t.Helper()
	resp, err := matrixClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return promSum(string(b), series, want...)
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
