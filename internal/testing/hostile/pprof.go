package hostile

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/pprof/profile"
)

// Profiles that cost whoever reads them, as a Go pprof endpoint or a
// result directory from someone else may hold them (docs/PROFILES.md,
// "What a profile may cost").

// GzipBomb is n zero bytes gzipped: about n/1000 bytes on the wire.
func GzipBomb(n int) []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	w.Write(make([]byte, n))
	w.Close()
	return buf.Bytes()
}

// CPUProfile is a gzipped CPU profile of one stack, leaf first, that
// spent cpu.
func CPUProfile(cpu time.Duration, stack ...string) []byte {
	p := cpuProfile()
	var locs []*profile.Location
	for _, name := range stack {
		fn := &profile.Function{ID: uint64(len(p.Function) + 1), Name: name}
		loc := &profile.Location{ID: fn.ID, Line: []profile.Line{{Function: fn}}}
		p.Function, p.Location, locs = append(p.Function, fn), append(p.Location, loc), append(locs, loc)
	}
	p.Sample = []*profile.Sample{{Location: locs, Value: []int64{int64(cpu / (10 * time.Millisecond)), int64(cpu)}}}
	return write(p)
}

// DeepProfile is a gzipped CPU profile of one stack depth frames deep,
// each frame a function of its own.
func DeepProfile(depth int) []byte {
	stack := make([]string, depth)
	for i := range stack {
		stack[i] = fmt.Sprintf("deep.f%d", i)
	}
	return CPUProfile(time.Second, stack...)
}

// WideProfile is a gzipped CPU profile of n samples, each a stack of its
// own (a location and a function each): what a parser holds of it grows
// with n, ~500 bytes each, and merging it with another keeps every one.
// Its functions are named after seed, so profiles of different seeds
// share none.
func WideProfile(n, seed int) []byte { return write(wide(cpuProfile(), n, seed)) }

// WideHeapProfile is WideProfile's heap profile: n stacks with a
// kilobyte in use each.
func WideHeapProfile(n int) []byte {
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "inuse_objects", Unit: "count"}, {Type: "inuse_space", Unit: "bytes"}}}
	return write(wide(p, n, 0))
}

func wide(p *profile.Profile, n, seed int) *profile.Profile {
	for i := range n {
		fn := &profile.Function{ID: uint64(i + 1), Name: fmt.Sprintf("w%d.f%d", seed, i)}
		loc := &profile.Location{ID: fn.ID, Line: []profile.Line{{Function: fn}}}
		p.Function, p.Location = append(p.Function, fn), append(p.Location, loc)
		p.Sample = append(p.Sample, &profile.Sample{Location: []*profile.Location{loc}, Value: []int64{1, 1e7}})
	}
	return p
}

func cpuProfile() *profile.Profile {
	return &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"}, Period: 1e7}
}

func write(p *profile.Profile) []byte {
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		panic(err) // a profile made here is valid
	}
	return buf.Bytes()
}

// PprofEndpoint serves Bodies in turn as a Go server's /debug/pprof does:
// a CPU profile (…/profile?seconds=N) after N seconds, as the profiled
// server would (or until the client goes away), and Heap at once (404
// when nil); anything else 404. Served counts the CPU profiles answered.
type PprofEndpoint struct {
	Bodies [][]byte
	Heap   []byte
	Served atomic.Int64
}

func (e *PprofEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/debug/pprof/heap" && e.Heap != nil:
		w.Write(e.Heap)
		return
	case r.URL.Path != "/debug/pprof/profile":
		http.NotFound(w, r)
		return
	}
	secs, _ := strconv.Atoi(r.URL.Query().Get("seconds"))
	select {
	case <-time.After(time.Duration(max(secs, 1)) * time.Second):
	case <-r.Context().Done():
		return
	}
	n := e.Served.Add(1) - 1
	w.Write(e.Bodies[int(n)%len(e.Bodies)])
}
