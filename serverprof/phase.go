package serverprof

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/headroom-dev/headroom/result"
)

// Phase is what one target's CPU did over a part of a run: the merge of
// the slices that lie in [From, To): asked for at From or later (the
// server starts profiling once the request arrives, so a slice asked
// before From holds CPU from before it: the last login's hash in the
// window), and answered by To plus slack (the answer's trip back). A
// slice across a phase's boundary is in neither phase: its CPU cannot be
// told apart (a Go profile's samples carry no time), and counting it in
// one would put the other's work there (logins in the window).
type Phase struct {
	Target   int
	Name     string // "setup", "window"
	From, To time.Time
	Slices   int
	Covered  time.Duration // the slices' lengths, summed: the time profiled
	CPU      time.Duration // CPU time sampled in them
	// Flat and Cum are the functions that spent most, in themselves and
	// with what they called: top of each.
	Flat, Cum []Func
	// Binary is the profiled program's file name (its main mapping's):
	// profiles of different programs are not compared.
	Binary string
	Flame  *result.Flame // CPU seconds
	// Heap is the heap in use at the phase's end; nil when the server
	// served no heap profile.
	Heap *Heap
	// Cut is how many of its samples' stacks were deeper than MaxDepth
	// and cut to it (their root's side left out).
	Cut int
	// LeftOut is how many slices that lay in the phase were left out of
	// its merge: with them it would have held more than MaxMerged, or
	// they did not parse; LeftWhy is the first one's reason.
	LeftOut int
	LeftWhy string
	prof    *profile.Profile
}

// Func is one function's share of a phase's CPU: Flat in the function
// itself, Cum in it and what it called.
type Func struct {
	Name      string
	Flat, Cum time.Duration
}

// slack is how long after its phase's end a slice's answer may arrive
// and the slice still be the phase's: the answer's trip back.
const slack = 100 * time.Millisecond

// Phase merges target's slices over [from, to); nil when none lies there.
func (c *Capture) Phase(target int, name string, from, to time.Time, top int) (*Phase, error) {
	ph := &Phase{Target: target, Name: name, From: from, To: to}
	p, err := c.merge(ph)
	if err != nil || p == nil {
		return nil, err
	}
	ph.prof = p
	ph.Binary, ph.Flame = binary(p), Flame(p)
	if ph.Heap, err = c.heapAt(target, from, to, top); err != nil {
		ph.Heap = nil // a CPU profile is worth its phase without the heap
	}
	var fs []Func
	ph.CPU, fs = summarize(p)
	ph.Flat, ph.Cum = topBy(fs, top, func(f Func) time.Duration { return f.Flat }), topBy(fs, top, func(f Func) time.Duration { return f.Cum })
	return ph, nil
}

// merge merges the slices of ph's target that lie in it, one at a time
// as they are read, so that it holds the merge so far and one slice,
// within MaxMerged: a slice that would take the two past it, weighed
// before it is parsed, is left out (LeftOut), as is one that does not
// parse.
func (c *Capture) merge(ph *Phase) (*profile.Profile, error) {
	var acc *profile.Profile
	var accHeld int64
	for _, s := range c.Slices() {
		if s.Target != ph.Target || !s.ok || s.Start.Before(ph.From) || s.End.After(ph.To.Add(slack)) {
			continue
		}
		p, err := c.parse(s, MaxMerged-accHeld)
		if err != nil { // past MaxMerged, or no profile (a capture only inspects one)
			if ph.LeftOut++; ph.LeftWhy == "" {
				ph.LeftWhy = err.Error()
				if over := (errOver{}); errors.As(err, &over) {
					ph.LeftWhy = fmt.Sprintf("%s would take %d MiB to hold, the merge so far %d MiB: more than %d MiB", s.File, over.held>>20, accHeld>>20, MaxMerged>>20)
				}
			}
			continue
		}
		ph.Cut += p.cut
		ph.Slices++
		ph.Covered += s.End.Sub(s.Start)
		if acc == nil {
			acc = p.Profile
		} else if acc, err = profile.Merge([]*profile.Profile{acc, p.Profile}); err != nil {
			// slices of different binaries: the server restarted as another build
			return nil, fmt.Errorf("the %s's profiles of %s do not merge: %v", ph.Name, c.Targets[ph.Target], err)
		}
		accHeld = footprint(acc)
	}
	return acc, nil
}

// Stem is a phase's name as a file name: "level 120 (2)" is level-120-2.
func Stem(name string) string {
	f := strings.FieldsFunc(name, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') })
	return strings.Join(f, "-")
}

// parse reads slice s's profile again, from its file or its bytes,
// with room for limit bytes parsed.
func (c *Capture) parse(s Slice, limit int64) (decoded, error) {
	if s.File == "" {
		return decodeWithin(s.raw, limit)
	}
	root, err := os.OpenRoot(c.Dir)
	if err != nil {
		return decoded{}, err
	}
	defer root.Close()
	return readWithin(root, s.File, limit)
}

// Write writes the phase's merged profile as profiles/<name>-t<target>.pb.gz
// under dir, for go tool pprof; it returns the path relative to dir.
func (ph *Phase) Write(dir string) (string, error) {
	rel := filepath.Join("profiles", fmt.Sprintf("%s-t%d.pb.gz", Stem(ph.Name), ph.Target+1))
	if err := os.MkdirAll(filepath.Join(dir, "profiles"), 0o755); err != nil {
		return "", err
	}
	f, err := os.Create(filepath.Join(dir, rel))
	if err != nil {
		return "", err
	}
	if err := ph.prof.Write(f); err != nil { // gzipped, as pprof writes
		f.Close()
		return "", err
	}
	return rel, f.Close()
}

// binary is the file name of p's main program, "" when it does not say.
func binary(p *profile.Profile) string {
	if len(p.Mapping) == 0 {
		return ""
	}
	return filepath.Base(p.Mapping[0].File)
}

// Summary is a merged phase's profile as Read reads it back: its CPU
// time, every function's, the program's name and the flame graph's tree.
type Summary struct {
	CPU    time.Duration
	Funcs  []Func
	Binary string
	Flame  *result.Flame
}

// Read reads a merged phase's profile (Phase.Write's), rel in the result
// directory dir: what compare diffs. The directory may be someone else's
// (a CI artifact): rel stays inside it, names a regular file, and what it
// holds is bounded (see MaxHeld).
func Read(dir, rel string) (*Summary, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	d, err := readFile(root, rel)
	if err != nil {
		return nil, err
	}
	p := d.Profile
	if cpuIndex(p) < 0 {
		return nil, fmt.Errorf("%s: a profile of %s, not of CPU time", rel, sampleTypes(p))
	}
	s := &Summary{Binary: binary(p), Flame: Flame(p)}
	s.CPU, s.Funcs = summarize(p)
	return s, nil
}

// cpuIndex is the index of p's CPU-time sample value, or -1.
func cpuIndex(p *profile.Profile) int { return valueIndex(p, "cpu", "nanoseconds") }

// valueIndex is the index of p's sample value of that type and unit, or -1.
func valueIndex(p *profile.Profile, typ, unit string) int {
	return slices.IndexFunc(p.SampleType, func(st *profile.ValueType) bool { return st.Type == typ && st.Unit == unit })
}

func sampleTypes(p *profile.Profile) string {
	var ts []string
	for _, st := range p.SampleType {
		ts = append(ts, st.Type+"/"+st.Unit)
	}
	if len(ts) == 0 {
		return "no sample type"
	}
	return strings.Join(ts, ", ")
}

// summarize returns p's CPU time and every function's.
func summarize(p *profile.Profile) (time.Duration, []Func) {
	total, fs := tally(p, cpuIndex(p))
	return time.Duration(total), fs
}

// tally sums p's value vi over all samples, and by function: a sample's
// leaf is its first location's first line (inlined frames are lines of
// one location), its flat; its cumulative counts once for each function
// on its stack. Func's durations hold the value (bytes, for a heap).
func tally(p *profile.Profile, vi int) (int64, []Func) {
	if vi < 0 {
		return 0, nil
	}
	flat, cum := map[string]int64{}, map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		v := s.Value[vi]
		total += v
		seen := map[string]bool{}
		for li, loc := range s.Location {
			for ki, ln := range loc.Line {
				name := "?"
				if ln.Function != nil {
					name = ln.Function.Name
				}
				if li == 0 && ki == 0 {
					flat[name] += v
				}
				if !seen[name] {
					seen[name] = true
					cum[name] += v
				}
			}
		}
	}
	var fs []Func
	for name, c := range cum {
		fs = append(fs, Func{Name: name, Flat: time.Duration(flat[name]), Cum: time.Duration(c)})
	}
	return total, fs
}

// topBy is the n functions of fs with the most by (ties by name), none
// with nothing.
func topBy(fs []Func, n int, by func(Func) time.Duration) []Func {
	fs = slices.Clone(fs)
	slices.SortFunc(fs, func(a, b Func) int {
		if by(a) != by(b) {
			return int(by(b) - by(a))
		}
		return strings.Compare(a.Name, b.Name)
	})
	i := 0
	for i < min(n, len(fs)) && by(fs[i]) > 0 {
		i++
	}
	return fs[:i]
}

// gzipped is b gzipped, unless it is already (Go's pprof serves it so).
func gzipped(b []byte) []byte {
	if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
		return b
	}
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

// plumbing are the packages of a Go server's every request (its HTTP
// server, the runtime), and, in a profile headroom profiler took, the
// process's own frame and a Python server's (the script's top level, the
// standard library's socketserver, http.server and threading classes):
// high in any profile's cumulative list, and never what a release changed.
var plumbing = []string{"runtime.", "net/http.", "net.", "internal/", "bufio.", "syscall.", "crypto/tls.", "sync.",
	"process ", "<module> (", "BaseServer.", "TCPServer.", "ThreadingMixIn.", "BaseRequestHandler.", "StreamRequestHandler.",
	"BaseHTTPRequestHandler.", "Thread.run (", "Thread._bootstrap"}

// Plumbing tells whether the function is a server's request plumbing
// (see plumbing): reports leave it out of cumulative lists, compare out
// of the functions that moved.
func Plumbing(name string) bool {
	for _, p := range plumbing {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
