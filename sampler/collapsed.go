package sampler

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/headroom-dev/headroom/internal/runecut"
	"github.com/headroom-dev/headroom/serverprof"
)

// Limits on what one sampler's output may cost the profiler: the target
// names its own functions and files, so what py-spy or perf print of it
// is bounded where it is read.
const (
	// MaxInput is the most of a sampler's output read (serverprof.MaxBody):
	// 60 s of a busy server at 100 Hz is a few MiB.
	MaxInput = serverprof.MaxBody
	// MaxLine is the longest stack line read: MaxDepth frames of a few
	// hundred bytes each; a longer one is left out (Parsed.Skipped).
	MaxLine = 1 << 20
	// MaxStacks is the most distinct stacks kept: py-spy prints each once
	// with its count, so 60 s at 100 Hz is at most 6,000 a process.
	MaxStacks = 100_000
	// MaxFunctions is the most distinct functions (name and file) kept;
	// past it a frame of a new one is counted as "[more functions]".
	MaxFunctions = 50_000
	// MaxCount is the most samples one stack line may claim (60 s at
	// 100 Hz, in 166 processes): with MaxStacks lines the CPU sums stay
	// far from overflowing nanoseconds in an int64.
	MaxCount = 1_000_000
)

// moreFunctions stands for the functions past MaxFunctions.
const moreFunctions = "[more functions]"

// Parsed is a profile made from collapsed stacks, and what of the input
// was left out.
type Parsed struct {
	*profile.Profile
	// Skipped counts the lines left out: longer than MaxLine, past
	// MaxStacks, or not a stack and a count.
	Skipped int
	// Cut counts the stacks deeper than serverprof.MaxDepth, cut to it
	// from the leaf (their root's side left out).
	Cut int
	// Why is the first skipped line's reason; "" when none was.
	Why string
}

// Collapsed is how collapsed stacks become a CPU profile.
type Collapsed struct {
	// Period is the time one sample stands for: 10 ms at 100 Hz.
	Period time.Duration
	// Program is the sampled program's file (its /proc/PID/exe): the
	// profile's main mapping, which compare reads to tell that two
	// profiles are of one program.
	Program string
	// Start and Duration are when and how long the stacks were sampled.
	Start    time.Time
	Duration time.Duration
}

// Parse reads collapsed stacks, one a line, "frame;frame;...;frame COUNT"
// root first (py-spy's raw format, Brendan Gregg's stackcollapse): a
// frame "function (file:line)", "function (file)" or "function"; py-spy's
// process frame `process PID:"command line"` (with --subprocesses)
// becomes "process NAME", NAME the command's program, and a pid label on
// the sample. Each line is a sample of COUNT×Period CPU, with samples/count
// and cpu/nanoseconds values as Go's CPU profiles have, its locations
// leaf first. Everything is bounded: see MaxInput and the limits after it.
func (c Collapsed) Parse(b []byte) (Parsed, error) {
	if len(b) > MaxInput {
		return Parsed{}, fmt.Errorf("%d MiB of stacks, more than %d MiB: not read", len(b)>>20, MaxInput>>20)
	}
	if c.Period <= 0 {
		return Parsed{}, fmt.Errorf("a sampling period of %v: want more than 0", c.Period)
	}
	bd := newBuilder(c)
	out := Parsed{Profile: bd.p}
	skip := func(why string) {
		if out.Skipped++; out.Why == "" {
			out.Why = why
		}
	}
	for n := 1; len(b) > 0; n++ {
		var line []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			line, b = b, nil
		}
		line = bytes.TrimRight(line, "\r")
		switch {
		case len(bytes.TrimSpace(line)) == 0:
			continue
		case len(line) > MaxLine:
			skip(fmt.Sprintf("line %d: %d bytes, longer than %d", n, len(line), MaxLine))
			continue
		case len(bd.p.Sample) >= MaxStacks:
			skip(fmt.Sprintf("line %d: past %d stacks", n, MaxStacks))
			continue
		}
		frames, count, why := splitLine(string(line))
		if why != "" {
			skip(fmt.Sprintf("line %d: %s", n, why))
			continue
		}
		if len(frames) > serverprof.MaxDepth {
			frames = frames[len(frames)-serverprof.MaxDepth:] // root first: the leaf's end is kept
			out.Cut++
		}
		bd.add(frames, count)
	}
	return out, nil
}

// splitLine is a collapsed line's frames, root first, and count; why is
// not "" when the line is not a stack and a count.
func splitLine(line string) (frames []string, count int64, why string) {
	i := strings.LastIndexByte(line, ' ')
	if i <= 0 {
		return nil, 0, "no stack and count"
	}
	count, err := strconv.ParseInt(line[i+1:], 10, 64)
	switch {
	case err != nil:
		return nil, 0, fmt.Sprintf("a count of %q", cut(line[i+1:], 20))
	case count < 1 || count > MaxCount:
		return nil, 0, fmt.Sprintf("a count of %d (1 to %d)", count, MaxCount)
	}
	// Of a stack deeper than MaxDepth only the last MaxDepth+1 frames are
	// split (one more than are kept: the caller counts it cut).
	stack := line[:i]
	if n := strings.Count(stack, ";"); n > serverprof.MaxDepth {
		for range n - serverprof.MaxDepth {
			stack = stack[strings.IndexByte(stack, ';')+1:]
		}
	}
	return strings.Split(stack, ";"), count, ""
}

// frame is one frame of a collapsed stack, as a function and a line.
type frame struct {
	name, file string
	line       int64
	pid        int64 // a process frame's; 0 otherwise
}

// parseFrame reads "function (file:line)", "function (file)", a py-spy
// process frame `process PID:"command line"`, or a bare "function".
func parseFrame(s string) frame {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "process "); ok {
		if pid, cmd, ok := strings.Cut(rest, ":"); ok {
			if n, err := strconv.ParseInt(pid, 10, 64); err == nil && n > 0 {
				return frame{name: "process " + program(strings.Trim(cmd, `"`)), pid: n}
			}
		}
	}
	f := frame{name: s}
	if strings.HasSuffix(s, ")") {
		if i := strings.LastIndex(s, " ("); i > 0 {
			f.name, f.file = s[:i], s[i+2:len(s)-1]
			if j := strings.LastIndexByte(f.file, ':'); j >= 0 {
				if n, err := strconv.ParseInt(f.file[j+1:], 10, 64); err == nil && n >= 0 {
					f.file, f.line = f.file[:j], n
				}
			}
		}
	}
	if f.name == "" {
		f.name = "?"
	}
	return f
}

// program is a command line's program, its file name: "python3" of
// "/usr/bin/python3 server.py 8080". The command line's arguments (a
// port) and the PID differ from run to run, and a profile's functions
// are compared by name.
func program(cmd string) string {
	f := strings.Fields(cmd)
	if len(f) == 0 {
		return "?"
	}
	return filepath.Base(f[0])
}

// builder makes a profile of stacks, a function and a location once each.
type builder struct {
	c     Collapsed
	p     *profile.Profile
	funcs map[[2]string]*profile.Function
	locs  map[locKey]*profile.Location
}

type locKey struct {
	fn   *profile.Function
	line int64
}

func newBuilder(c Collapsed) *builder {
	m := &profile.Mapping{ID: 1, File: c.Program, HasFunctions: true, HasFilenames: true, HasLineNumbers: true}
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:        c.Period.Nanoseconds(),
		Mapping:       []*profile.Mapping{m},
		TimeNanos:     c.Start.UnixNano(),
		DurationNanos: c.Duration.Nanoseconds(),
	}
	if c.Start.IsZero() {
		p.TimeNanos = 0
	}
	return &builder{c: c, p: p, funcs: map[[2]string]*profile.Function{}, locs: map[locKey]*profile.Location{}}
}

// add adds a sample of count periods whose stack is frames, root first.
func (b *builder) add(frames []string, count int64) {
	s := &profile.Sample{Value: []int64{count, count * b.c.Period.Nanoseconds()}, Location: make([]*profile.Location, 0, len(frames))}
	for i := len(frames) - 1; i >= 0; i-- { // leaf first
		f := parseFrame(frames[i])
		if f.pid > 0 && s.NumLabel == nil {
			s.NumLabel = map[string][]int64{"pid": {f.pid}}
		}
		s.Location = append(s.Location, b.location(f))
	}
	b.p.Sample = append(b.p.Sample, s)
}

func (b *builder) location(f frame) *profile.Location {
	name, file := cut(f.name, serverprof.MaxName), cut(f.file, serverprof.MaxName)
	key := [2]string{name, file}
	fn := b.funcs[key]
	if fn == nil && len(b.funcs) >= MaxFunctions {
		key, f.line = [2]string{moreFunctions, ""}, 0
		fn = b.funcs[key]
	}
	if fn == nil {
		fn = &profile.Function{ID: uint64(len(b.p.Function) + 1), Name: qualified(key[0], key[1]), SystemName: key[0], Filename: key[1]}
		b.funcs[key] = fn
		b.p.Function = append(b.p.Function, fn)
	}
	l := b.locs[locKey{fn, f.line}]
	if l == nil {
		l = &profile.Location{ID: uint64(len(b.p.Location) + 1), Mapping: b.p.Mapping[0], Line: []profile.Line{{Function: fn, Line: f.line}}}
		b.locs[locKey{fn, f.line}] = l
		b.p.Location = append(b.p.Location, l)
	}
	return l
}

// qualified is a function's name with its file, "hash_password
// (app/auth.py)": Python's names repeat from file to file (__init__,
// get, run), and compare, the report and the flame graph tell functions
// apart by name alone, as a Go profile's package-qualified names allow.
func qualified(name, file string) string {
	if file == "" {
		return name
	}
	return name + " (" + file + ")"
}

// cut is s cut to n bytes, on a rune's boundary.
func cut(s string, n int) string { return runecut.Mark(s, n) }
