//go:build linux

package main

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/internal/browser"
	"github.com/headroom-dev/headroom/internal/testing/servertest"
	"github.com/headroom-dev/headroom/testbed"
)

// TestLiveViewInChromium watches a ceiling search on two local agents in
// a real headless Chromium, through --ui at the URL headroom prints (its
// key in the path; the server without it answers 404): the page shows the request names
// with their percentiles and sees them change, the checks, the decisions,
// both agents and drawn charts, logs no fault, and becomes the run's
// report when it ends. HEADROOM_LIVE_SHOT=FILE keeps a screenshot of the
// page late in a longer search against a testbed of 2 workers, whose
// checks fire (docs/live-ceiling.png is one).
//
// The page has shown all that some 10.5 s after headroom started, alone
// or on half a busy core: the search's clock, not the machine, sets when.
// The search may go on for 2 minutes, so the page is still live however
// slowly the browser looks at it, and the test ends it with Ctrl-C once
// it has seen all (the page becomes the report of an interrupted run as
// of a finished one: cli's liveUI.end).
func TestLiveViewInChromium(t *testing.T) {
	t.Parallel() // beside the rest: a server or a browser of its own, mostly waited on
	servertest.Require(t, browser.Bin, "chromium")
	target, seconds := testbedURL(t), "2m"
	shot := os.Getenv("HEADROOM_LIVE_SHOT")
	if shot != "" { // for the docs: a search that meets its ceiling, on a testbed of 2 workers
		tb := httptest.NewServer(testbed.New(testbed.Config{Workers: 2}).Handler())
		t.Cleanup(tb.Close)
		target, seconds = tb.URL, "90s"
	}
	cmd := command(t, "", nil, "ceiling", abs(t, "../../examples/chat.star"), "--target", target, "--ui", "127.0.0.1:0",
		"--local-agents", "2", "--start-users", "10", "--settle", "2s", "--judge", "3s", "--max-duration", seconds,
		"--out", filepath.Join(t.TempDir(), "run"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var mu sync.Mutex
	var logs strings.Builder
	url := make(chan string, 1)
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if u, ok := strings.CutPrefix(sc.Text(), "live view: "); ok {
				url <- u
			}
		}
		cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	log := func() string { mu.Lock(); defer mu.Unlock(); return logs.String() }
	began := time.Now()
	var page string
	select {
	case page = <-url:
	case <-time.After(time.Minute):
		t.Fatalf("no live view URL within a minute:\n%s", log())
	}
	// The page is under a key of the run's own: without it, nothing.
	origin := regexp.MustCompile(`^(http://127\.0\.0\.1:[0-9]+)/[A-Z2-7]{26}/$`).FindStringSubmatch(page)
	if origin == nil {
		t.Fatalf("live view URL %q, want http://127.0.0.1:PORT/KEY/", page)
	}
	for _, path := range []string{"/", "/events"} {
		resp, err := http.Get(origin[1] + path)
		if err != nil || resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s without the key: %v %v, want 404", path, resp, err)
		}
		if err == nil {
			resp.Body.Close()
		}
	}

	b, err := browser.Start(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Open(page); err != nil {
		t.Fatal(err)
	}
	type view struct {
		Text     string
		Table    string // the request table
		Canvases int
		Drawn    int // canvases with the first series' blue on them
	}
	const probe = `(() => {
	  if (!document.body) return {};
	  const t = [...document.querySelectorAll("#live table")].find(t => t.querySelector("th")?.textContent === "request");
	  const blue = (c) => { const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
	    for (let i = 0; i < d.length; i += 4) if (d[i] < 16 && Math.abs(d[i+1]-114) < 16 && Math.abs(d[i+2]-178) < 16) return true; return false; };
	  const cs = [...document.querySelectorAll("#live canvas")];
	  return {text: document.body.innerText, table: t ? t.innerText : "", canvases: cs.length, drawn: cs.filter(blue).length};
	})()`
	look := func() view {
		var v view
		if err := b.Eval(probe, &v); err != nil {
			t.Log(err) // a page between two documents: the next look sees one
		}
		return v
	}
	// The request names and their percentiles; then the same table changed.
	var first, v view
	deadline := time.Now().Add(90 * time.Second) // within the search's 2 minutes
	for ; time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		v = look()
		if first.Table == "" && strings.Contains(v.Table, "GET /api/v4/channels/{id}/posts") && strings.Contains(v.Table, "p99 (ms)") {
			first = v
		}
		if first.Table != "" && v.Table != first.Table && strings.Contains(v.Text, "The latest events") && strings.Contains(v.Text, "Agents") &&
			strings.Contains(v.Text, "Levels the search held") {
			break
		}
	}
	if first.Table == "" || v.Table == first.Table {
		t.Fatalf("the page never showed the request table changing; it shows:\n%s\n\nheadroom:\n%s", v.Text, log())
	}
	t.Logf("the live page showed it all %v after headroom started", time.Since(began).Round(time.Millisecond))
	if shot == "" { // seen: the run's end, by Ctrl-C (see above)
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"all requests", "Health checks", "start at 10 users", "Levels the search held", "client p99 latency", "The users ran on 2 agents", "Generator", "headroom: CPU",
		"Requests, the last"} {
		if !strings.Contains(v.Text, want) {
			t.Errorf("the page lacks %q:\n%s", want, v.Text)
		}
	}
	if agents := regexp.MustCompile(`(?m)^[01]\tlocal-[01]\t`).FindAllString(v.Text, -1); len(agents) != 2 {
		t.Errorf("want a line for each of 2 agents, found %q in:\n%s", agents, v.Text)
	}
	if v.Canvases < 5 || v.Drawn < 5 {
		t.Errorf("%d charts on the page, %d drawn: want the report's 5 over time at least", v.Canvases, v.Drawn)
	}
	// The run ends: the page becomes its report, which stays once headroom
	// is gone. Until then, with HEADROOM_LIVE_SHOT, a screenshot every 4 s:
	// the last one of the live page is kept.
	for end := time.After(2 * time.Minute); ; {
		select {
		case <-exited:
		case <-end:
			t.Fatalf("headroom did not end:\n%s", log())
		case <-time.After(4 * time.Second):
			if shot == "" || !strings.Contains(look().Text, "Requests, the last") {
				continue
			}
			if png, err := b.Screenshot(false); err != nil {
				t.Error(err)
			} else if err := os.WriteFile(shot, png, 0o644); err != nil {
				t.Error(err)
			}
			continue
		}
		break
	}
	var title string
	if err := b.Eval("document.title", &title); err != nil {
		t.Fatal(err)
	}
	if v = look(); strings.Contains(title, "(live)") || !strings.Contains(v.Text, "Health checks") || !strings.Contains(v.Text, "Command:") {
		t.Errorf("after the run the page is not its report: title %q\n%.3000s", title, v.Text)
	}
	for _, l := range b.Logs() {
		t.Errorf("the page logged: %s", l)
	}
}
