package serverprof

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/pprof/profile"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/headroom-dev/headroom/internal/testing/hostile"
)

// gzipOf is b gzipped.
func gzipOf(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// bomb is 64 MiB of zeros gzipped: 64 KB on the wire, twice what is read.
var bomb = sync.OnceValue(func() []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	w.Write(make([]byte, 64<<20))
	w.Close()
	return buf.Bytes()
})

// tiny is a CPU profile of n samples of one frame each: ~10 bytes a
// sample on the wire, ~180 once parsed. Its samples are appended to the
// encoded message (repeated fields may come in any order), not built.
func tiny(n int) []byte {
	fn := &profile.Function{ID: 1, Name: "f"}
	loc := &profile.Location{ID: 1, Line: []profile.Line{{Function: fn}}}
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Function: []*profile.Function{fn}, Location: []*profile.Location{loc}}
	var buf bytes.Buffer
	p.WriteUncompressed(&buf)
	var sample []byte
	sample = protowire.AppendTag(sample, 1, protowire.BytesType) // location_id, packed
	sample = protowire.AppendBytes(sample, protowire.AppendVarint(nil, 1))
	sample = protowire.AppendTag(sample, 2, protowire.BytesType) // value, packed
	sample = protowire.AppendBytes(sample, protowire.AppendVarint(protowire.AppendVarint(nil, 1), 1e7))
	field := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), sample)
	b := buf.Bytes()
	for range n {
		b = append(b, field...)
	}
	return b
}

// deep is a CPU profile of one stack of depth frames, each a function of
// its own with a name of nameLen bytes.
func deep(depth, nameLen int) *profile.Profile {
	p := cpuProfile(nil)
	var stack []*profile.Location
	for i := range depth {
		name := strings.Repeat("é", nameLen/2) + string(rune('a'+i%26))
		fn := &profile.Function{ID: uint64(i + 1), Name: name}
		loc := &profile.Location{ID: uint64(i + 1), Line: []profile.Line{{Function: fn}}}
		p.Function, p.Location = append(p.Function, fn), append(p.Location, loc)
		stack = append(stack, loc)
	}
	p.Sample = []*profile.Sample{{Location: stack, Value: []int64{100, 1e9}}}
	return p
}

// What a profile endpoint (or a result directory) sends is held within
// bounds before it is parsed: a gzip bomb is refused holding none of it
// (inflated once to count it), a body of tiny samples that would take gigabytes is refused
// before it is parsed, and each is said why.
func TestDecodeRefusesWhatWouldNotFit(t *testing.T) {
	for name, c := range map[string]struct {
		body []byte
		want string
	}{
		"gzip bomb":        {bomb(), "larger than 32 MiB gunzipped"},
		"gzipped twice":    {gzipOf(t, gzipOf(t, tiny(10))), "gzipped twice"},
		"millions of tiny": {gzipOf(t, tiny(2_000_000)), "would take"},
	} {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := decode(c.body)
		runtime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %d KiB in, %d MiB allocated: %v", name, len(c.body)>>10, allocated>>20, err)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", name, err, c.want)
		}
		// The tiny samples' 20 MB gunzipped before they are weighed, the
		// bomb nothing (it took ~100 MiB when read to count it); parsing
		// the 2 million samples would take ~360 MiB.
		if allocated > 64<<20 {
			t.Errorf("%s: %d MiB allocated to refuse it", name, allocated>>20)
		}
	}
	// and an honest profile of many samples is not refused
	if _, err := decode(gzipOf(t, tiny(100_000))); err != nil {
		t.Errorf("100,000 samples: %v", err)
	}
}

// A stack of 5,000 frames with names of 4 KB each (a hostile endpoint's)
// is cut to MaxDepth frames from its leaf, and said so; names to MaxName
// bytes on a rune's boundary; the flame graph's tree goes FlameDepth
// calls down, so its JSON stays small and shallow enough to read back.
func TestDeepStacksAndLongNamesAreCut(t *testing.T) {
	var buf bytes.Buffer
	if err := deep(5000, 4096).Write(&buf); err != nil {
		t.Fatal(err)
	}
	d, err := decode(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	s := d.Sample[0]
	if d.cut != 1 || len(s.Location) != MaxDepth || s.Location[0].ID != 1 {
		t.Fatalf("cut %d, %d frames, leaf %d: want 1 stack cut to %d from its leaf (1)", d.cut, len(s.Location), s.Location[0].ID, MaxDepth)
	}
	for _, f := range d.Function {
		if len(f.Name) > MaxName+len("…") || !utf8.ValidString(f.Name) {
			t.Fatalf("a name of %d bytes (valid UTF-8: %v)", len(f.Name), utf8.ValidString(f.Name))
		}
	}
	fl := Flame(d.Profile)
	depth := 0
	for f := fl; len(f.Children) > 0; f = f.Children[0] {
		depth++
	}
	js, err := json.MarshalIndent(fl, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("flame: %d calls deep, %d KB of indented JSON", depth, len(js)>>10)
	if depth != FlameDepth || fl.Value != 1 {
		t.Errorf("flame %d calls deep, value %v: want %d, and the whole second", depth, fl.Value, FlameDepth)
	}
	if len(js) > 1<<20 {
		t.Errorf("the flame's indented JSON is %d KB", len(js)>>10)
	}
	var back any
	if err := json.Unmarshal(js, &back); err != nil {
		t.Errorf("the flame's JSON does not read back: %v", err)
	}
}

// A profile endpoint that serves only hostile bodies costs a run little:
// each slice says why it was refused, the good ones are merged, and the
// process's heap stays small.
func TestHostileEndpointCostsLittle(t *testing.T) {
	var good, deepBody bytes.Buffer
	cpuProfile(map[string]int64{"f": 1e9}).Write(&good)
	deep(3000, 64).Write(&deepBody)
	bodies := [][]byte{bomb(), good.Bytes(), gzipOf(t, tiny(2_000_000)), deepBody.Bytes()}
	i := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/profile") {
			w.Write(bodies[i%len(bodies)])
			i++
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	dir := t.TempDir()
	c := &Capture{Targets: []string{srv.URL}, Slice: time.Second, Wait: 30 * time.Second, Now: time.Now, Client: srv.Client(), Dir: dir}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var errs []string
	for n := range len(bodies) {
		s := c.take(context.Background(), 0, n+1)
		errs = append(errs, s.Err)
		c.mu.Lock()
		c.slices = append(c.slices, s)
		c.mu.Unlock()
	}
	ph, err := c.Phase(0, "window", time.Time{}, time.Now().Add(time.Hour), 5)
	runtime.ReadMemStats(&after)
	t.Logf("errors %q; %d MiB allocated, heap %d MiB", errs, (after.TotalAlloc-before.TotalAlloc)>>20, after.HeapInuse>>20)
	if err != nil || ph == nil || ph.Slices != 2 || ph.Cut != 1 {
		t.Fatalf("phase %+v, %v: want the good and the deep slice merged, one stack cut", ph, err)
	}
	if !strings.Contains(errs[0], "larger than 32 MiB gunzipped") || errs[1] != "" || !strings.Contains(errs[2], "would take") || errs[3] != "" {
		t.Errorf("errors %q", errs)
	}
	// Everything allocated, freed or not, bounds the peak: ~26 MiB (the
	// tiny samples' 20 MB gunzipped before they are weighed; ~130 MiB when
	// the bomb was read to count it), where a 1 MB bomb alone took
	// headroom to 2.7 GB before.
	if a := after.TotalAlloc - before.TotalAlloc; a > 80<<20 {
		t.Errorf("%d MiB allocated against a hostile endpoint", a>>20)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "profiles", "*"))
	if len(files) != 2 {
		t.Errorf("kept %v: want the two profiles that were read", files)
	}
}

// A result directory from someone else is read through its root: a
// profile's path out of it, a link out of it, or a file that is no
// regular one is refused, never opened.
func TestReadStaysInTheResultDirectory(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "profiles"), 0o755)
	var good bytes.Buffer
	cpuProfile(map[string]int64{"f": 1e9}).Write(&good)
	os.WriteFile(filepath.Join(dir, "profiles", "window-t1.pb.gz"), good.Bytes(), 0o644)
	os.Symlink("/dev/zero", filepath.Join(dir, "profiles", "zero.pb.gz"))
	os.Symlink("/etc/passwd", filepath.Join(dir, "profiles", "passwd.pb.gz"))
	if _, err := Read(dir, "profiles/window-t1.pb.gz"); err != nil {
		t.Fatalf("the good profile: %v", err)
	}
	for _, rel := range []string{"../../../../dev/zero", "/dev/zero", "profiles/zero.pb.gz", "profiles/passwd.pb.gz", "profiles", ""} {
		if _, err := Read(dir, rel); err == nil {
			t.Errorf("%q: read", rel)
		} else {
			t.Logf("%q: %v", rel, err)
		}
	}
}

// A profile endpoint that redirects to another host is not followed (the
// answer would be kept), and what an endpoint answers reaches the terminal
// and the reports without its control characters.
func TestRedirectsStayOnTheHostAndAnswersAreClean(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Errorf("the other host was asked %s", r.URL) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/away/"):
			http.Redirect(w, r, other.URL+"/debug/pprof/profile", http.StatusFound)
		case strings.HasPrefix(r.URL.Path, "/escape/"):
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte("\x1b[2J\x1b[Hfake text\x07 é"))
		}
	}))
	defer srv.Close()
	for path, want := range map[string]string{"/away": "redirected to another host", "/escape": "status 500 ?[2J?[Hfake text? é"} {
		c := &Capture{Targets: []string{srv.URL + path}, Slice: time.Second, Wait: 30 * time.Second, Now: time.Now, Client: srv.Client()}
		if s := c.take(context.Background(), 0, 1); !strings.Contains(s.Err, want) || strings.ContainsAny(s.Err, "\x1b\x07") {
			t.Errorf("%s: error %q, want %q", path, s.Err, want)
		}
	}
}

// A phase merges its slices one at a time within MaxMerged (24 MiB): of
// two wide slices (~19 MiB each to hold, each stack its own) the second
// is left out, the small ones after it are merged; one wider than
// MaxMerged (~48 MiB) is left out alone; a long run's many slices of a
// server whose stacks repeat all merge.
func TestPhaseMergesWithinItsBound(t *testing.T) {
	small := hostile.CPUProfile(time.Second, "main.work", "main.main")
	for name, tc := range map[string]struct {
		bodies          [][]byte
		slices, leftOut int
	}{
		"two wide, then small": {[][]byte{hostile.WideProfile(40_000, 0), hostile.WideProfile(40_000, 1), small, small}, 3, 1},
		"wider than a merge":   {[][]byte{hostile.WideProfile(100_000, 0), small}, 1, 1},
		"an hour of slices":    {slices.Repeat([][]byte{small, hostile.CPUProfile(time.Second, "main.other", "main.main")}, 180), 360, 0},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			c := &Capture{Targets: []string{"http://127.0.0.1:1/debug/pprof"}, Slice: 10 * time.Second, Dir: dir}
			start := time.Unix(0, 0)
			for i, b := range tc.bodies {
				from := start.Add(time.Duration(i) * 10 * time.Second)
				s := Slice{Target: 0, Start: from, End: from.Add(10 * time.Second), ok: true, File: filepath.Join("profiles", fmt.Sprintf("t1-%d.pb.gz", i))}
				os.MkdirAll(filepath.Join(dir, "profiles"), 0o755)
				if err := os.WriteFile(filepath.Join(dir, s.File), b, 0o644); err != nil {
					t.Fatal(err)
				}
				c.slices = append(c.slices, s)
			}
			ph, err := c.Phase(0, "window", start, start.Add(time.Duration(len(tc.bodies))*10*time.Second), 5)
			if err != nil || ph == nil {
				t.Fatalf("phase %+v, %v", ph, err)
			}
			if ph.Slices != tc.slices || ph.LeftOut != tc.leftOut {
				t.Errorf("%d slices merged, %d left out: want %d and %d", ph.Slices, ph.LeftOut, tc.slices, tc.leftOut)
			}
			if want := time.Duration(tc.slices) * time.Second; tc.leftOut == 0 && ph.CPU != want {
				t.Errorf("CPU %v, want %v: every slice's second", ph.CPU, want)
			}
		})
	}
}
