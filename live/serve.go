package live

import (
	"context"
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
<script src="/live.js" defer></script>
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

// Handler serves the page (/), its script (/live.js) and its stream of
// updates (/events), to GET only. With loopback set, a request whose Host
// is not a loopback name is refused: a web page elsewhere cannot read the
// run through a name it points at 127.0.0.1 (DNS rebinding).
func (v *View) Handler(title string, loopback bool) http.Handler {
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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if loopback && !loopbackHost(r.Host) {
			http.Error(w, "the live view answers to 127.0.0.1 and localhost only", http.StatusMisdirectedRequest)
			return
		}
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		mux.ServeHTTP(w, r)
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

// stream streams the updates to one viewer as server-sent events.
func (v *View) stream(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	ch, ok := v.hub.join()
	if !ok {
		http.Error(w, fmt.Sprintf("%d viewers already watch this run", MaxViewers), http.StatusServiceUnavailable)
		return
	}
	defer v.hub.leave(ch)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case f := <-ch:
			t0 := time.Now()
			rc := http.NewResponseController(w)
			rc.SetWriteDeadline(time.Now().Add(10 * time.Second)) // a stuck viewer is let go
			_, err := w.Write(f)
			if err == nil {
				err = rc.Flush()
			}
			v.spent.Add(int64(time.Since(t0)))
			if err != nil || v.hub.isFinal(f) {
				return
			}
		}
	}
}

// Server is the live view served at an address.
type Server struct {
	URL string
	srv *http.Server
	v   *View
}

// Addr turns --ui's value into a listen address: a bare port is on
// 127.0.0.1. Off loopback says so (warn non-empty): anyone who reaches
// the address can read the run (its target, request names, figures).
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
		warn = fmt.Sprintf("the live view listens on %s, off loopback: anyone who can reach port %s sees this run's target, requests and figures (it is read-only)", shown, port)
	}
	return s, warn, nil
}

// Serve serves v at addr (from Addr) until Close.
func Serve(v *View, addr, title string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--ui: %w", err)
	}
	host, _, _ := net.SplitHostPort(addr)
	loopback := loopbackHost(host)
	u := "http://" + ln.Addr().String() + "/"
	if !loopback && (host == "" || host == "0.0.0.0" || host == "::") {
		u = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)) + "/"
	}
	s := &Server{URL: u, v: v, srv: &http.Server{Handler: v.Handler(title, loopback), ReadHeaderTimeout: 5 * time.Second}}
	go s.srv.Serve(ln)
	return s, nil
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
