// Package serverprof takes the system under test's CPU profiles during a
// run (--profile): consecutive slices from a Go pprof endpoint, each kept
// in the result directory, merged by phase of the run (users' setup, the
// measured window), and summed up as the functions that spent the CPU.
// It knows nothing of users or checks.
package serverprof

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits on what a profile endpoint may cost headroom.
const (
	// MaxBody is the largest profile read: a Go server's CPU profile of
	// 10 s is tens of KiB; past this it is not a profile worth keeping.
	MaxBody = 32 << 20
	// MaxSlices bounds the slices kept of one target (a day at 10 s).
	MaxSlices = 8640
	// MaxBytes bounds what one target's slices take, on disk (or in
	// memory, with no Dir): past it no more are taken, and the run says so.
	MaxBytes = 512 << 20
	// DefaultSlice is the length of one CPU profile.
	DefaultSlice = 10 * time.Second
)

// Slice is one CPU profile of a target, over [Start, End).
type Slice struct {
	Target     int       // in Capture.Targets
	Start, End time.Time // when it was asked for, and when it came back
	File       string    // relative to the result directory; "" when not written
	Err        string    // why there is no profile; "" when there is
	// Heap is the heap profile taken when the slice ended (t<i>-<n>.heap.pb.gz);
	// HeapErr why there is none.
	Heap, HeapErr string
	// ok: a CPU profile was taken; it is in File, or raw (no Dir). A
	// slice is parsed again when a phase merges it: a long run keeps its
	// profiles on disk, not in memory.
	ok      bool
	raw     []byte
	heapRaw []byte // the heap profile, with no Dir
	size    int    // bytes on disk
}

// Capture takes consecutive CPU profiles of each target while Run runs.
type Capture struct {
	// Targets are pprof base URLs, e.g. http://127.0.0.1:8067/debug/pprof:
	// a slice is GET <target>/profile?seconds=N.
	Targets []string
	Slice   time.Duration // 0: DefaultSlice
	// Dir is where each slice is written (profiles/t<target>-<n>.pb.gz
	// under it); "" keeps them in memory only.
	Dir    string
	Client *http.Client // nil: a plain one
	// Wait is how long past a slice's length its answer may take before
	// the slice is given up (a server too busy or too hostile to answer);
	// 0: 30 s.
	Wait time.Duration
	Warn func(string)     // told once per target of what went wrong; may be nil
	Now  func() time.Time // nil: time.Now

	mu     sync.Mutex
	slices []Slice
	warned map[string]bool // target and kind (cpu, heap) told of
	bytes  map[int]int     // kept of each target
}

// Run takes slices of every target until ctx is done; the slice in flight
// then is lost (a profile cut short is not served).
func (c *Capture) Run(ctx context.Context) {
	if c.Slice <= 0 {
		c.Slice = DefaultSlice
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Client == nil {
		c.Client = &http.Client{}
	}
	if c.Wait <= 0 {
		c.Wait = 30 * time.Second
	}
	var wg sync.WaitGroup
	for i := range c.Targets {
		wg.Go(func() { c.loop(ctx, i) })
	}
	wg.Wait()
}

// loop takes target i's slices one after the other; after a failure it
// waits a slice's length before the next try, so a broken endpoint costs
// one request a slice.
func (c *Capture) loop(ctx context.Context, i int) {
	for n := 1; ctx.Err() == nil && n <= MaxSlices; n++ {
		s := c.take(ctx, i, n)
		if ctx.Err() != nil {
			return // cut short by the run's end: nothing to keep
		}
		c.mu.Lock()
		c.slices = append(c.slices, s)
		if c.bytes == nil {
			c.bytes = map[int]int{}
		}
		c.bytes[i] += s.size
		full := c.bytes[i] >= MaxBytes
		c.mu.Unlock()
		if full {
			c.warn(i, "cpu", fmt.Sprintf("its profiles reached %d MiB: no more are taken of it in this run", MaxBytes>>20))
			return
		}
		if s.HeapErr != "" {
			c.warn(i, "heap", "its heap profile: "+s.HeapErr+" (the CPU profiles go on)")
		}
		if s.Err != "" {
			c.warn(i, "cpu", s.Err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(c.Slice):
			}
		}
	}
}

func (c *Capture) warn(i int, kind, msg string) {
	c.mu.Lock()
	key := fmt.Sprint(i, kind)
	first := !c.warned[key]
	if c.warned == nil {
		c.warned = map[string]bool{}
	}
	c.warned[key] = true
	c.mu.Unlock()
	if first && c.Warn != nil {
		c.Warn(fmt.Sprintf("--profile %s: %s; the run goes on, and tries again every %v (said once)", c.Targets[i], msg, c.Slice))
	}
}

// take asks target i for one slice, n-th of its own, and then for its
// heap profile.
func (c *Capture) take(ctx context.Context, i, n int) Slice {
	s := Slice{Target: i, Start: c.Now()}
	body, err := c.fetch(ctx, c.Targets[i], "profile", c.Slice)
	s.End = c.Now()
	if err != nil {
		s.Err = err.Error()
		return s
	}
	if s.Err = check(body, "cpu/nanoseconds", "CPU time"); s.Err != "" {
		return s
	}
	if s.File, err = c.keep(body, fmt.Sprintf("t%d-%04d.pb.gz", i+1, n)); err != nil {
		s.Err = "not kept: " + err.Error()
		return s
	}
	s.ok, s.size, s.raw = true, len(body), body
	if c.Dir != "" {
		s.raw = nil
	}
	heap, err := c.fetch(ctx, c.Targets[i], "heap", 0)
	switch {
	case err != nil:
		s.HeapErr = err.Error()
	default:
		s.HeapErr = check(heap, "inuse_space/bytes", "the heap in use")
	}
	if s.HeapErr == "" {
		if s.Heap, err = c.keep(heap, fmt.Sprintf("t%d-%04d.heap.pb.gz", i+1, n)); err != nil {
			s.HeapErr = "not kept: " + err.Error()
		} else if s.size += len(heap); c.Dir == "" {
			s.heapRaw = heap
		}
	}
	return s
}

// check says why body is not a profile of what (its sample type want,
// "type/unit"), "" when it is one.
func check(body []byte, want, what string) string {
	types, err := inspect(body)
	switch {
	case err != nil:
		return "not a pprof profile: " + firstLine(strings.TrimPrefix(err.Error(), "not a pprof profile: "))
	case len(types) == 0:
		return "a profile of no sample type, not of " + what
	case !slices.Contains(types, want):
		return fmt.Sprintf("a profile of %s, not of %s", strings.Join(types, ", "), what)
	}
	return ""
}

// keep writes a profile as profiles/name under Dir; "" with no Dir.
func (c *Capture) keep(body []byte, name string) (string, error) {
	if c.Dir == "" {
		return "", nil
	}
	rel := filepath.Join("profiles", name)
	err := os.MkdirAll(filepath.Join(c.Dir, "profiles"), 0o755)
	if err == nil {
		err = os.WriteFile(filepath.Join(c.Dir, rel), gzipped(body), 0o644)
	}
	return rel, err
}

// fetch reads one profile from target: kind "profile" (CPU) over
// seconds, or "heap" (no seconds: at once).
func (c *Capture) fetch(ctx context.Context, target, kind string, seconds time.Duration) ([]byte, error) {
	u, err := url.Parse(strings.TrimSuffix(target, "/") + "/" + kind)
	if err != nil {
		return nil, err
	}
	if seconds > 0 {
		q := u.Query()
		q.Set("seconds", fmt.Sprint(max(int(seconds.Round(time.Second)/time.Second), 1)))
		u.RawQuery = q.Encode()
	}
	ctx, cancel := context.WithTimeout(ctx, seconds+c.Wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	cl := *c.Client
	cl.CheckRedirect = sameHost
	resp, err := cl.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return nil, fmt.Errorf("status %d %s", resp.StatusCode, firstLine(string(b)))
	}
	if resp.ContentLength > MaxBody {
		return nil, errors.New("a body larger than 32 MiB: not read")
	}
	// A body of a stated length is read into a buffer of that length; one
	// of unknown length grows as io.ReadAll grows it.
	buf := bytes.NewBuffer(make([]byte, 0, max(resp.ContentLength+1, 512)))
	_, err = buf.ReadFrom(io.LimitReader(resp.Body, MaxBody+1))
	if err == nil && buf.Len() > MaxBody {
		err = errors.New("a body larger than 32 MiB: not read")
	}
	return buf.Bytes(), err
}

// Slices returns the slices taken so far, in the order they ended.
func (c *Capture) Slices() []Slice {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Slice(nil), c.slices...)
}

// sameHost follows a profile endpoint's redirects on its own host only:
// --profile names what may be asked, and the answer is kept.
func sameHost(req *http.Request, via []*http.Request) error {
	if req.URL.Host != via[0].URL.Host {
		return fmt.Errorf("redirected to another host (%s): not followed", req.URL.Redacted())
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// firstLine is s's first line, at most 200 bytes of it (cut on a rune),
// its control characters shown as "?": what a server answered goes to a
// terminal and into reports.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		i := 200
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i] + "..."
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return '?'
		}
		return r
	}, s)
}
