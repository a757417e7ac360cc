//go:build linux

package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/internal/rusage"
	"github.com/headroom-dev/headroom/internal/testing/hostile"
	"github.com/headroom-dev/headroom/result"
)

// TestRunsAgainstHostileServers runs the real binary, two users for 2 s,
// against servers that misbehave in ways that once crashed headroom, hung
// it past its duration or made it hold gigabytes. Each run must end by
// --duration + --grace (plus start-up and writing), within a memory
// bound, with a result that counts what happened as the right outcome.
// Requests may take a minute (--timeout 1m, unless a case sets its own):
// a run that waited for a stalled request instead of cutting it at the
// grace's end would take that minute, far past the bound on its length.
func TestRunsAgainstHostileServers(t *testing.T) {
	bin := binary(t)
	get := "def act(user):\n    user.http.get(\"/\")\nactions = [action(\"Get\", act)]\nthink_time = think.constant(\"10ms\")\n"
	post := "def act(user):\n    user.http.post(\"/\", json={\"n\": 1})\nactions = [action(\"Post\", act)]\nthink_time = think.constant(\"10ms\")\n"
	cases := []struct {
		name     string
		serve    hostile.Behaviour
		scenario string
		args     []string
		env      []string // added to the run's environment
		code     int      // the exit code: 4 when not one request succeeded
		rssMB    int64    // peak resident memory allowed
		check    func(t *testing.T, res *result.Result, srv *hostile.Server)
	}{
		{name: "100 Continue forever", serve: hostile.Endless("", "HTTP/1.1 100 Continue\r\n\r\n"), scenario: get, code: 4, rssMB: 120,
			check: allFailedWith("more than 32 interim")},
		// Unknown length: the buffer doubles up to the limit, so each user
		// may hold 1.5x the limit while copying, and the garbage collector
		// lets the heap reach twice what is live, more when it falls behind:
		// measured 4.2-4.6x users x --max-body, at 8 MiB and at 64 MiB.
		{name: "endless body", serve: hostile.Endless("HTTP/1.1 200 OK\r\n\r\n", "x"), scenario: get, code: 4, rssMB: 2*64*5 + 64,
			check: allFailedWith("larger than the limit")},
		{name: "endless body, --max-body 8MiB", serve: hostile.Endless("HTTP/1.1 200 OK\r\n\r\n", "x"), scenario: get,
			args: []string{"--max-body", "8MiB"}, code: 4, rssMB: 2*8*5 + 64,
			check: allFailedWith("larger than the limit")},
		{name: "never answers", serve: hostile.Silent, scenario: get, code: 4, rssMB: 120,
			check: func(t *testing.T, res *result.Result, _ *hostile.Server) {
				if res.Totals.Count != 0 || res.Totals.Errors != 0 {
					t.Errorf("requests in the window: %+v, want none finished (canceled at the end)", res.Totals)
				}
			}},
		{name: "head a byte every 50 ms", serve: hostile.Trickle("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 50*time.Millisecond),
			scenario: get, args: []string{"--timeout", "500ms"}, code: 4, rssMB: 120,
			check: func(t *testing.T, res *result.Result, _ *hostile.Server) {
				if res.Totals.Timeouts == 0 || res.Totals.Timeouts != res.Totals.Count {
					t.Errorf("totals %+v, want every request a timeout", res.Totals)
				}
			}},
		{name: "POST read and dropped on a kept-alive connection", serve: hostile.ReadThenClose, scenario: post, rssMB: 120,
			check: func(t *testing.T, res *result.Result, srv *hostile.Server) {
				tot := res.Totals
				if tot.Count == 0 || tot.Errors == 0 || tot.Errors >= tot.Count {
					t.Errorf("totals %+v, want every second POST an error", tot)
				}
				// Each connection serves one POST and reads a second one it
				// drops: never sent twice, so requests read = 2 x connections.
				if r, c := srv.Requests.Load(), srv.Conns.Load(); r > 2*c {
					t.Errorf("the server read %d requests on %d connections: a POST was sent again", r, c)
				}
			}},
		// Known length: one buffer of the response's size per user (it was
		// 505 MB when each response was held twice). Each response read is
		// 60 MB of garbage: under the whole test command's load the collector
		// falls behind and the peak rose from 330 MB (alone) to 429 MB once.
		// GOGC=50 collects at 1.5 times the live heap instead of twice:
		// 245-265 MB on a loaded machine, so the bound tests the buffers held,
		// not how busy the machine is.
		{name: "60 MB bodies", serve: hostile.Body(60 << 20), scenario: get, rssMB: 420, env: []string{"GOGC=50"},
			check: func(t *testing.T, res *result.Result, _ *hostile.Server) {
				if res.Totals.Count == 0 || res.Totals.Errors != 0 || res.Totals.BytesIn < 60<<20 {
					t.Errorf("totals %+v, want 60 MB responses read", res.Totals)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, err := hostile.Start(tc.serve)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			dir := t.TempDir()
			sc := filepath.Join(dir, "s.star")
			if err := os.WriteFile(sc, []byte(tc.scenario), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "run")
			// (A case's own --timeout comes later and wins.)
			args := append([]string{"run", sc, "--target", srv.URL.String(), "--users", "2", "--duration", "2s",
				"--grace", "1s", "--timeout", "1m", "--quiet", "--no-report", "--out", out}, tc.args...)
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), tc.env...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			start := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatalf("did not run: %v", err)
			}
			peak := watchPeak(cmd.Process.Pid)
			err = cmd.Wait()
			took := time.Since(start)
			if code := cmd.ProcessState.ExitCode(); code != tc.code {
				t.Errorf("exit %d, want %d: %v\n%s", code, tc.code, err, stderr.String())
			}
			// 2 s + 1 s of grace, plus start-up, the reachability check and
			// writing the result: 2.3-3.4 s, alone or on half a busy core.
			// A stalled request or a server that never stops, not cut at the
			// grace's end, would hold the run for its minute's timeout: the
			// bound lies between, far from both.
			if took > 20*time.Second {
				t.Errorf("took %v, want the run over by --duration 2s + --grace 1s", took)
			}
			rss := peak()
			t.Logf("took %v, peak RSS %d MB", took.Round(time.Millisecond), rss)
			if rss > tc.rssMB {
				t.Errorf("peak RSS %d MB, want at most %d MB", rss, tc.rssMB)
			}
			res, err := result.Read(out)
			if err != nil {
				t.Fatalf("no result: %v\n%s", err, stderr.String())
			}
			tc.check(t, res, srv)
		})
	}
}

// allFailedWith wants every request in the window an error whose message
// holds part.
func allFailedWith(part string) func(*testing.T, *result.Result, *hostile.Server) {
	return func(t *testing.T, res *result.Result, _ *hostile.Server) {
		tot := res.Totals
		if tot.Count == 0 || tot.Errors != tot.Count {
			t.Errorf("totals %+v, want every request an error", tot)
		}
		for _, r := range res.Requests {
			for msg := range r.Messages {
				if !strings.Contains(msg, part) {
					t.Errorf("error %q, want one about %q", msg, part)
				}
			}
		}
	}
}

// TestRunAgainstAHostileProfileEndpoint runs the real binary against a
// good server whose pprof endpoint (--profile) serves, in turn, CPU
// profiles too wide to hold (~77 MiB parsed, MaxHeld 48), wide ones that
// can be held (~19 and ~43 MiB), a gzip bomb, a stack 3,000 frames deep,
// garbage and good ones, and a heap profile of nearly all one may hold
// (~46 MiB): the run's peak memory stays under 200 MB (138-150 MB here,
// the heap profile parsed at twice its size as Go's collector lets the
// heap grow), and its result is complete: each slice kept or refused with
// its reason, the phases merged from what fits (MaxMerged). Parsing every
// slice as it came and holding a phase's slices to merge them at once
// took the same run to 650-690 MB.
func TestRunAgainstAHostileProfileEndpoint(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pp := &hostile.PprofEndpoint{Bodies: [][]byte{
		hostile.CPUProfile(time.Second, "main.work", "main.main"), hostile.WideProfile(160_000, 0), hostile.WideProfile(40_000, 1),
		hostile.WideProfile(90_000, 2), hostile.GzipBomb(64 << 20), hostile.WideProfile(40_000, 3), hostile.DeepProfile(3000),
		[]byte("no profile at all"),
	}, Heap: hostile.WideHeapProfile(95_000)}
	prof := httptest.NewServer(pp)
	defer prof.Close()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	defer target.Close()
	dir := t.TempDir()
	sc := filepath.Join(dir, "s.star")
	get := "def act(user):\n    user.http.get(\"/\")\nactions = [action(\"Get\", act)]\nthink_time = think.constant(\"10ms\")\n"
	if err := os.WriteFile(sc, []byte(get), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "run")
	cmd := exec.Command(bin, "run", sc, "--target", target.URL, "--users", "2", "--duration", "9s",
		"--profile", prof.URL+"/debug/pprof", "--profile-slice", "1s", "--quiet", "--out", out)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	peak := watchPeak(cmd.Process.Pid)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	rss := peak()
	t.Logf("%d profiles served, peak RSS %d MB; stderr:\n%s", pp.Served.Load(), rss, stderr.String())
	if rss > 200 {
		t.Errorf("peak RSS %d MB, want at most 200 MB", rss)
	}
	res, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	ps := res.Profiles
	if ps == nil || len(ps.Slices) < 4 {
		t.Fatalf("profiles %+v: want a slice a second", ps)
	}
	why := map[string]bool{}
	for _, s := range ps.Slices {
		if s.Error != "" {
			why[s.Error[:min(len(s.Error), 40)]] = true
		}
	}
	t.Logf("slices refused for %v", why)
	window := false
	for _, ph := range ps.Phases {
		t.Logf("phase %s: %d slices, %d left out, %.1f CPU s", ph.Phase, ph.Slices, ph.LeftOut, ph.CPUSeconds)
		window = window || ph.Phase == "window" && ph.Slices > 0 && ph.CPUSeconds > 0
	}
	if !window {
		t.Errorf("phases %+v: want the window's, merged", ps.Phases)
	}
	if res.Totals.Count == 0 || res.Totals.Errors != 0 {
		t.Errorf("totals %+v: want the users' requests, all answered", res.Totals)
	}
	if _, err := os.Stat(filepath.Join(out, "report.md")); err != nil {
		t.Errorf("no report: %v", err)
	}
}

// watchPeak follows a started process's peak resident memory until the
// returned func is called, once it has ended: it returns the last seen,
// in MB. It reads the process's own high-water mark (VmHWM) every 10 ms,
// so only the last of its life can pass unseen: rusage's Maxrss, which
// would see it all, also counts this test process's memory, which the
// child shared (vfork) until its exec.
func watchPeak(pid int) func() int64 {
	var mu sync.Mutex
	var kb int64
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if v, ok := rusage.VmHWM(strconv.Itoa(pid)); ok {
				mu.Lock()
				kb = max(kb, v)
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		mu.Lock()
		defer mu.Unlock()
		return kb / 1024
	}
}
