package testbed

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"
)

// maxBodyBytes bounds a request body; a larger one is answered 413.
const maxBodyBytes = 1 << 20

// statusClientClosed is the status_code a request is counted under when its client went away before
// the reply was ready (nginx's convention); nothing is written to the client.
const statusClientClosed = 499

// Server is the testbed: an in-memory chat API with a worker pool of a known size. It is safe for
// concurrent use. Create it with New.
type Server struct {
	cfg     Config
	now     func() time.Time
	store   *store
	pool    *pool
	metrics *metrics
	routes  map[string]*boundRoute
	hub     *hub
	// eventCost and connCost are Config's after Scale; 0 when negative there.
	eventCost, connCost time.Duration
}

// boundRoute is a route with its service times after Scale.
type boundRoute struct {
	route
	service time.Duration   // the whole service time
	store   []time.Duration // of each store call, as route.store
}

// New returns a testbed with cfg (defaults applied), its store filled with cfg.Channels public
// channels of seeded posts, and its own Prometheus registry.
func New(cfg Config) *Server {
	return newServer(cfg, time.Now)
}

// newServer is New with the clock injected; now gives the posts' timestamps and the api time.
// Service times are waited out with the runtime's timers.
func newServer(cfg Config, now func() time.Time) *Server {
	cfg = cfg.WithDefaults()
	s := &Server{cfg: cfg, now: now, routes: map[string]*boundRoute{}, hub: newHub()}
	s.store = newStore(cfg, now)
	s.pool = newPool(cfg.Workers, max(cfg.Queue, 0), now)
	for _, r := range routeTable() {
		b := &boundRoute{route: r, service: scaled(r.total(), cfg.Scale)}
		if r.name == "Login" || r.name == "CreateUser" {
			b.service += max(cfg.LoginCost, 0) // the password's hash
		}
		for _, sc := range r.store {
			b.store = append(b.store, scaled(sc.time, cfg.Scale))
		}
		s.routes[r.name] = b
	}
	s.metrics = newMetrics(s.pool, s.hub)
	s.eventCost, s.connCost = scaled(max(cfg.EventCost, 0), cfg.Scale), scaled(max(cfg.ConnCost, 0), cfg.Scale)
	return s
}

// Config returns the configuration in use, defaults applied.
func (s *Server) Config() Config { return s.cfg }

// Handler returns the HTTP API: the /api/v4 routes (see Routes), the WebSocket endpoint GET
// /api/v4/websocket (see websocket.go), GET /metrics (Prometheus text format
// from the server's own registry) and GET /healthz. Any other path is answered 404 with a JSON body.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, r := range s.routes {
		mux.Handle(r.method+" "+r.path, s.serve(r))
	}
	mux.HandleFunc("GET /api/v4/websocket", s.websocket)
	mux.Handle("GET /metrics", s.metrics.handler())
	if s.cfg.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, reply{status: http.StatusOK, body: status("OK")})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, errorReply(http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path))
	})
	return mux
}

// call is what a route's handler gets: the request, its body (already read) and the session's user id
// ("" on routes that need no session).
type call struct {
	r      *http.Request
	body   []byte
	userID string
	events int // WebSocket events the handler queued: each holds the worker eventCost longer
}

// reply is what a route's handler returns; it is written after the worker is released.
type reply struct {
	status  int
	body    any
	header  http.Header
	cookies []*http.Cookie
}

func errorReply(code int, msg string) reply {
	return reply{status: code, body: map[string]string{"error": msg}}
}

func status(s string) map[string]string { return map[string]string{"status": s} }

// serve wraps a route's handler in the capacity model: read the body, take a worker (or wait in the
// queue, or answer 503), authenticate, run the handler, wait out the rest of the service time counted
// from the start pool.acquire gives, release the worker, then write the reply. Every admitted request
// is charged its route's full service time whatever its outcome, so the capacity depends only on the
// mix. mattermost_api_time counts from the request's arrival to its reply being written.
func (s *Server) serve(r *boundRoute) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		arrived := s.now()
		rep, completed := s.handle(r, w, req)
		if rep.status != statusClientClosed {
			writeJSON(w, rep)
		}
		if completed && rep.status < 400 {
			for i, sc := range r.route.store {
				s.metrics.storeTime.WithLabelValues(sc.method).Observe(r.store[i].Seconds())
			}
		}
		s.metrics.apiTime.WithLabelValues(r.name, req.Method, strconv.Itoa(rep.status)).
			Observe(s.now().Sub(arrived).Seconds())
	})
}

// handle runs one request through the model; completed reports whether it held a worker for its
// whole service time.
func (s *Server) handle(r *boundRoute, w http.ResponseWriter, req *http.Request) (rep reply, completed bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return errorReply(http.StatusRequestEntityTooLarge, "body larger than 1 MiB"), false
		}
		return reply{status: statusClientClosed}, false
	}
	ctx := req.Context()
	start, err := s.pool.acquire(ctx)
	if err != nil {
		if errors.Is(err, errOverloaded) {
			return errorReply(http.StatusServiceUnavailable, "overloaded"), false
		}
		return reply{status: statusClientClosed}, false
	}
	due := start.Add(r.service)
	freeAt := due
	defer func() { s.pool.release(freeAt) }()
	timer := time.NewTimer(due.Sub(s.now()))
	defer timer.Stop()

	c := &call{r: req, body: body}
	if r.auth {
		c.userID = s.store.session(token(req))
	}
	if r.auth && c.userID == "" {
		rep = errorReply(http.StatusUnauthorized, "missing or invalid session token")
	} else {
		rep = r.handler(s, c)
	}
	if c.events > 0 && s.eventCost > 0 {
		due = due.Add(time.Duration(c.events) * s.eventCost)
		freeAt = due
		timer.Reset(due.Sub(s.now()))
	}
	select {
	case <-timer.C:
		return rep, true
	case <-ctx.Done():
		freeAt = s.now()
		return reply{status: statusClientClosed}, false
	}
}

// token returns the session token of the request: the Authorization: Bearer header, else the
// MMAUTHTOKEN cookie.
func token(r *http.Request) string {
	const bearer = "bearer "
	if h := r.Header.Get("Authorization"); len(h) > len(bearer) && strings.EqualFold(h[:len(bearer)], bearer) {
		return strings.TrimSpace(h[len(bearer):])
	}
	if c, err := r.Cookie("MMAUTHTOKEN"); err == nil {
		return c.Value
	}
	return ""
}

func writeJSON(w http.ResponseWriter, rep reply) {
	for k, vs := range rep.header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	for _, c := range rep.cookies {
		http.SetCookie(w, c)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.status)
	if rep.body != nil {
		_ = json.NewEncoder(w).Encode(rep.body) // the client went away: nothing to do
	}
}
