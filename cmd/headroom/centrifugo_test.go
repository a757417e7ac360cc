//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// centrifugo is a real Centrifugo started by scripts/centrifugo.sh for one
// test: WebSockets, its HTTP API and its metrics all on base.
type centrifugo struct {
	dir, base string
}

func (c centrifugo) metrics() string { return c.base + "/metrics" }

// startCentrifugo starts Centrifugo on a free port of 127.0.0.1 with its
// config in a temp dir and the extra environment of scripts/centrifugo.sh,
// and stops it by PID when the test ends. It fails, and does not skip, when
// Centrifugo is not installed: the test command installs it
// (scripts/test.sh), and a test that passes by doing nothing would hide
// that it no longer runs.
func startCentrifugo(t *testing.T, env ...string) centrifugo {
	t.Helper()
	script := abs(t, "../../scripts/centrifugo.sh")
	port := strconv.Itoa(freePorts(t, 1)[0])
	c := centrifugo{dir: t.TempDir(), base: "http://127.0.0.1:" + port}
	startScript(t, "Centrifugo", script, c.dir, env, port)
	return c
}

// Centrifugo's own series (5.4.9; names checked on the running server).
const (
	cfClients     = "centrifugo_node_num_clients"                   // gauge, refreshed every 10 s only
	cfActions     = "centrifugo_node_action_count"                  // {action="add_client"|"remove_client"|"add_subscription"|...}, counted as they happen
	cfSent        = "centrifugo_transport_messages_sent"            // frames to clients {frame_type="push_publication"|"server_ping"|...}
	cfReceived    = "centrifugo_transport_messages_received"        // frames from clients {frame_type="connect"|"subscribe"|"client_pong"}
	cfAPI         = "centrifugo_api_command_duration_seconds_count" // HTTP API commands answered {method="publish"}
	cfBroker      = "centrifugo_node_messages_sent_count"           // to the broker (memory engine) {type="publication"}
	cfDisconnects = "centrifugo_client_num_server_disconnects"      // {code}: clients the server closed
)

// cfScrape is one scrape of Centrifugo's metrics taken while headroom ran:
// what it saw lies between before and after.
type cfScrape struct {
	before, after  time.Time
	clients        float64 // the gauge
	added, removed float64 // add_client and remove_client so far
	err            error
}

// watchCentrifugo scrapes c's metrics every 250 ms until stop is called,
// which returns the scrapes.
func watchCentrifugo(c centrifugo) (stop func() []cfScrape) {
	ctx, cancel := context.WithCancel(context.Background())
	client := &http.Client{Timeout: 2 * time.Second}
	var (
		mu      sync.Mutex
		scrapes []cfScrape
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			s := cfScrape{before: time.Now()}
			var text string
			text, s.err = fetch(ctx, client, c.metrics())
			s.after = time.Now()
			if s.err == nil {
				s.clients = promSum(text, cfClients)
				s.added = promSum(text, cfActions, `action="add_client"`)
				s.removed = promSum(text, cfActions, `action="remove_client"`)
			}
			if ctx.Err() != nil {
				return
			}
			mu.Lock()
			scrapes = append(scrapes, s)
			mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() []cfScrape {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return scrapes
	}
}

func fetch(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != 200 {
		err = fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	return string(b), err
}

// cfMetrics is Centrifugo's metrics page now.
func cfMetrics(t *testing.T, c centrifugo) string {
	t.Helper()
	text, err := fetch(context.Background(), &http.Client{Timeout: 10 * time.Second}, c.metrics())
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// cfCounts is what one user of examples/centrifugo.star says as it ends
// (--var counts=print): a line "[user N] {...}" on stderr.
type cfCounts struct {
	Published  int64    `json:"published"`
	Received   int64    `json:"received"`
	First      *int64   `json:"first"` // offsets of the first and latest publication received
	Last       *int64   `json:"last"`
	Missed     int64    `json:"missed"`
	Pings      int64    `json:"pings"`
	Reconnects int64    `json:"reconnects"`
	Closed     *string  `json:"closed"`
	MeanMs     *float64 `json:"latency_mean_ms"`
	MaxMs      float64  `json:"latency_max_ms"`
	line       string   // as printed
}

var userLine = regexp.MustCompile(`(?m)^\[user (\d+)\] (\{.*\})$`)

// cfUsers reads every user's counts from headroom's stderr, by user id.
func cfUsers(t *testing.T, stderr string) map[int]cfCounts {
	t.Helper()
	users := map[int]cfCounts{}
	for _, m := range userLine.FindAllStringSubmatch(stderr, -1) {
		id, _ := strconv.Atoi(m[1])
		var c cfCounts
		if err := json.Unmarshal([]byte(m[2]), &c); err != nil {
			t.Fatalf("user %d printed %q: %v", id, m[2], err)
		}
		if _, dup := users[id]; dup {
			t.Fatalf("user %d printed its counts twice:\n%s", id, stderr)
		}
		c.line = m[2]
		users[id] = c
	}
	return users
}

// requestsAfter sums the requests of the timeline's points that end after
// t (seconds since the start): those of the second before t onward.
func requestsAfter(tl []metrics.Point, t float64) int64 {
	var n int64
	for _, p := range tl {
		if p.T > t {
			n += p.Requests
		}
	}
	return n
}

// TestCentrifugo runs examples/centrifugo.star against a real Centrifugo,
// a pub/sub server no one here wrote, and checks headroom's figures
// against the server's own count of the same things: the clients it held,
// the publications it took, the frames it fanned out, the pings it sent
// and the answers it got. Every user subscribes to one channel over a
// WebSocket and publishes to it over the HTTP API, so each publication
// goes to every user. Centrifugo pings every 3 s and waits 2 s for the
// answer (instead of 25 s and 8 s), so that a short run shows the
// scenario's handler answering pings, as a user's handler runs between
// its actions of a few milliseconds.
func TestCentrifugo(t *testing.T) {
	t.Parallel() // beside the rest: a server or a browser of its own, mostly waited on
	c := startCentrifugo(t, "PING_INTERVAL=3s", "PONG_TIMEOUT=2s", "DEBUG=true")
	scenario := abs(t, "../../examples/centrifugo.star")
	binary(t) // built before the watch begins

	t.Run("run", func(t *testing.T) {
		const users = 20
		out := filepath.Join(t.TempDir(), "run")
		stop := watchCentrifugo(c)
		code, _, stdout, stderr := outcome(t, command(t, "", nil, "run", scenario, "--target", c.base,
			"--scrape", c.metrics(), "--server-latency", "centrifugo_api_command_duration_seconds_histogram:method",
			"--users", strconv.Itoa(users), "--ramp", "1s", "--duration", "15s", "--var", "counts=print", "--out", out,
			"--profile", c.base+"/debug/pprof", "--profile-slice", "2s"))
		scrapes := stop()
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
		final := cfMetrics(t, c)
		checkCentrifugoProfiles(t, r, out)

		// headroom's side. Every request in the window is a publication
		// Centrifugo took; no user reconnected (no handshake in the window).
		var pubs *metrics.Summary
		for i, q := range r.Requests {
			if q.Name == "POST /api/publish" {
				pubs = &r.Requests[i]
			} else {
				t.Errorf("request %q in the window (%d): want only POST /api/publish", q.Name, q.Count)
			}
		}
		// A user thinks 1 to 3 s between publications (its actions take
		// milliseconds): 4 or more each in 15 s.
		if pubs == nil || pubs.Count < 4*users || pubs.Status["200"] != pubs.Count {
			t.Fatalf("POST /api/publish in the window: %+v; want %d or more, all 200", pubs, 4*users)
		}
		// The handler's runs: none failed (a refused connect or subscribe,
		// an offset skipped).
		actions := map[string]metrics.Summary{}
		for _, a := range r.Actions {
			actions[a.Name] = a
		}
		for _, name := range []string{"Publish", "(ws message)"} {
			if a := actions[name]; a.Count == 0 || a.Errors+a.Timeouts > 0 {
				t.Errorf("action %s: %d runs, %d errors, %d timeouts (%v); want some, none failed", name, a.Count, a.Errors, a.Timeouts, a.Messages)
			}
		}
		if r.Setup == nil || r.Setup.Users != users || len(r.Setup.Requests) != 1 || r.Setup.Requests[0].Status["101"] != users {
			t.Fatalf("setup: %+v; want %d users set up, each with one WebSocket handshake (101)", r.Setup, users)
		}
		// headroom's connected figures: the connections held, and deliveries
		// timed from each publication's stamp.
		var deliveries, sent, peak int64
		for _, p := range r.Timeline {
			deliveries += p.Deliveries
			sent += p.MessagesOut
			peak = max(peak, p.Connections)
		}
		if peak != users || len(r.WebSockets) != 1 || r.WebSockets[0].Abnormal != 0 || r.WebSockets[0].Reconnects != 0 {
			t.Errorf("connections: peak %d, websockets %+v; want %d, none closed abnormally or reconnected", peak, r.WebSockets, users)
		}
		if len(r.Deliveries) != 1 || r.Deliveries[0].Name != "publication" || r.Deliveries[0].Count == 0 || r.Deliveries[0].P99Ms <= 0 {
			t.Errorf("deliveries in the window: %+v; want publications', timed", r.Deliveries)
		}

		counts := cfUsers(t, stderr)
		if len(counts) != users {
			t.Fatalf("%d users printed their counts, want %d:\n%s", len(counts), users, stderr)
		}

		// Publications: Centrifugo took exactly the ones headroom saw answered
		// (the ramp's, the window's and the stop's), and the users published
		// that many.
		published := promSum(final, cfAPI, `method="publish"`)
		if b := promSum(final, cfBroker, `type="publication"`); b != published {
			t.Errorf("Centrifugo: %v publish commands answered, %v publications to its broker", published, b)
		}
		answered := pubs.Status["200"] + r.RampTotals.Status["200"] + r.StoppingTotals.Status["200"]
		var sum cfCounts
		for _, u := range counts {
			sum.Published += u.Published
			sum.Received += u.Received
			sum.Pings += u.Pings
		}
		// Every publication received was timed, once; every message a user
		// sent (connect, subscribe, pongs) is one Centrifugo received.
		if deliveries != sum.Received {
			t.Errorf("%d deliveries timed over the run, the users received %d publications: want equal", deliveries, sum.Received)
		}
		if got := promSum(final, "centrifugo_transport_messages_received"); float64(sent) != got {
			t.Errorf("headroom sent %d messages, Centrifugo received %v", sent, got)
		}
		if float64(answered) != published || sum.Published != answered {
			t.Errorf("publications: Centrifugo took %v, headroom counted %d answered (window %d, ramp %d, stop %d), the users made %d; want all equal",
				published, answered, pubs.Status["200"], r.RampTotals.Status["200"], r.StoppingTotals.Status["200"], sum.Published)
		}

		// Fan-out. On a fresh server the channel's offsets are 1..P, one per
		// publication. Each user received, in order and with none missed,
		// every publication from the first after its subscribe to the last
		// it handled. Centrifugo sent a user nothing from before its
		// subscription, so its frames lie between what the users handled
		// and everything from each user's first offset on; the difference
		// is what the run's end cut: publications the server had sent when
		// the users stopped handling messages. Those are the publications of
		// the run's last second at most (Centrifugo fans a publication out
		// before it answers it, and a user handles a message in its next
		// pause, after an action of a few milliseconds), and the
		// publications of the stop itself.
		total := int64(published)
		cut := requestsAfter(r.Timeline, r.Window.End-1)
		var upper int64
		for id, u := range counts {
			if u.First == nil || u.Last == nil {
				t.Errorf("user %d: received %d publications without offsets; want offsets (the channel's history, scripts/centrifugo.sh)", id, u.Received)
				continue
			}
			upper += total - *u.First + 1
			if u.Missed != 0 || u.Received != *u.Last-*u.First+1 || u.Reconnects != 0 || u.Closed != nil {
				t.Errorf("user %d: %s; want offsets %d to %d all received (%d), none missed, no reconnect", id, u.line, *u.First, *u.Last, *u.Last-*u.First+1)
			}
			if *u.Last > total || total-*u.Last > cut {
				t.Errorf("user %d: last offset %d of %d publications: want within the %d of the run's last second and its stop", id, *u.Last, total, cut)
			}
		}
		push := int64(promSum(final, cfSent, `frame_type="push_publication"`))
		if push < sum.Received || push > upper {
			t.Errorf("Centrifugo sent %d publications to subscribers; the users handled %d, and received at most %d (each from its first offset to the last of %d): want in between",
				push, sum.Received, upper, total)
		}
		t.Logf("%d publications (%d in the window), %d sent to subscribers, %d handled; the end cut at most %d of each user's", total, pubs.Count, push, sum.Received, cut)

		// Connections: one per user, none closed while the run held them,
		// all closed by its end. Counters, read as they happen; the gauge of
		// clients is refreshed only every 10 s (centrifuge's updateMetrics),
		// so the 15 s window holds at least one refresh.
		if a, rm := promSum(final, cfActions, `action="add_client"`), promSum(final, cfActions, `action="remove_client"`); a != users || rm != users {
			t.Errorf("Centrifugo: %v clients added, %v removed; want %d each (one connection per user, closed at its end)", a, rm, users)
		}
		if a, rm := promSum(final, cfActions, `action="add_subscription"`), promSum(final, cfActions, `action="remove_subscription"`); a != users || rm != users {
			t.Errorf("Centrifugo: %v subscriptions added, %v removed; want %d each", a, rm, users)
		}
		from := r.StartedAt.Add(time.Duration(r.Window.Start * float64(time.Second)))
		to := r.StartedAt.Add(time.Duration(r.Window.End * float64(time.Second)))
		var inWindow []cfScrape
		failed := 0
		for _, s := range scrapes {
			if s.err != nil {
				failed++
				continue
			}
			if s.added-s.removed > users || s.clients > users {
				t.Errorf("scrape at %v: %v clients connected (gauge %v): more than the %d users", s.before.Format("15:04:05.000"), s.added-s.removed, s.clients, users)
			}
			if !s.before.Before(from) && !s.after.After(to) {
				inWindow = append(inWindow, s)
			}
		}
		// A scrape may time out (2 s) when the machine stalls Centrifugo
		// beside the whole test suite: one of 56 did on a fresh clone's CI,
		// and headroom's own scrape at the same moment, counted as failed.
		if failed > len(scrapes)/10 {
			t.Errorf("%d of %d scrapes of Centrifugo's metrics failed", failed, len(scrapes))
		}
		if len(inWindow) < 20 {
			t.Fatalf("%d scrapes inside the window (%v to %v), want 20 or more (every 250 ms for 15 s)", len(inWindow), from, to)
		}
		var gauge float64
		for _, s := range inWindow {
			if s.removed != 0 {
				t.Errorf("scrape at %v, inside the window: %v clients removed already; want none while the run held its users", s.before.Format("15:04:05.000"), s.removed)
			}
			gauge = max(gauge, s.clients)
		}
		if last := inWindow[len(inWindow)-1]; last.added != users {
			t.Errorf("last scrape inside the window: %v clients added, want the %d users", last.added, users)
		}
		if gauge != users {
			t.Errorf("%s inside the window: at most %v; want %d (it is refreshed every 10 s, the window is 15 s)", cfClients, gauge, users)
		}

		// Pings: the users answered every one they handled, and Centrifugo
		// got every answer; a ping unanswered at the end is one per user at
		// most (one unanswered for 2 s would have closed the connection,
		// which nothing did).
		pings, pongs := promSum(final, cfSent, `frame_type="server_ping"`), promSum(final, cfReceived, `frame_type="client_pong"`)
		if float64(sum.Pings) != pongs || pongs > pings || pings-pongs > users || pongs < users {
			t.Errorf("pings: Centrifugo sent %v and received %v answers, the users answered %d; want answers as many as the users', at most %d fewer than pings, one or more per user",
				pings, pongs, sum.Pings, users)
		}
		for id, u := range counts {
			if u.Pings == 0 {
				t.Errorf("user %d answered no ping in 15 s of pings every 3 s", id)
			}
		}
		if d := promSum(final, cfDisconnects); d != 0 {
			t.Errorf("Centrifugo disconnected %v clients itself (%s)", d, cfDisconnects)
		}

		// The server's own figures in the result: its process, and its
		// time per API method over the same window, which counted the
		// publications headroom did but for those that ended between a
		// window's edge and the scrape there (the first second's and the
		// last one's).
		if r.Server == nil || len(r.Server.Targets) != 1 {
			t.Fatalf("server figures: %+v, want one target (%s)", r.Server, c.metrics())
		}
		st := r.Server.Targets[0]
		// One scrape a second of the run's 16, and one before and after:
		// 18 or so. One that times out (2 s, a stall of the machine) is
		// failed and holds up the next one or two, so two such stalls
		// leave 12. A scrape that never works, or runs only at the ends,
		// leaves 2 or none.
		t.Logf("scrapes of %s: %d, %d failed", st.URL, st.Scrapes, st.Failed)
		if st.Scrapes < 10 || st.Failed*4 > st.Scrapes || !strings.Contains(strings.Join(st.Has, ","), "cpu") {
			t.Errorf("scrapes of %s: %d, %d failed, has %v; want 10 or more, at most a quarter failed (a stall of the machine), cpu among them", st.URL, st.Scrapes, st.Failed, st.Has)
		}
		var server float64
		for _, g := range st.Window.Timings {
			for _, it := range g.Items {
				if g.Metric == "centrifugo_api_command_duration_seconds_histogram" && it.Name == "publish" {
					server = it.Count
				}
			}
		}
		var edges int64
		for _, p := range r.Timeline {
			if p.T > r.Window.Start {
				edges = p.Requests // the window's first second
				break
			}
		}
		edges += cut
		if d := server - float64(pubs.Count); d > float64(edges) || -d > float64(edges) {
			t.Errorf("Centrifugo's time by method: publish counted %v times in the window, headroom %d: want within the %d publications of the window's first and last seconds",
				server, pubs.Count, edges)
		}
	})

	t.Run("disconnect", func(t *testing.T) {
		// Centrifugo closes every connection twice while 3 users run: first
		// asking clients to come back (3011, force reconnect), then not to
		// (3503). Each user reconnects and subscribes again at its next
		// action, counting the publications it missed meanwhile as errors of
		// its handler; after the second it stays away, failing one action
		// that says why. Think times are at most 3 s, so 9 s hold both.
		const users = 3
		before := cfMetrics(t, c)
		added0 := promSum(before, cfActions, `action="add_client"`)
		out := filepath.Join(t.TempDir(), "run")
		cmd := command(t, "", nil, "run", scenario, "--target", c.base, "--users", strconv.Itoa(users),
			"--ramp", "0s", "--duration", "9s", "--var", "counts=print", "--out", out)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ran := make(chan error, 1)
		go func() { ran <- cmd.Wait() }()
		t.Cleanup(func() { _ = cmd.Process.Kill() }) // a failure before its end leaves no headroom running
		// waitAdded waits (polling, while headroom runs) until Centrifugo
		// has added n clients since the subtest began.
		waitAdded := func(n float64) {
			t.Helper()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case err := <-ran:
					t.Fatalf("headroom ended (%v) before %v clients connected\nstdout:\n%s\nstderr:\n%s", err, n, &o, &e)
				case <-tick.C:
				}
				if promSum(cfMetrics(t, c), cfActions, `action="add_client"`)-added0 >= n {
					return
				}
			}
		}
		disconnect := func(body string) {
			t.Helper()
			req, _ := http.NewRequest("POST", c.base+"/api/disconnect", strings.NewReader(body))
			req.Header.Set("X-API-Key", "testkey")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || strings.Contains(string(b), "error") {
				t.Fatalf("POST /api/disconnect %s: %d %s", body, resp.StatusCode, b)
			}
		}
		waitAdded(users)
		disconnect(`{"user": "", "disconnect": {"code": 3011, "reason": "force reconnect"}}`)
		waitAdded(2 * users)
		disconnect(`{"user": ""}`) // DisconnectForceNoReconnect: 3503
		if err := <-ran; err != nil {
			t.Fatalf("headroom: %v\nstdout:\n%s\nstderr:\n%s", err, &o, &e)
		}
		r, err := result.Read(out)
		if err != nil {
			t.Fatal(err)
		}
		counts := cfUsers(t, e.String())
		if len(counts) != users {
			t.Fatalf("%d users printed their counts, want %d:\n%s", len(counts), users, &e)
		}
		for id, u := range counts {
			if u.Reconnects != 1 || u.Closed == nil || !strings.Contains(*u.Closed, "close 3503") {
				t.Errorf("user %d: %d reconnects, closed %v; want 1, then closed for good by 3503", id, u.Reconnects, u.Closed)
			}
			// (A user may have received nothing: connected last, just
			// before the first disconnect, and reconnected last, just
			// before the second.)
			if (u.First == nil || u.Last == nil) && u.Received+u.Missed != 0 ||
				u.First != nil && u.Last != nil && u.Received+u.Missed != *u.Last-*u.First+1 {
				t.Errorf("user %d: %s; want every offset from the first to the last received or missed", id, u.line)
			}
		}
		after := cfMetrics(t, c)
		if a := promSum(after, cfActions, `action="add_client"`) - added0; a != 2*users {
			t.Errorf("Centrifugo added %v clients, want %d: each user once, then once again after 3011 and not after 3503", a, 2*users)
		}
		// In the result: the reconnects' handshakes, each
		// user's one failed action saying why it stayed away, and the
		// handler's errors naming only missed publications.
		// (A user's first action, and so its reconnect, may come before
		// the window: the handshakes outside setup are counted wherever
		// they fell.)
		handshakes := r.RampTotals.Status["101"] + r.StoppingTotals.Status["101"]
		for _, q := range r.Requests {
			if q.Name == "WS /connection/websocket" {
				handshakes += q.Status["101"]
			}
		}
		if handshakes != users {
			t.Errorf("%d WebSocket handshakes after setup, want %d (one reconnect each)", handshakes, users)
		}
		for _, a := range r.Actions {
			switch a.Name {
			case "Publish":
				if a.Errors != users || len(a.Messages) != 1 || !strings.Contains(fmt.Sprint(a.Messages), "asked not to reconnect: closed: websocket: close 3503") {
					t.Errorf("Publish: %d errors %v; want %d, each saying Centrifugo asked not to reconnect (3503)", a.Errors, a.Messages, users)
				}
			case "(ws message)":
				for m := range a.Messages {
					if !strings.Contains(m, " missed") {
						t.Errorf("(ws message) failed with %q; want only missed publications", m)
					}
				}
			}
		}
	})
}

// promSum sums the samples of series in a Prometheus text page whose labels
// include every one of want (each as name="value"); a series without
// labels matches when want is empty.
func promSum(text, series string, want ...string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		var labels, value string
		if name, rest, ok := strings.Cut(line, "{"); ok && name == series {
			labels, value, _ = strings.Cut(rest, "} ")
		} else if name, rest, ok := strings.Cut(line, " "); ok && name == series {
			value = rest
		} else {
			continue
		}
		if !containsAll(strings.Split(labels, ","), want) {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			sum += v
		}
	}
	return sum
}

// checkCentrifugoProfiles: a real third-party Go server's CPU profiles
// (Centrifugo's pprof, its debug option) were taken through the run, go
// tool pprof reads them, and the window's merge saw Centrifugo at work.
func checkCentrifugoProfiles(t *testing.T, r *result.Result, out string) {
	t.Helper()
	p := r.Profiles
	if p == nil {
		t.Fatalf("no profiles in the result (notes %q)", r.Notes)
	}
	files := 0
	for _, s := range p.Slices {
		if s.Error != "" {
			t.Errorf("slice %+v failed", s)
		} else if s.File != "" {
			files++
		}
	}
	var window *result.ProfilePhase
	for i := range p.Phases {
		if p.Phases[i].Phase == "window" {
			window = &p.Phases[i]
		}
	}
	if files < 5 || window == nil || window.Slices < 5 || window.CPUSeconds <= 0 || window.PerUnitMs <= 0 {
		t.Fatalf("%d profiles written, window %+v: want 5 or more in 15 s of 2 s slices, Centrifugo's CPU per request", files, window)
	}
	top, err := exec.Command("go", "tool", "pprof", "-top", filepath.Join(out, window.File)).CombinedOutput()
	if err != nil || !strings.Contains(string(top), "Type: cpu") || !strings.Contains(string(top), "centrifug") {
		t.Errorf("go tool pprof -top %s: %v\n%s", window.File, err, top)
	}
}
