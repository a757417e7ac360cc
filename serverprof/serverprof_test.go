package serverprof

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/pprof/profile"

	"github.com/headroom-dev/headroom/internal/testing/memhttp"
)

// cpuProfile is a profile of CPU time whose stacks are given leaf first,
// each with its nanoseconds.
func cpuProfile(stacks map[string]int64) *profile.Profile {
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"}, Period: 10_000_000}
	fns := map[string]*profile.Function{}
	for stack, ns := range stacks {
		var locs []*profile.Location
		for _, name := range strings.Split(stack, ";") {
			f := fns[name]
			if f == nil {
				f = &profile.Function{ID: uint64(len(fns) + 1), Name: name}
				fns[name] = f
				p.Function = append(p.Function, f)
			}
			l := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: f}}}
			p.Location = append(p.Location, l)
			locs = append(locs, l)
		}
		p.Sample = append(p.Sample, &profile.Sample{Location: locs, Value: []int64{ns / 10_000_000, ns}})
	}
	return p
}

// A function's flat time is the samples it is the leaf of; its cumulative
// time the samples it is anywhere in, once each (recursion too).
func TestSummarizeCountsFlatAndCumulative(t *testing.T) {
	p := cpuProfile(map[string]int64{
		"sha;hash;login;serve":       600e6,
		"sha;hash;hash;signup;serve": 300e6, // recursion: hash once
		"json;posts;serve":           100e6,
	})
	total, fs := summarize(p)
	if total != time.Second {
		t.Errorf("total %v, want 1s", total)
	}
	got := map[string]Func{}
	for _, f := range fs {
		got[f.Name] = f
	}
	for name, want := range map[string][2]time.Duration{"sha": {900e6, 900e6}, "hash": {0, 900e6}, "serve": {0, time.Second}, "json": {100e6, 100e6}} {
		if f := got[name]; f.Flat != want[0] || f.Cum != want[1] {
			t.Errorf("%s: flat %v cum %v, want %v and %v", name, f.Flat, f.Cum, want[0], want[1])
		}
	}
	if top := topBy(fs, 2, func(f Func) time.Duration { return f.Cum }); len(top) != 2 || top[0].Name != "serve" || top[1].Name != "hash" {
		t.Errorf("top 2 by cum %v: want serve, hash (ties by name)", top)
	}
}

// A phase merges the slices that lie wholly in it (answered within the
// slack after its end), and none across its boundary.
func TestPhaseTakesTheSlicesWhollyInIt(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	c := &Capture{Targets: []string{"http://x/debug/pprof"}}
	for i, stack := range []string{"login", "login", "posts", "posts"} {
		var b bytes.Buffer
		_ = cpuProfile(map[string]int64{stack: 1e9}).Write(&b)
		c.slices = append(c.slices, Slice{Start: at(float64(i) * 10), End: at(float64(i)*10 + 10.05), ok: true, raw: b.Bytes()})
	}
	setup, err := c.Phase(0, "setup", at(0), at(25), 5)
	if err != nil || setup == nil || setup.Slices != 2 || setup.CPU != 2*time.Second || setup.Flat[0].Name != "login" {
		t.Errorf("setup [0, 25): %+v %v; want the first two slices, login's", setup, err)
	}
	window, _ := c.Phase(0, "window", at(25), at(40.1), 5)
	if window == nil || window.Slices != 1 || window.Flat[0].Name != "posts" {
		t.Errorf("window [25, 40.1): %+v; want the last slice alone (the one across 25 in neither)", window)
	}
	// a slice asked for before its phase began holds CPU from before it (a
	// login's hash before the window): not the phase's, however close
	if late, _ := c.Phase(0, "window", at(30.05), at(40.1), 5); late != nil {
		t.Errorf("window [30.05, 40.1): %+v; want none (the last slice was asked at 30)", late)
	}
	if none, _ := c.Phase(0, "window", at(41), at(45), 5); none != nil {
		t.Errorf("a phase with no slice in it: %+v", none)
	}
}

// What an endpoint serves that is no CPU profile is a slice's error, and
// the capture goes on: a 404, a body that is not a profile, a heap
// profile, a body past MaxBody; a CPU profile is kept.
func TestFetchRefusesWhatIsNoCPUProfile(t *testing.T) {
	var cpu, heap bytes.Buffer
	_ = cpuProfile(map[string]int64{"f": 1e9}).Write(&cpu)
	hp := cpuProfile(map[string]int64{"f": 1e9})
	hp.SampleType = []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"}}
	_ = hp.Write(&heap)
	for path, want := range map[string]string{"/nothing": "status 404", "/text": "not a pprof profile", "/heap": "not of CPU time",
		"/huge": "larger than 32 MiB", "/cpu": ""} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case strings.HasPrefix(r.URL.Path, "/text"):
				w.Write([]byte("# HELP up\nup 1\n"))
			case strings.HasPrefix(r.URL.Path, "/heap"):
				w.Write(heap.Bytes())
			case strings.HasPrefix(r.URL.Path, "/huge"):
				chunk := make([]byte, 1<<20)
				for range 40 {
					if _, err := w.Write(chunk); err != nil {
						return
					}
				}
			case strings.HasPrefix(r.URL.Path, "/cpu"):
				w.Write(cpu.Bytes())
			default:
				http.NotFound(w, r)
			}
		}))
		// Wait as Run sets it: take alone leaves the answer the slice's 1 s
		// of wall clock, and /huge's 32 MiB took 0.6 to 2.2 s to read under
		// -race on a busy machine (a deadline, not the limit, then ends it).
		c := &Capture{Targets: []string{srv.URL + path}, Slice: time.Second, Wait: 30 * time.Second, Now: time.Now, Client: srv.Client()}
		s := c.take(context.Background(), 0, 1)
		srv.Close()
		if want == "" && (s.Err != "" || !s.ok) || want != "" && !strings.Contains(s.Err, want) {
			t.Errorf("%s: error %q, want %q", path, s.Err, want)
		}
	}
}

// A phase's file is named after it, with nothing a shell must quote.
func TestPhaseFileNames(t *testing.T) {
	for name, want := range map[string]string{"setup": "setup", "level 120": "level-120", "level 120 (2)": "level-120-2", "hold 38": "hold-38"} {
		if got := Stem(name); got != want {
			t.Errorf("Stem(%q) = %q, want %q", name, got, want)
		}
	}
}

// A server that takes the slice and never answers is given up Wait past
// the slice's length, with a reason, not waited for until the run ends.
// In virtual time.
func TestSlowEndpointIsGivenUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dial := memhttp.Dial(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
		c := &Capture{Targets: []string{"http://slow.invalid/debug/pprof"}, Slice: 10 * time.Second, Wait: 5 * time.Second, Now: time.Now,
			Client: &http.Client{Transport: &http.Transport{DialContext: dial}}}
		start := time.Now()
		s := c.take(context.Background(), 0, 1)
		if el := time.Since(start); el != 15*time.Second || !strings.Contains(s.Err, "deadline exceeded") {
			t.Errorf("after %v: error %q; want given up at 15 s (slice 10 s, wait 5 s) for its deadline", el, s.Err)
		}
	})
}

// After each CPU slice the target's heap profile is taken: a phase's heap
// is its last, with what allocated it. A server that serves no heap
// profile keeps its CPU slices, and is told of once. In virtual time.
func TestPhaseHeapIsItsLast(t *testing.T) {
	heapProfile := func(mb int64) []byte {
		p := cpuProfile(map[string]int64{"cache.fill;serve": mb << 20, "json;serve": 1 << 20})
		p.SampleType = []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}, {Type: "inuse_space", Unit: "bytes"}}
		for _, s := range p.Sample {
			s.Value = []int64{2 * s.Value[1], s.Value[1]}
		}
		var b bytes.Buffer
		_ = p.Write(&b)
		return b.Bytes()
	}
	for _, servesHeap := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			var cpu bytes.Buffer
			_ = cpuProfile(map[string]int64{"f": 1e9}).Write(&cpu)
			heaps := int64(0)
			dial := memhttp.Dial(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path == "/debug/pprof/profile":
					select {
					case <-time.After(10 * time.Second):
						w.Write(cpu.Bytes())
					case <-r.Context().Done():
					}
				case r.URL.Path == "/debug/pprof/heap" && servesHeap:
					heaps++
					w.Write(heapProfile(10 * heaps)) // the cache grows by 10 MiB a slice
				default:
					http.NotFound(w, r)
				}
			}))
			var warned []string
			c := &Capture{Targets: []string{"http://app.invalid/debug/pprof"}, Slice: 10 * time.Second,
				Client: &http.Client{Transport: &http.Transport{DialContext: dial}}, Warn: func(s string) { warned = append(warned, s) }}
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 35*time.Second)
			c.Run(ctx)
			cancel()
			ph, err := c.Phase(0, "setup", start, start.Add(20*time.Second), 5)
			if err != nil || ph == nil || ph.Slices != 2 {
				t.Fatalf("setup: %+v %v; want two slices", ph, err)
			}
			switch {
			case servesHeap && (ph.Heap == nil || ph.Heap.Inuse != 21<<20 || ph.Heap.Top[0].Name != "cache.fill" || ph.Heap.Top[0].Bytes != 20<<20):
				t.Errorf("heap at the setup's end: %+v; want the second's, 21 MiB, 20 of them cache.fill's", ph.Heap)
			case !servesHeap && (ph.Heap != nil || len(warned) != 1 || !strings.Contains(warned[0], "heap profile: status 404")):
				t.Errorf("no heap served: heap %+v, warnings %q; want none, and one warning", ph.Heap, warned)
			}
		})
	}
}

// What every request of a Go server, or of a Python one sampled by
// headroom profiler, runs through is plumbing; the application's own
// functions, Go's or Python's, are not.
func TestPlumbing(t *testing.T) {
	for name, want := range map[string]bool{
		"runtime.mallocgc": true, "net/http.(*conn).serve": true, "process python3": true, "<module> (app.py)": true,
		"BaseServer.serve_forever (socketserver.py)": true, "BaseHTTPRequestHandler.handle_one_request (server.py)": true,
		"Thread._bootstrap_inner (threading.py)": true,
		"main.hashPassword":                      false, "hash_password (server.py)": false, "Handler.do_GET (server.py)": false,
		"github.com/mattermost/mattermost/server/v8/channels/app.(*App).Login": false, "processOrder (shop.py)": false,
	} {
		if got := Plumbing(name); got != want {
			t.Errorf("Plumbing(%q) = %v, want %v", name, got, want)
		}
	}
}
