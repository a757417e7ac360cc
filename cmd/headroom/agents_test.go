//go:build linux

package main

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/result"
)

// agentScenario reads a data file and what init returned, so both must
// reach the agents; init sends one request, which must be counted once.
const agentScenario = `
names = data.csv("names.csv")

def init(user):
    user.http.get("/healthz", name="init")
    return {"names": [r["name"] for r in names]}

def ping(user):
    if user.shared["names"][2] != "cy":
        fail("user.shared did not reach this user")
    user.http.get("/healthz", params={"who": names[user.id % 3]["name"]}, name="GET /healthz")

actions = [action("Ping", ping)]
think_time = think.constant("100ms")
`

// TestLocalAgents runs the same users in one process and on three local
// agent processes: the same users set up, the same figures within noise
// (their histograms merged exactly), init run once, on the coordinator.
func TestLocalAgents(t *testing.T) {
	dir := t.TempDir()
	star := filepath.Join(dir, "ping.star")
	for name, content := range map[string]string{star: agentScenario, filepath.Join(dir, "names.csv"): "name\nax\nbo\ncy\n"} {
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	target := testbedURL(t)
	run := func(extra ...string) *result.Result {
		out := filepath.Join(t.TempDir(), "run")
		args := append([]string{"run", star, "--target", target, "--users", "30", "--ramp", "1s", "--duration", "8s", "--out", out, "--quiet", "--no-report"}, extra...)
		code, _, stdout, stderr := outcome(t, command(t, "", nil, args...))
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", extra, code, stdout, stderr)
		}
		r, err := result.Read(out)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	one := run()
	three := run("--local-agents", "3")

	for _, r := range []*result.Result{one, three} {
		if r.Status != result.Completed || r.Setup == nil || r.Setup.Users != 30 || r.Totals.Errors+r.Totals.Timeouts > 0 {
			t.Fatalf("status %q, setup %+v, totals %+v: want completed, 30 users set up, no failure", r.Status, r.Setup, r.Totals)
		}
		var inits int64
		for _, q := range r.Setup.Requests {
			if q.Name == "init" {
				inits += q.Count
			}
		}
		if inits != 1 {
			t.Errorf("init's request counted %d times, want once", inits)
		}
	}
	// 30 users thinking 100 ms: ~300 requests a second for 8 s in both.
	// A second in which an agent's snapshot came late (a loaded machine)
	// is kept apart as degraded: count it too.
	c1, c3 := float64(one.Totals.Count), float64(three.Totals.Count+three.DegradedTotals.Count)
	if c1 < 1500 || math.Abs(c3-c1) > 0.15*c1 {
		t.Errorf("requests in the window: %v in one process, %v on three agents; want 1,500 or more, within 15%%", c1, c3)
	}
	for _, q := range three.Requests {
		if q.Name == "GET /healthz" && (q.P50Ms <= 0 || q.P99Ms < q.P50Ms || q.Count != three.Totals.Count) {
			t.Errorf("the agents' merged histogram: %+v", q)
		}
	}
	t.Logf("one process: %v requests; three agents: %v; notes %q", c1, c3, strings.Join(three.Notes, "; "))

	// Rows held one per user (pick="unique") are shared by the agents, a
	// block each (scenario.ShareRows, TestShareRows): 30 users on three
	// agents hold the 30 rows, each its own.
	unique := `
rows = data.rows([{"name": "r%d" % i} for i in range(30)], pick="unique")

def setup(user):
    user.http.get("/healthz", name="setup " + rows.row(user)["name"])

def ping(user):
    user.http.get("/healthz", name="GET /healthz")

actions = [action("Ping", ping)]
think_time = think.constant("100ms")
`
	if err := os.WriteFile(star, []byte(unique), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "u")
	code, _, _, stderr := outcome(t, command(t, "", nil, "run", star, "--target", target, "--users", "30", "--duration", "2s", "--local-agents", "3",
		"--out", out, "--quiet", "--no-report"))
	if code != 0 {
		t.Fatalf("pick=unique on three agents: exit %d\n%s", code, stderr)
	}
	r, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]int64{}
	for _, q := range r.Setup.Requests {
		if strings.HasPrefix(q.Name, "setup ") {
			held[q.Name] += q.Count
		}
	}
	for i := range 30 {
		if n := held[fmt.Sprintf("setup r%d", i)]; n != 1 {
			t.Errorf("row r%d was held by %d users, want 1 (rows: %v)", i, n, held)
		}
	}
}

// TestAgentKilled kills one of three local agents with SIGKILL mid-run:
// the run completes, the agent is reported lost, its users moved to the
// two others, and the seconds until they were set up again are marked
// degraded, their requests kept apart.
func TestAgentKilled(t *testing.T) {
	dir := t.TempDir()
	star := filepath.Join(dir, "ping.star")
	scenario := strings.NewReplacer(`names = data.csv("names.csv")`, `names = [{"name": "ax"}, {"name": "bo"}, {"name": "cy"}]`).Replace(agentScenario)
	if err := os.WriteFile(star, []byte(scenario), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "run")
	cmd := command(t, "", nil, "run", star, "--target", testbedURL(t), "--users", "30", "--ramp", "1s", "--duration", "12s",
		"--out", out, "--quiet", "--no-report", "--local-agents", "3")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var agents map[int]string
	for deadline := time.Now().Add(20 * time.Second); len(agents) < 3; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("3 agent processes did not start within 20 s (found %v)\n%s", agents, stderr.String())
		}
		agents = children(cmd.Process.Pid)
	}
	time.Sleep(4 * time.Second) // the ramp, and a few seconds of all three
	var victim string
	for pid, cmdline := range agents {
		if strings.Contains(cmdline, "local-1") {
			victim = "local-1"
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the run did not complete: %v\n%s\n%s", err, stdout.String(), stderr.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the run did not end within 60 s of an agent's death\n%s", stderr.String())
	}
	r, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != result.Completed || r.Agents == nil || len(r.Agents.Faults) != 1 {
		t.Fatalf("status %q, agents %+v: want completed, one fault\n%s", r.Status, r.Agents, stderr.String())
	}
	f := r.Agents.Faults[0]
	if f.Name != victim || f.Users != 10 || f.To != 2 || f.RecoveredT <= f.T || !strings.Contains(f.Reason, "connection closed") {
		t.Errorf("fault %+v: want %s's 10 users moved to 2 agents, set up again after", f, victim)
	}
	var degraded int
	for _, p := range r.Timeline {
		if p.Degraded {
			degraded++
			if p.T < f.T {
				t.Errorf("a second at %.1f s marked degraded, before the agent was lost at %.1f s", p.T, f.T)
			}
		}
	}
	if degraded == 0 || r.Agents.DegradedS <= 0 || r.DegradedTotals.Count == 0 || r.Agents.Coverage >= 1 {
		t.Errorf("%d seconds marked, %v s degraded, %d requests kept apart, coverage %v: want the fault's seconds marked and counted apart",
			degraded, r.Agents.DegradedS, r.DegradedTotals.Count, r.Agents.Coverage)
	}
	for _, a := range r.Agents.Agents {
		switch {
		case a.Name == victim && (a.Lost == "" || a.Coverage >= 1 || a.Requests == 0):
			t.Errorf("the killed agent: %+v, want lost, its coverage under 1, its requests before", a)
		case a.Name != victim && (a.Lost != "" || a.Peak != 15):
			t.Errorf("a survivor: %+v, want 15 users at its peak (10 and half the lost 10)\n%s", a, stderr.String())
		}
	}
	last := r.Timeline[len(r.Timeline)-2] // the last second before the stop
	if last.Users != 30 || last.Ready != 30 || !strings.Contains(strings.Join(r.Notes, "\n"), "was lost at") {
		t.Errorf("at the end %d users, %d ready, notes %q: want all 30 back, and a note", last.Users, last.Ready, r.Notes)
	}
	// A local agent's process that died cannot resume: its launcher tells
	// the coordinator, which loses it at once rather than at its lease.
	if !strings.Contains(f.Reason, "its process exited (signal: killed)") {
		t.Errorf("fault reason %q: want the launcher's word that the process was killed", f.Reason)
	}
	t.Logf("fault %+v; %d seconds degraded, %d requests apart; notes %q", f, degraded, r.DegradedTotals.Count, r.Notes)
}

// children are the processes whose parent is pid, by their command lines.
func children(pid int) map[int]string {
	out := map[int]string{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after its ')'
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(pid) {
			continue
		}
		dir := filepath.Dir(st)
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		child, _ := strconv.Atoi(filepath.Base(dir))
		out[child] = strings.ReplaceAll(string(cmdline), "\x00", " ")
	}
	return out
}

// TestOpenModelOnLocalAgents runs the open model on two local agents
// against a loopback server: 100 arrivals a second for 5 s, the pool and
// the schedule's arrivals split between them. Every arrival of the
// schedule is started once, none dropped, each agent about half.
func TestOpenModelOnLocalAgents(t *testing.T) {
	dir := t.TempDir()
	sc := filepath.Join(dir, "get.star")
	if err := os.WriteFile(sc, []byte(oneGet), 0o644); err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	out := filepath.Join(dir, "out")
	code, _, stdout, stderr := outcome(t, command(t, "", nil, "run", sc, "--target", srv.URL, "--rate", "100/s", "--duration", "5s",
		"--local-agents", "2", "--out", out, "--quiet", "--no-report"))
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	r, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	a := r.Arrivals
	if r.Status != result.Completed || r.Config.Model != result.ModelOpen || a == nil {
		t.Fatalf("status %q, model %q, arrivals %+v: want a completed run of the open model", r.Status, r.Config.Model, a)
	}
	// A second in which an agent's snapshot came late (a loaded machine)
	// is kept apart as degraded, its arrivals with it.
	degraded := r.Agents != nil && r.Agents.DegradedS > 0
	if (a.Intended < 490 && !degraded) || a.Intended > 510 || a.Started != a.Intended || a.Dropped != 0 || a.Canceled != 0 {
		t.Errorf("arrivals %+v: want the ~500 of 100/s for 5 s, every one started", a)
	}
	if r.Agents == nil || len(r.Agents.Agents) != 2 {
		t.Fatalf("agents %+v: want two", r.Agents)
	}
	var requests, arrivals int64
	for _, ag := range r.Agents.Agents {
		requests += ag.Requests
		arrivals += ag.Arrivals
		if ag.Requests < 200 || ag.Requests > 300 || ag.Lost != "" || ag.Arrivals != ag.Requests || ag.Dropped != 0 {
			t.Errorf("agent %+v: want about half of the ~500 requests, an arrival each, none dropped", ag)
		}
	}
	if arrivals != a.Started {
		t.Errorf("the agents' arrivals add up to %d, the run's started arrivals are %d", arrivals, a.Started)
	}
	if n := hits.Load(); requests != n {
		t.Errorf("the agents sent %d requests, the server saw %d", requests, n)
	}
	t.Logf("arrivals %+v; agents' requests %d, %d", *a, r.Agents.Agents[0].Requests, r.Agents.Agents[1].Requests)
}

// TestMaxMemoryOnLocalAgents: --max-memory holds where the users run.
// Each of two local agents gets half of it; a scenario that doubles a
// string passes an agent's share, that agent cancels its users, and the
// coordinator stops the run as one process stops its own: status stopped,
// exit 1, a note naming the agent and the action.
func TestMaxMemoryOnLocalAgents(t *testing.T) {
	star := filepath.Join(t.TempDir(), "grow.star")
	grow := `
def grow(user):
    user.http.get("/healthz", name="GET /healthz")
    s = "x"
    for i in range(40):
        s = s + s
actions = [action("Grow", grow)]
`
	if err := os.WriteFile(star, []byte(grow), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "run")
	start := time.Now()
	code, _, stdout, stderr := outcome(t, command(t, "", nil, "run", star, "--target", testbedURL(t), "--users", "2", "--duration", "3m",
		"--max-memory", "1GiB", "--local-agents", "2", "--out", out, "--quiet", "--no-report"))
	took := time.Since(start)
	// Stopped some 3 s into the run: 6-9 s in all, 15 s on half a busy
	// core (the agents' heaps near a gigabyte). A run the limit did not
	// stop would go on for its 3 minutes.
	if code != 1 || took > time.Minute {
		t.Fatalf("exit %d after %v: want 1 (stopped), well before the 3 minutes\n%s\n%s", code, took, stdout, stderr)
	}
	r, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`\[agent \d\] headroom agent: headroom's memory reached \d+ MiB, past its limit of 512 MiB \(--max-memory\), .*: its users cancelled \(1\); the coordinator stops the run`).MatchString(stderr) {
		t.Errorf("the agent's own log does not say why it cancelled its users:\n%s", stderr)
	}
	notes := strings.Join(r.Notes, "\n")
	if strings.Contains(notes, "finished setup") {
		t.Errorf("a note says users had not finished setup, of a scenario without one:\n%s", notes)
	}
	for _, want := range []string{"headroom stopped the run: headroom's memory on agent ", "past its limit of 512 MiB (--max-memory)", "Grow (1)"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	// The requests before the strings grew are kept: in the window; in the
	// ramp's figures if the run stopped before agents reported their users
	// ready (they report once a second); in the degraded seconds' if an
	// agent, its collector busy near its limit, sent its second late; or
	// in the stopping ones'.
	// (The other agent's user may not have begun: users' starts are
	// spread over the first second.)
	// On a busy machine an agent growing towards its limit may be lost
	// (stalled past its lease) before it says so: its user moves to the
	// other agent, and makes its one request again there.
	n, most := r.Totals.Count+r.RampTotals.Count+r.DegradedTotals.Count+r.StoppingTotals.Count, int64(2)
	for _, f := range r.Agents.Faults {
		most += int64(f.Users)
	}
	if r.Status != result.Stopped || n < 1 || n > most || !strings.Contains(stderr, "the run stopped early: headroom's memory on agent") {
		t.Errorf("status %q, requests %d (window %d, ramp %d, degraded %d, stopping %d), stderr:\n%s\nwant stopped, the requests before the strings grew (1 or 2, and one more for each user moved off a lost agent: at most %d), and why on stderr",
			r.Status, n, r.Totals.Count, r.RampTotals.Count, r.DegradedTotals.Count, r.StoppingTotals.Count, stderr, most)
	}
	var sent int64
	for _, a := range r.Agents.Agents {
		sent += a.Requests
	}
	if sent != n {
		t.Errorf("the agents counted %d requests, the run's figures hold %d", sent, n)
	}
	t.Logf("stopped after %v, requests: window %d, ramp %d, degraded %d, stopping %d, agents' own %d: %s", took.Round(time.Millisecond),
		r.Totals.Count, r.RampTotals.Count, r.DegradedTotals.Count, r.StoppingTotals.Count, sent, notes)
}
