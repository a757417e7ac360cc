//go:build linux

package main

// TestLimiterUnderContention shows that headroom's users keep independent
// phases on a busy machine, so that the load it sends is the load it means.
//
// A user with a constant think time starts its next action a fixed time
// after its last one ended. When the generator stalls (the collector, the
// scheduler, other work on the machine), every user whose think time ended
// during the stall wakes at its end, together; from then on they share one
// phase, and each later stall gathers more of them. Spread-out load turns
// into bunches while the mean rate stays the same. A server with a small
// burst allowance — a token bucket, as rate limiters and API gateways are —
// answers a bunch larger than its allowance with errors, so the run sees
// errors far below the server's true capacity and blames the server.
//
// The test loads a real token bucket (Debian's nginx, limit_req 600/s with a
// burst of 10, scripts/nginx.sh) at half its capacity (300 users, one request
// each a second) for 2 minutes, with two busy loops beside headroom (this
// machine's kind has 2 cores, so headroom and nginx get what the hogs leave),
// and checks, from headroom's result and independently from nginx's own
// access log, that under 0.25% of the requests were refused (ten times the
// reference's 5xx threshold, 0.025%; twenty times under the 5% refused
// before), and that about 300 requests a second reached it (a run that sent
// little would meet no 503s either). A failure prints the 503s of each 15 s
// slice, so bunching that grows over the run shows as 503s that grow slice
// by slice.
//
// Why a burst of 10, and not "no 503 at all": users on independent
// phases start like a Poisson process, and at half its rate a bucket of 5
// refuses such arrivals now and then by chance alone (a handful of 503s in
// 2 min with phases kept apart); 10 absorbs chance but not bunches. A
// stall of the machine longer than the bucket's burst still wakes its users
// together once: 0, 4, 8, 41 and 19 503s of 37,500 in the runs we made,
// none growing; the 19 fell in three slices, each a second whose intended
// starts were themselves bunched (16 meant in 10 ms, 8 fair, the generator
// on time): users whose responses a stall released together, whom the 1%
// jitter parts over tens of seconds. So no slice count is asked for: a
// closed loop follows the stalls of what it shares the machine with. Before
// users kept their phases (issue 28), this test saw 1,793 503s (5%) here,
// growing; with a burst of 20, 0, which no longer tells the two apart.

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/analysis"
	"github.com/headroom-dev/headroom/result"
)

// hogEnv: with it set (to a duration), the test binary is a CPU hog (see
// TestMain): it busy-loops on one core for that long at most, and stops
// earlier when its parent (the test) is gone.
const hogEnv = "HEADROOM_TEST_HOG"

// hog is the test binary run as a CPU hog: one goroutine that spins until the
// deadline d (a duration, e.g. "4m") or until its parent is gone. It exits.
func hog(d string) {
	limit, err := time.ParseDuration(d)
	if err != nil || limit <= 0 {
		os.Stderr.WriteString("hog: bad " + hogEnv + "=" + d + "\n")
		os.Exit(100)
	}
	runtime.GOMAXPROCS(1)
	parent, end := os.Getppid(), time.Now().Add(limit)
	for x := uint64(1); time.Now().Before(end) && os.Getppid() == parent; {
		for range 1_000_000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if x == 0 { // never: keeps the loop from being optimised away
			os.Exit(101)
		}
	}
	os.Exit(0)
}

// startHogs starts n CPU hogs (the test binary re-run, see hog), each bounded
// to limit, and stops them by PID when the test ends; the kernel kills them
// too if the test process dies first (Pdeathsig).
func startHogs(t *testing.T, n int, limit time.Duration) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), hogEnv+"="+limit.String())
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := cmd.Process.Pid
		t.Cleanup(func() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			_ = cmd.Wait()
		})
	}
}

// accessHit is one line of scripts/nginx.sh's access log.
type accessHit struct {
	at     time.Time // when nginx logged it (the request's end)
	status int
}

// readAccessLog reads scripts/nginx.sh's access log: `$msec $status
// $limit_req_status $request_time "$request"` a line.
func readAccessLog(t *testing.T, path string) []accessHit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var hits []accessHit
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			t.Fatalf("%s: line %q is not `msec status limit_req_status ...`", path, sc.Text())
		}
		sec, err1 := strconv.ParseFloat(fields[0], 64)
		status, err2 := strconv.Atoi(fields[1])
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: line %q is not `msec status limit_req_status ...`", path, sc.Text())
		}
		whole := math.Floor(sec)
		hits = append(hits, accessHit{at: time.Unix(int64(whole), int64(math.Round((sec-whole)*1e3))*1e6), status: status})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return hits
}

// slice15 is one 15 s slice of the run in nginx's access log.
type slice15 struct {
	from     time.Duration
	n        int // requests
	refused  int // 503s
	inWindow bool
}

// slices15 is the access log by 15 s slice from the run's start.
func slices15(hits []accessHit, start time.Time, window result.Window) []slice15 {
	const slice = 15 * time.Second
	var by []slice15
	for _, h := range hits {
		i := int(h.at.Sub(start) / slice)
		if h.at.Before(start) {
			i = 0
		}
		for len(by) <= i {
			from := time.Duration(len(by)) * slice
			by = append(by, slice15{from: from, inWindow: from.Seconds() >= window.Start && (from+slice).Seconds() <= window.End+1})
		}
		by[i].n++
		if h.status == 503 {
			by[i].refused++
		}
	}
	return by
}

// table prints slices one line each, the measured window's marked.
func table(slices []slice15) string {
	var b strings.Builder
	for _, c := range slices {
		in := ""
		if c.inWindow {
			in = " (window)"
		}
		pct := 0.0
		if c.n > 0 {
			pct = 100 * float64(c.refused) / float64(c.n)
		}
		fmt.Fprintf(&b, "  %4.0fs-%4.0fs  %6d requests  %5d 503s  %6.2f%%%s\n", c.from.Seconds(), (c.from + 15*time.Second).Seconds(), c.n, c.refused, pct, in)
	}
	return b.String()
}

// memDir is a directory for nginx's files (its access log above all) in
// memory, /dev/shm, when the machine has one, else the test's temp dir:
// a log write that waits on a busy disk (the other tests' builds) stalls
// nginx, which holds every request in flight and releases them together,
// and that bunches any closed-loop client's users; the generator's stalls
// are what this test is about. Removed when the test ends.
func memDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "headroom-limiter-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// allowed is how many of n requests may fail under the reference's 5xx
// threshold, 0.025%.
func allowed(n int64) int64 { return n / 4000 }

func TestLimiterUnderContention(t *testing.T) {
	const (
		rate, burst = 600, 10 // the limiter: requests a second for all users, and its burst
		users       = 300     // half the capacity: one request each a second
		hogs        = 2
		ramp        = 10 * time.Second
		duration    = 2 * time.Minute
	)
	scenario := abs(t, "../../bench/limiter.star")
	binary(t) // built before the hogs start

	dir := memDir(t)
	port := freePorts(t, 1)[0]
	target := "http://127.0.0.1:" + strconv.Itoa(port)
	startScript(t, "nginx", abs(t, "../../scripts/nginx.sh"), dir,
		// nginx ahead of the hogs (root, as CI is): a stall of the target
		// holds every request in flight and releases them together, which
		// bunches any closed-loop client's users; the generator's stalls
		// are what this test is about.
		[]string{"PORT=" + strconv.Itoa(port), "RATE=" + strconv.Itoa(rate), "BURST=" + strconv.Itoa(burst), "NICE=-10"})

	// Bounded however the test ends: the run's length and a minute more.
	startHogs(t, hogs, ramp+duration+time.Minute)

	out := filepath.Join(t.TempDir(), "run")
	began := time.Now()
	code, _, stdout, stderr := outcome(t, command(t, "", nil, "run", scenario, "--target", target,
		"--users", strconv.Itoa(users), "--ramp", ramp.String(), "--duration", duration.String(),
		"--quiet", "--no-report", "--out", out))
	t.Logf("headroom ran %v with %d hogs beside it", time.Since(began).Round(time.Second), hogs)
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

	hits := readAccessLog(t, filepath.Join(dir, "access.log"))
	var refused, inWindow int
	from := r.StartedAt.Add(time.Duration(r.Window.Start * float64(time.Second)))
	to := r.StartedAt.Add(time.Duration(r.Window.End * float64(time.Second)))
	for _, h := range hits {
		if h.status == 503 {
			refused++
		}
		if !h.at.Before(from) && h.at.Before(to) {
			inWindow++
		}
	}
	bySlice := slices15(hits, r.StartedAt, r.Window)
	g := r.Generator
	t.Logf("headroom: %d requests in the %.0f s window, %.1f req/s, %d errors, %d timeouts, statuses %v; generator: %.0f%% of a core, %d late wake-ups, overloaded %v; its schedule: %s",
		r.Totals.Count, r.Window.Seconds, r.Totals.RPS, r.Totals.Errors, r.Totals.Timeouts, r.Totals.Status, g.CPUPercent, g.LateWakeups, g.Overloaded,
		analysis.ScheduleLine(g.Lateness, g.Burstiness))
	if g.Lateness == nil || g.Lateness.Starts < int64(users)*int64(duration/time.Second) || g.Burstiness == nil {
		t.Errorf("result.json: generator.lateness %+v, burstiness %+v: want every start counted", g.Lateness, g.Burstiness)
	}

	// Users' phases must not gather: under 0.25% refused in all, by either
	// count. Phases that gather refuse more slice after slice: 5% in all
	// here before users kept their phases.
	var refusals []string
	if n := r.Totals.Errors + r.Totals.Timeouts + r.RampTotals.Errors + r.RampTotals.Timeouts; n > 10*allowed(r.Totals.Count+r.RampTotals.Count) {
		refusals = append(refusals, fmt.Sprintf("result.json: %d errors and timeouts of %d requests (%d of them 503s in the window), past 0.25%%", n, r.Totals.Count+r.RampTotals.Count, r.Totals.Status["503"]))
	}
	if int64(refused) > 10*allowed(int64(len(hits))) {
		refusals = append(refusals, fmt.Sprintf("nginx's access log: %d of %d requests answered 503, past 0.25%%", refused, len(hits)))
	}
	var errSeconds []string // the seconds that had errors, with what the generator's schedule looked like then
	for _, p := range r.Timeline {
		if p.Errors > 0 {
			errSeconds = append(errSeconds, fmt.Sprintf("  at %.0f s: %d errors; starts: p99 %.1f ms late, at most %d in 10 ms (%d meant), %d in 100 ms (%d meant)",
				p.T, p.Errors, p.LateP99Ms, p.Max10ms, p.Meant10ms, p.Max100ms, p.Meant100))
		}
	}
	if len(refusals) > 0 {
		t.Errorf("%s\na token bucket of %d/s with a burst of %d refused requests at half its capacity: users' phases gathered into bunches. By 15 s slice of the run, from nginx's access log:\n%s%s",
			strings.Join(refusals, "\n"), rate, burst, table(bySlice), strings.Join(errSeconds, "\n"))
	} else {
		t.Logf("nginx's access log by 15 s slice of the run:\n%s%s", table(bySlice), strings.Join(errSeconds, "\n"))
	}

	// The load was the load asked for: about users requests a second, by
	// headroom's count and by nginx's.
	want := float64(users)
	if rps := r.Totals.RPS; math.Abs(rps-want) > 0.1*want {
		t.Errorf("result.json: %.1f requests/s in the window, want %.0f ± 10%% (%d users, one request a second each)", rps, want, users)
	}
	if rps := float64(inWindow) / r.Window.Seconds; math.Abs(rps-want) > 0.1*want {
		t.Errorf("nginx's access log: %d requests in headroom's %.0f s window (%.1f/s), want %.0f/s ± 10%%", inWindow, r.Window.Seconds, rps, want)
	}
	// The two counts of the window agree (to a second's requests at each edge).
	if d := math.Abs(float64(inWindow - int(r.Totals.Count))); d > 2*want {
		t.Errorf("nginx logged %d requests in the window, headroom counted %d", inWindow, r.Totals.Count)
	}
}
