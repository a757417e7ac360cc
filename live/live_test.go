package live

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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

// The page answers on loopback names only (no DNS rebinding), to GET only,
// and its stream starts with the latest update.
func TestHandlerServesTheStream(t *testing.T) {
	v := New()
	srv := httptest.NewServer(v.Handler("a run", true))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	req.Host = "attacker.example"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a foreign Host: %v %v", resp.StatusCode, err)
	}
	if resp, err := http.Post(srv.URL+"/events", "text/plain", nil); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("a POST: %v %v", resp.StatusCode, err)
	}
	resp, err := http.Get(srv.URL + "/")
	if err != nil || resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("the page: %v %v", resp, err)
	}

}

// A tick with a viewer builds an update from the result so far, and the
// viewer's stream sends it: in virtual time, the stream's handler run on
// a recorder until it waits for its next update.
func TestTickReachesTheViewer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := New()
		ctx, cancel := context.WithCancel(t.Context())
		req := httptest.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:8089/events", nil)
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() { v.Handler("a run", true).ServeHTTP(rec, req); close(done) }()
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
		v.Tick(runner.LiveTick{Res: res, Interval: snap})
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
