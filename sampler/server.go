// Package sampler profiles a server that serves no profiles itself (a
// Python or native process): it samples the process and its children from
// outside, with py-spy or perf, makes their stacks a pprof CPU profile, and
// serves it as Go's pprof endpoint does, so that --profile reads it as it
// reads a Go server's (headroom profiler). It knows nothing of runs.
package sampler

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/profile"

	"github.com/headroom-dev/headroom/serverprof"
)

// A Sampler records the stacks of process pid and its children for d.
type Sampler interface {
	Sample(ctx context.Context, pid int, d time.Duration) (Parsed, error)
}

// The seconds a profile may last, as ?seconds=N asks.
const (
	MinSeconds     = 1
	MaxSeconds     = 60
	DefaultSeconds = 30 // Go's
)

// Server serves the profiles of one process, as Go's net/http/pprof:
// GET /debug/pprof/profile?seconds=N answers after N seconds with a
// gzipped CPU profile. One profile is taken at a time: a request while
// one is taken is answered 429 at once, with Retry-After (headroom's
// --profile tries again a slice later). /debug/pprof/heap is 404: there is
// no heap profile of a process sampled from outside (--profile takes its
// CPU profiles and says so once).
type Server struct {
	Target  Target
	Sampler Sampler
	Proc    Proc
	// Token, when not empty, must come with every request: "Authorization:
	// Bearer TOKEN", or as the password of Basic authentication (a
	// --profile URL's http://user:TOKEN@host/...), compared in constant
	// time.
	Token []byte
	// Log, when set, is told of each profile taken and each failure.
	Log func(string)

	busy  sync.Mutex
	until time.Time // when the profile in flight ends; under mu
	mu    sync.Mutex
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/profile", s.profile)
	mux.HandleFunc("/debug/pprof/heap", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no heap profile: a process sampled from outside has its CPU profiled only", http.StatusNotFound)
	})
	mux.HandleFunc("/debug/pprof/{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "headroom profiler of %s\n\nprofile?seconds=N  a CPU profile over N seconds (%d to %d), one at a time\n", s.Target, MinSeconds, MaxSeconds)
	})
	return s.authorized(mux)
}

func (s *Server) authorized(h http.Handler) http.Handler {
	if len(s.Token) == 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var got string
		if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			got = b
		} else if _, pw, ok := r.BasicAuth(); ok {
			got = pw
		}
		if subtle.ConstantTimeCompare([]byte(got), s.Token) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="headroom profiler"`)
			http.Error(w, "a token is needed: Authorization: Bearer TOKEN, or the URL's http://headroom:TOKEN@host/", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Seconds reads ?seconds=N: DefaultSeconds when absent, else MinSeconds
// to MaxSeconds; an error says why not.
func Seconds(q string) (int, error) {
	if q == "" {
		return DefaultSeconds, nil
	}
	n, err := strconv.Atoi(q)
	if err != nil || n < MinSeconds || n > MaxSeconds {
		return 0, fmt.Errorf("seconds=%s: want %d to %d", cut(q, 20), MinSeconds, MaxSeconds)
	}
	return n, nil
}

func (s *Server) profile(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	secs, err := Seconds(r.URL.Query().Get("seconds"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !s.busy.TryLock() {
		s.mu.Lock()
		left := max(time.Until(s.until).Round(time.Second), time.Second)
		s.mu.Unlock()
		w.Header().Set("Retry-After", strconv.Itoa(int(left/time.Second)))
		http.Error(w, fmt.Sprintf("a profile is being taken (one at a time); it ends in about %v", left), http.StatusTooManyRequests)
		return
	}
	defer s.busy.Unlock()
	d := time.Duration(secs) * time.Second
	s.mu.Lock()
	s.until = time.Now().Add(d)
	s.mu.Unlock()
	pid, err := s.Target.Find(s.Proc)
	if err != nil {
		s.fail(w, err)
		return
	}
	before, cpuErr := s.Proc.CPU(pid)
	p, err := s.Sampler.Sample(r.Context(), pid, d)
	if err != nil {
		s.fail(w, err)
		return
	}
	var n int64
	for _, smp := range p.Sample {
		n += smp.Value[0]
	}
	note := ""
	if after, err := s.Proc.CPU(pid); cpuErr == nil && err == nil {
		if sampled, ok := ScaleToKernel(p, after-before); !ok {
			note = fmt.Sprintf("; %.2f s sampled as running where the kernel counted %.2f s of CPU: scaled to it", sampled.Seconds(), (after - before).Seconds())
		}
	}
	if p.Skipped > 0 || p.Cut > 0 {
		note += fmt.Sprintf("; %d stack lines left out (%s), %d stacks cut to their leaf's %d frames", p.Skipped, p.Why, p.Cut, serverprof.MaxDepth)
	}
	s.log(fmt.Sprintf("profile of process %d over %d s: %d samples, %d stacks%s", pid, secs, n, len(p.Sample), note))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="profile"`)
	if err := p.Write(w); err != nil { // gzipped, as Go's
		s.log("writing the profile: " + err.Error())
	}
}

// ScaleToKernel makes a profile's CPU the kernel's count of it when its
// samples claim more: py-spy counts a Python thread as running while it
// waits for the GIL or for a core (a pool of threads hashing passwords on
// two cores: each counted whole), so its samples can hold several times the
// CPU the process spent. Each sample's CPU is scaled by the same factor:
// the functions keep their shares, and the profile its true CPU, which
// the phases divide by users and requests. A profile within a tick and
// 10% of the kernel's count is kept as it is (ok); one under it too
// (native threads py-spy does not see: never made up).
func ScaleToKernel(p Parsed, kernel time.Duration) (sampled time.Duration, ok bool) {
	i := slices.IndexFunc(p.SampleType, func(st *profile.ValueType) bool { return st.Type == "cpu" && st.Unit == "nanoseconds" })
	if i < 0 || kernel < 0 {
		return 0, true
	}
	for _, smp := range p.Sample {
		sampled += time.Duration(smp.Value[i])
	}
	if sampled <= kernel+Tick || float64(sampled) <= 1.1*float64(kernel) {
		return sampled, true
	}
	f := float64(kernel) / float64(sampled)
	for _, smp := range p.Sample {
		smp.Value[i] = int64(math.Round(float64(smp.Value[i]) * f))
	}
	return sampled, false
}

// fail answers a profile that could not be taken: 503 with the reason
// (the process gone, the sampler missing or refused), and the profiler
// goes on serving.
func (s *Server) fail(w http.ResponseWriter, err error) {
	code := http.StatusServiceUnavailable
	if errors.Is(err, context.Canceled) {
		code = 499 // the client went away: no one reads this
	}
	s.log("no profile: " + err.Error())
	http.Error(w, firstLine(err.Error()), code)
}

func (s *Server) log(msg string) {
	if s.Log != nil {
		s.Log(msg)
	}
}

// Loopback tells whether a listen address is on loopback only:
// 127.0.0.0/8, ::1 or localhost, with a port.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
