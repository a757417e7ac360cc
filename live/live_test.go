package live

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/internal/testing/memhttp"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/runner"
)

// A viewer that does not read loses its oldest updates, counted, never
// holding up the publisher; it always gets the newest.
func TestSlowViewerLosesOldUpdatesOnly(t *testing.T) {
	h := newHub()
	ch, ok := h.join()
	if !ok {
		t.Fatal("refused the first viewer")
	}
	done := make(chan struct{})
	go func() {
		for i := range 100 {
			h.publish([]byte{byte(i)})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("publishing waited for a viewer that does not read")
	}
	if got := h.droppedFrames(); got != 100-queued {
		t.Errorf("%d updates dropped, want %d", got, 100-queued)
	}
	if f := <-ch; f[0] != 100-queued {
		t.Errorf("the viewer's oldest kept update is %d, want %d", f[0], 100-queued)
	}
	for range MaxViewers - 1 {
		h.join()
	}
	if _, ok := h.join(); ok {
		t.Errorf("a viewer past %d was let in", MaxViewers)
	}
}

func TestAddr(t *testing.T) {
	for _, c := range []struct {
		in, addr string
		warn     bool
	}{
		{"8089", "127.0.0.1:8089", false},
		{"127.0.0.1:8089", "127.0.0.1:8089", false},
		{"localhost:8089", "localhost:8089", false},
		{"[::1]:8089", "[::1]:8089", false},
		{":8089", ":8089", true},
		{"0.0.0.0:8089", "0.0.0.0:8089", true},
		{"10.1.2.3:8089", "10.1.2.3:8089", true},
	} {
		addr, warn, err := Addr(c.in)
		if err != nil || addr != c.addr || (warn != "") != c.warn {
			t.Errorf("Addr(%q) = %q, %q, %v; want %q, warning %v", c.in, addr, warn, err, c.addr, c.warn)
		}
	}
	if _, _, err := Addr("nope"); err == nil || !strings.Contains(err.Error(), "--ui 8089") {
		t.Errorf("a bad --ui: %v", err)
	}
}

// key is the tests' key: Serve makes a random one.
const key = "KEYOFTHETESTS2345KEYOFTHET"

// The page answers under its key, on loopback names only (no DNS
// rebinding), to GET only, and its stream starts with the latest update.
func TestHandlerServesTheStream(t *testing.T) {
	v := New()
	srv := httptest.NewServer(v.Handler("a run", key, true))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/"+key+"/", nil)
	req.Host = "attacker.example"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a foreign Host: %v %v", resp.StatusCode, err)
	}
	if resp, err := http.Post(srv.URL+"/"+key+"/events", "text/plain", nil); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("a POST: %v %v", resp.StatusCode, err)
	}
	resp, err := http.Get(srv.URL + "/" + key + "/")
	if err != nil || resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") ||
		resp.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("the page: %v %v", resp, err)
	}
}

// A request without the key, or with another, is answered 404 as a path
// the server lacks, and takes no viewer's slot: 16 of them, held open,
// and a browser with the key still watches. The page's own requests are
// relative, so they carry the key.
func TestKeylessRequestsTakeNoSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := New()
		c := &http.Client{Transport: &http.Transport{DialContext: memhttp.Dial(t, v.Handler("a run", key, true))},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		get := func(path string) (*http.Response, string) {
			t.Helper()
			resp, err := c.Get("http://127.0.0.1:8089" + path)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			t.Cleanup(func() { resp.Body.Close() })
			if resp.Header.Get("Content-Type") == "text/event-stream" {
				return resp, "" // held open, unread
			}
			b, _ := io.ReadAll(resp.Body)
			return resp, string(b)
		}
		wrong := []string{"/events", "/events?key=" + key, "/", "/live.js", "/" + key[:len(key)-1] + "X/events",
			"/" + strings.ToLower(key) + "/events", "/" + key + key + "/events", "/x/" + key + "/events", "//" + key + "/events"}
		for i := range MaxViewers {
			path := wrong[i%len(wrong)]
			if resp, body := get(path); resp.StatusCode != http.StatusNotFound || body != "404 page not found\n" {
				t.Errorf("GET %s: %d %.80q, want 404 and no hint", path, resp.StatusCode, body)
			}
		}
		if n := v.hub.pending(); n != 0 {
			t.Errorf("%d viewers joined without the key", n)
		}
		if resp, _ := get("/" + key + "/events"); resp.StatusCode != http.StatusOK {
			t.Fatalf("the viewer with the key: %d", resp.StatusCode)
		}
		synctest.Wait()
		if n := v.hub.pending(); n != 1 {
			t.Errorf("%d viewers, want the one with the key", n)
		}

		// the page, at /KEY/ (and /KEY sent there), asks for its script and stream relative to it
		if resp, _ := get("/" + key); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/"+key+"/" {
			t.Errorf("/KEY: %d to %q, want /KEY/", resp.StatusCode, resp.Header.Get("Location"))
		}
		if _, page := get("/" + key + "/"); !strings.Contains(page, `<script src="live.js"`) {
			t.Errorf("the page's script is not asked for relative to it:\n%s", page)
		}
		if _, js := get("/" + key + "/live.js"); !strings.Contains(js, `new EventSource("events")`) {
			t.Errorf("the script's stream is not asked for relative to the page:\n%.300s", js)
		}
	})
}

// A viewer that takes nothing keeps its slot for idleViewer, then is let
// go, and a new viewer takes the slot and its first update. Half the
// viewers send their request and never read (in memory nothing is
// buffered for them, so not even the stream's headers leave), half read
// the headers and stop (their first update, a second later, does not).
func TestIdleViewerIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := New()
		dial := memhttp.Dial(t, v.Handler("a run", key, true))
		for i := range MaxViewers {
			conn, err := dial(t.Context(), "tcp", "127.0.0.1:8089")
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "GET /%s/events HTTP/1.1\r\nHost: 127.0.0.1:8089\r\n\r\n", key)
			if i%2 == 1 {
				if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err != nil || resp.StatusCode != 200 {
					t.Fatalf("a viewer's headers: %v %v", resp, err)
				}
			}
		}
		stop := make(chan struct{})
		ticked := make(chan struct{})
		go func() { // an update a second, as a run's ticks
			defer close(ticked)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Second):
					v.hub.publish(fmt.Appendf(nil, "data: update %d\n\n", i))
				}
			}
		}()
		defer func() { close(stop); <-ticked }()
		synctest.Wait()
		if n := v.hub.pending(); n != MaxViewers {
			t.Fatalf("%d viewers joined, want %d", n, MaxViewers)
		}
		time.Sleep(idleViewer - time.Second)
		synctest.Wait()
		if n := v.hub.pending(); n != MaxViewers {
			t.Errorf("%d viewers left before %v without an update, want none to", MaxViewers-n, idleViewer)
		}
		time.Sleep(3 * time.Second) // past the deadline of the first update, sent at 1 s
		synctest.Wait()
		if n := v.hub.pending(); n != 0 {
			t.Fatalf("%d viewers still hold their slot after %v without an update", n, idleViewer)
		}
		c := &http.Client{Transport: &http.Transport{DialContext: dial}}
		resp, err := c.Get("http://127.0.0.1:8089/" + key + "/events")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("a new viewer: %v %v", resp, err)
		}
		defer resp.Body.Close()
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "data: update ") {
			t.Errorf("the new viewer's first update: %q %v", line, err)
		}
	})
}

// Over TCP, a viewer that never reads is seen not to take updates (its
// write blocked, so idleViewer counts) after some hundreds of KB, not the
// 4 MiB Linux would otherwise buffer for it. Updates of 10 KB are sent one
// at a time, each waited on until the viewer has taken it from its queue;
// one still there after a second is blocked. (A write slower than that
// with room to go would stop the count early: the test cannot fail by it.)
func TestViewerThatDoesNotReadBlocksSoon(t *testing.T) {
	v := New()
	s, err := Serve(v, "127.0.0.1:0", "a run")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(0)
	m := regexp.MustCompile(`^http://(127\.0\.0\.1:[0-9]+)/([A-Z2-7]{26})/$`).FindStringSubmatch(s.URL)
	if m == nil {
		t.Fatalf("URL %q, want http://127.0.0.1:PORT/KEY/", s.URL)
	}
	conn, err := net.Dial("tcp", m[1])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /%s/events HTTP/1.1\r\nHost: %s\r\n\r\n", m[2], m[1])
	queue := func() chan []byte {
		v.hub.mu.Lock()
		defer v.hub.mu.Unlock()
		for ch := range v.hub.viewers {
			return ch
		}
		return nil
	}
	taken := func(ch chan []byte) bool {
		for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
			if len(ch) == 0 {
				return true
			}
		}
		return false
	}
	var ch chan []byte
	for end := time.Now().Add(10 * time.Second); ch == nil && time.Now().Before(end); time.Sleep(time.Millisecond) {
		ch = queue()
	}
	if ch == nil {
		t.Fatal("the viewer never joined")
	}
	frame := append([]byte("data: "), bytes.Repeat([]byte("x"), 10<<10)...)
	frame = append(frame, "\n\n"...)
	sent := 0
	for ; sent < 4<<20; sent += len(frame) {
		v.hub.publish(bytes.Clone(frame))
		if !taken(ch) {
			break
		}
	}
	if t.Logf("%d KB taken by a viewer that does not read", sent>>10); sent > 1<<20 {
		t.Errorf("a viewer that does not read took %d KB before its writes blocked, want under 1 MB", sent>>10)
	}
}

// A connection that sends no request is closed after the header's 5 s,
// and one whose request was answered after idleConn without another.
func TestIdleConnectionsAreClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := &pipes{conns: make(chan net.Conn), done: make(chan struct{})}
		srv := server(New().Handler("a run", key, true))
		go srv.Serve(ln)
		defer srv.Close()
		// closedAfter is how long the server keeps conn open from now (an
		// hour: it did not close it).
		closedAfter := func(conn net.Conn) time.Duration {
			t0 := time.Now()
			closed := make(chan struct{})
			go func() { io.Copy(io.Discard, conn); close(closed) }()
			select {
			case <-closed:
			case <-time.After(time.Hour):
				conn.Close()
				<-closed
			}
			return time.Since(t0)
		}
		if d := closedAfter(ln.dial()); d != 5*time.Second {
			t.Errorf("a connection with no request closed after %v, want 5s", d)
		}
		kept := ln.dial()
		fmt.Fprintf(kept, "GET /%s/ HTTP/1.1\r\nHost: 127.0.0.1:8089\r\n\r\n", key)
		resp, err := http.ReadResponse(bufio.NewReader(kept), nil)
		if err != nil || resp.StatusCode != 200 || resp.Close {
			t.Fatalf("the page, kept alive: %v %v", resp, err)
		}
		io.Copy(io.Discard, resp.Body)
		if d := closedAfter(kept); d != idleConn {
			t.Errorf("a kept-alive connection closed %v after its answer, want %v", d, idleConn)
		}
	})
}

// pipes serves in-memory connections to the server's own http.Server in
// virtual time (memhttp.Dial serves a handler with an http.Server of its
// own, without the timeouts under test).
type pipes struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (p *pipes) dial() net.Conn {
	c, s := net.Pipe()
	p.conns <- s
	return c
}

func (p *pipes) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}

func (p *pipes) Close() error { p.once.Do(func() { close(p.done) }); return nil }

func (p *pipes) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8089} }

// A tick with a viewer builds an update from the result so far, and the
// viewer's stream sends it: in virtual time, the stream's handler run on
// a recorder until it waits for its next update.
func TestTickReachesTheViewer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := New()
		ctx, cancel := context.WithCancel(t.Context())
		req := httptest.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:8089/"+key+"/events", nil)
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() { v.Handler("a run", key, true).ServeHTTP(rec, req); close(done) }()
		synctest.Wait() // the viewer has joined and waits
		if !v.hub.watched() {
			t.Fatal("the stream's viewer did not join")
		}
		snap := metrics.NewSnapshot()
		now := time.Now()
		snap.Start, snap.End = now.Add(-time.Second), now
		snap.Add(&metrics.Sample{Kind: metrics.Request, Name: "GET /x/{id}", Outcome: metrics.OK, Status: 200, Latency: 3 * time.Millisecond})
		res := &result.Result{Kind: "run", Timeline: []metrics.Point{{T: 1, Users: 3, RPS: 1}}}
		v.Status("steady 00:01/00:10")
		v.Tick(runner.Tick{Res: res, Interval: snap})
		synctest.Wait() // the update written
		cancel()
		<-done
		if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
			t.Errorf("content type %q", ct)
		}
		checkUpdate(t, rec.Body.String())
	})
}

// checkUpdate checks the stream's first event: what the tick above put in it.
func checkUpdate(t *testing.T, stream string) {
	t.Helper()
	// one event: a JSON head line, then the HTML, every line "data: "
	rd := bufio.NewReader(strings.NewReader(stream))
	var lines []string
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("%v: %q", err, stream)
		}
		if line == "\n" {
			break
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not an event's data line: %q", line)
		}
		lines = append(lines, strings.TrimSuffix(data, "\n"))
	}
	var f head
	if err := json.Unmarshal([]byte(lines[0]), &f); err != nil {
		t.Fatalf("%v: %s", err, lines[0])
	}
	html := strings.Join(lines[1:], "\n")
	for _, want := range []string{"steady 00:01/00:10", "GET /x/{id}", "p99 (ms)", `data-chart="users"`} {
		if !strings.Contains(html, want) {
			t.Errorf("the update lacks %q:\n%s", want, html)
		}
	}
	if len(f.Charts) < 5 || f.Charts[0].Name != "users" || len(f.Charts[0].Series[0].Points) != 2 {
		t.Errorf("charts %+v", f.Charts)
	}
}

// A long timeline is sent as buckets, each its largest value: a spike stays.
func TestBucketKeepsSpikes(t *testing.T) {
	var x, y []float64
	for i := range 1000 {
		x, y = append(x, float64(i)), append(y, 1)
	}
	y[501] = 50
	y[10] = math.NaN()
	p := bucket(x, y, 100)
	if len(p) != 200 {
		t.Fatalf("%d values, want 100 points", len(p))
	}
	if p[2*50+1] != 50 || p[1] != 1 || p[len(p)-2] != 999 {
		t.Errorf("buckets: spike %v, first %v, last x %v", p[2*50+1], p[1], p[len(p)-2])
	}
	if b := (points{1, math.NaN()}).append(nil); string(b) != "[1,null]" {
		t.Errorf("NaN as %s", b)
	}
}
