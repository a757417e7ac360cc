package live

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/headroom-dev/headroom/report"
)

// MaxViewers is how many browsers may watch at once; past it a page's
// stream is refused (503), so a page left open many times cannot grow
// the run's memory.
const MaxViewers = 16

// queued is how many updates wait for a viewer: past it the oldest is
// dropped (and counted), so the page shows the newest.
const queued = 2

// hub hands each update to every viewer without ever waiting for one.
type hub struct {
	mu      sync.Mutex
	viewers map[chan []byte]bool
	latest  []byte // the last update, a new viewer's first
	final   []byte // the report's page, once the run has ended
	dropped int64
}

func newHub() *hub { return &hub{viewers: map[chan []byte]bool{}} }

func (h *hub) watched() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.viewers) > 0 && h.final == nil
}

func (h *hub) droppedFrames() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dropped
}

func (h *hub) publish(f []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.final != nil {
		return
	}
	h.latest = f
	for ch := range h.viewers {
		h.send(ch, f)
	}
}

// send queues f for one viewer, dropping its oldest update if it is full.
func (h *hub) send(ch chan []byte, f []byte) {
	for {
		select {
		case ch <- f:
			return
		default:
		}
		select {
		case <-ch:
			h.dropped++
		default:
		}
	}
}

func (h *hub) finish(f []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.final, h.latest = f, f
	for ch := range h.viewers {
		h.send(ch, f)
	}
}

// join adds a viewer with the update it starts from; nil when there are
// MaxViewers already.
func (h *hub) join() (chan []byte, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.viewers) >= MaxViewers {
		return nil, false
	}
	ch := make(chan []byte, queued)
	if h.latest != nil {
		ch <- h.latest
	}
	h.viewers[ch] = true
	return ch, true
}

func (h *hub) leave(ch chan []byte) {
	h.mu.Lock()
	delete(h.viewers, ch)
	h.mu.Unlock()
}

// pending is how many viewers have not yet been sent the report's page.
func (h *hub) pending() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.viewers)
}

// isFinal says whether f is the report's page: the stream's last update.
func (h *hub) isFinal(f []byte) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(f) > 0 && len(h.final) > 0 && &f[0] == &h.final[0]
}

//go:embed page/live.js
var assets embed.FS

var pageTemplate = template.Must(template.New("live").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>{{.Style}}
body { max-width: 1200px; }
#state { color: #57606a; font-size: .9rem; }
#live figure { display: inline-block; width: calc(50% - 1.5rem); margin: .5rem; vertical-align: top; }
#live canvas { width: 100%; height: auto; }
</style>
<script src="live.js" defer></script>
</head>
<body>
<main>
<h1>{{.Title}}</h1>
<p id="state">waiting for the run's first second…</p>
<div id="live"></div>
</main>
</body>
</html>
`))

// csp lets the page run its own script and read its own stream, nothing
// else; the report it turns into at the end is drawn by the same rules.
const csp = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; img-src data:"

// idleViewer is how long a viewer may take nothing: a write of an update
// (or of the stream's headers) still blocked after it drops the viewer and
// frees its slot. Updates come every second, so a viewer 30 behind shows
// a stale page anyway; 30 s still lets a browser on a slow link (55 KB an
// update at 2 KB/s) or a busy machine take one now and then. A browser
// dropped reconnects by itself (EventSource) and starts from the newest
// update, so letting one go costs it little; only holders of the key can
// take a slot, so this frees the slots of pages left open on a machine
// that slept or a tab that froze, not of strangers.
const idleViewer = 30 * time.Second

// Handler serves the page (/KEY/), its script (/KEY/live.js) and its
// stream of updates (/KEY/events), to GET only; key is not empty.
//
// The key is a path prefix rather than a query parameter (?key=): the
// page's own requests are relative (live.js, events), so they carry it
// without the page or its script handling it, where a query parameter
// must be added to each one by hand. Either sits whole in the browser's
// history, and either would leave in a Referer: the answers say
// Referrer-Policy: no-referrer, so neither does.
//
// A request whose path does not begin with the key is answered 404, as
// any path the server lacks, before anything else is looked at: it takes
// no viewer's slot and costs a compare (constant-time: how much of a
// guess was right does not show in the time). With loopback set, a keyed
// request whose Host is not a loopback name is refused: a web page
// elsewhere cannot read the run through a name it points at 127.0.0.1
// (DNS rebinding).
func (v *View) Handler(title, key string, loopback bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		pageTemplate.Execute(w, struct {
			Title string
			Style template.CSS
		}{title, template.CSS(report.Style)})
	})
	mux.HandleFunc("GET /live.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		b, _ := assets.ReadFile("page/live.js")
		w.Write(b)
	})
	mux.HandleFunc("GET /events", v.stream)
	under := http.StripPrefix("/"+key, mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, _, slash := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if key == "" || subtle.ConstantTimeCompare([]byte(k), []byte(key)) != 1 {
			http.NotFound(w, r)
			return
		}
		if loopback && !loopbackHost(r.Host) {
			http.Error(w, "the live view answers to 127.0.0.1 and localhost only", http.StatusMisdirectedRequest)
			return
		}
		if !slash { // /KEY: the page's relative requests need /KEY/
			http.Redirect(w, r, key+"/", http.StatusFound)
			return
		}
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Cache-Control", "no-store")
		under.ServeHTTP(w, r)
	})
}

func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// stream streams the updates to one viewer as server-sent events. A
// viewer that takes nothing for idleViewer is let go (see write).
func (v *View) stream(w http.ResponseWriter, r *http.Request) {
	ch, ok := v.hub.join()
	if !ok {
		http.Error(w, fmt.Sprintf("%d viewers already watch this run", MaxViewers), http.StatusServiceUnavailable)
		return
	}
	defer v.hub.leave(ch)
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{}) // a kept-alive connection's next answer has none
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	if write(w, rc, nil) != nil {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case f := <-ch:
			t0 := time.Now()
			err := write(w, rc, f)
			v.spent.Add(int64(time.Since(t0)))
			if err != nil || v.hub.isFinal(f) {
				return
			}
		}
	}
}

// write sends b to a viewer and flushes it, or gives up once the viewer
// has taken nothing for idleViewer (an error: the viewer is gone).
func write(w http.ResponseWriter, rc *http.ResponseController, b []byte) error {
	rc.SetWriteDeadline(time.Now().Add(idleViewer)) // unsupported by a test's recorder only
	if _, err := w.Write(b); err != nil {
		return err
	}
	return rc.Flush()
}

// Server is the live view served at an address.
type Server struct {
	URL string
	srv *http.Server
	v   *View
}

// Addr turns --ui's value into a listen address: a bare port is on
// 127.0.0.1. Off loopback says so (warn non-empty): the page's key
// crosses the network in plain HTTP, and whoever sees it can read the run
// (its target, request names, figures).
func Addr(s string) (addr, warn string, err error) {
	if _, perr := strconv.Atoi(s); perr == nil {
		s = "127.0.0.1:" + s
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", "", fmt.Errorf("--ui %q: want a port or HOST:PORT, e.g. --ui 8089 or --ui 127.0.0.1:8089", s)
	}
	if !loopbackHost(host) {
		shown := host
		if shown == "" {
			shown = "every interface"
		}
		warn = fmt.Sprintf("the live view listens on %s, off loopback: its URL's key is its only guard, and it travels in plain HTTP, so anyone who sees the traffic to port %s can read this run's target, requests and figures (it is read-only)", shown, port)
	}
	return s, warn, nil
}

// Serve serves v at addr (from Addr) until Close, under a key of its own
// (Handler): URL is the page's address with it, http://HOST:PORT/KEY/.
func Serve(v *View, addr, title string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--ui: %w", err)
	}
	host, _, _ := net.SplitHostPort(addr)
	loopback := loopbackHost(host)
	hostport := ln.Addr().String()
	if !loopback && (host == "" || host == "0.0.0.0" || host == "::") {
		hostport = net.JoinHostPort("127.0.0.1", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	}
	key := rand.Text() // 26 characters of A-Z and 2-7: 130 random bits, nothing to escape in a URL
	s := &Server{URL: "http://" + hostport + "/" + key + "/", v: v, srv: server(v.Handler(title, key, loopback))}
	go s.srv.Serve(smallSends{ln})
	return s, nil
}

// sendBuffer is what the kernel may hold for a connection's peer, in
// bytes (Linux doubles it): room for an update of 55 KB; at a 100 ms
// round trip, 64 KiB in flight carries 640 KB/s, ten times the page's
// most; and little for a viewer that does not read to hide behind (see
// smallSends).
const sendBuffer = 32 << 10

// smallSends is a listener whose connections keep sendBuffer for their
// peer. Left to itself Linux grows a connection's buffer to 4 MiB: a
// client on loopback that never read took 3.8 MB, minutes of a small
// run's updates, before a write blocked and idleViewer began to count;
// with 32 KiB it takes some 160 KB.
type smallSends struct{ net.Listener }

func (l smallSends) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(sendBuffer)
	}
	return c, err
}

// idleConn is how long a connection may wait for its next request
// before it is closed: a browser asks for the page, its script and its
// stream within a second, and opens a connection again when it needs one.
const idleConn = 10 * time.Second

// server is the live view's http.Server for h: a connection that sends no
// request's header within 5 s, or none after its last answer within
// idleConn, is closed; a header is at most 64 KiB (a browser's, cookies
// for 127.0.0.1 included, is some KB). No ReadTimeout or WriteTimeout:
// they would end the streams, which the viewers' own deadline bounds.
func server(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: idleConn, MaxHeaderBytes: 64 << 10}
}

// Close gives the viewers up to wait to receive what is queued for them
// (the report's page), then stops the server.
func (s *Server) Close(wait time.Duration) {
	deadline := time.Now().Add(wait)
	for s.v.hub.pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		s.srv.Close()
	}
	s.srv.Close() // the streams Shutdown does not wait for
}
