package result

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
)

// writeRun writes a result of one request name and returns its directory.
func writeRun(t *testing.T) string {
	t.Helper()
	snap := metrics.NewSnapshot()
	for i := range 100 {
		snap.Add(&metrics.Sample{Kind: metrics.Request, Name: "GET /x", Status: 200, Latency: time.Duration(i+1) * time.Millisecond})
	}
	dir := filepath.Join(t.TempDir(), "run")
	r := &Result{Kind: KindRun, Status: Completed, Requests: snap.Summaries(metrics.Request, time.Second)}
	if err := Write(dir, r, snap); err != nil {
		t.Fatal(err)
	}
	return dir
}

// edit rewrites dir's result.json through f, on its generic JSON form.
func edit(t *testing.T, dir string, f func(m map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, ResultFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	if b, err = json.MarshalIndent(m, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func request0(m map[string]any) map[string]any { return m["requests"].([]any)[0].(map[string]any) }

// TestReadRefusesCorruptResults: a result.json no run could write is an
// error that names the file and what is wrong, never a panic downstream.
func TestReadRefusesCorruptResults(t *testing.T) {
	cases := []struct {
		name string
		mess func(t *testing.T, dir string)
		want string
	}{
		{"truncated", func(t *testing.T, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, ResultFile))
			os.WriteFile(filepath.Join(dir, ResultFile), b[:len(b)/2], 0o644)
		}, "corrupt result.json: truncated after"},
		{"NaN", func(t *testing.T, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, ResultFile))
			b = []byte(strings.Replace(string(b), `"count": 100`, `"count": NaN`, 1))
			os.WriteFile(filepath.Join(dir, ResultFile), b, 0o644)
		}, "corrupt result.json: line "},
		{"a fraction of a request", func(t *testing.T, dir string) {
			edit(t, dir, func(m map[string]any) { request0(m)["count"] = 1.5 })
		}, "requests.count holds number 1.5, want int64"},
		{"negative count", func(t *testing.T, dir string) {
			edit(t, dir, func(m map[string]any) { request0(m)["count"] = -5 })
		}, `corrupt result.json: requests[0] ("GET /x"): count is -5, below zero`},
		{"more errors than requests", func(t *testing.T, dir string) {
			edit(t, dir, func(m map[string]any) { request0(m)["errors"] = 101 })
		}, "101 errors and 0 timeouts out of 100 requests"},
		{"more actions without a request than actions", func(t *testing.T, dir string) {
			edit(t, dir, func(m map[string]any) { request0(m)["no_request"] = 101 })
		}, "101 actions sent no request out of 100"},
		{"negative latency", func(t *testing.T, dir string) {
			edit(t, dir, func(m map[string]any) { request0(m)["p99_ms"] = -1 })
		}, "p99_ms is -1, below zero"},
		{"unknown kind", func(t *testing.T, dir string) {
			edit(t, dir, func(m map[string]any) { m["kind"] = "soak" })
		}, `kind "soak", want "run", "step" or "ceiling"`},
		{"step without its part", func(t *testing.T, dir string) {
			edit(t, dir, func(m map[string]any) { m["kind"] = "step" })
		}, `a step result without "step"`},
		{"check timeline and checks disagree", func(t *testing.T, dir string) {
			edit(t, dir, func(m map[string]any) {
				m["kind"] = "ceiling"
				m["ceiling"] = map[string]any{"checks": []any{map[string]any{"name": "a"}}, "check_timeline": []any{map[string]any{"values": []any{}}}}
			})
		}, "ceiling.check_timeline[0] has 0 values and 0 fired flags for 1 checks"},
		{"a directory", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, ResultFile))
			os.Mkdir(filepath.Join(dir, ResultFile), 0o755)
		}, "result.json: corrupt: a directory, not a file"},
		{"huge", func(t *testing.T, dir string) {
			os.Truncate(filepath.Join(dir, ResultFile), MaxFileSize+1) // sparse: no disk used
		}, "more than the 1024 MiB a result file can be"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeRun(t)
			c.mess(t, dir)
			_, err := Read(dir)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) || !errors.Is(err, ErrCorrupt) {
				t.Errorf("err = %v, want ErrCorrupt naming %s and %q", err, dir, c.want)
			}
		})
	}
}

func TestReadHistogramsRefusesCorruptFiles(t *testing.T) {
	foreign := encodeRaw(5, 1, 1<<62, 0, nil) // hdrhistogram-go would allocate ~45 MB for it
	cases := []struct{ name, content, want string }{
		{"truncated", `{"format": "headroom-result/1", "requests": {"GET /x": "HISTF`, "corrupt histograms.json: truncated after"},
		{"not a string", `{"format": "headroom-result/1", "requests": {"GET /x": 12}}`, "line 1, column 58: requests holds number, want string"},
		{"not a histogram", `{"format": "headroom-result/1", "requests": {"GET /x": "bm90IGEgaGlzdG9ncmFt"}}`, `corrupt histograms.json: histogram "GET /x": not an HdrHistogram V2 compressed encoding`},
		{"another range", `{"format": "headroom-result/1", "actions": {"Browse": "` + foreign + `"}}`, `histogram "Browse": histogram of 1 to 4611686018427387904 at 5 significant digits`},
		{"another unit", `{"format": "headroom-result/1", "unit": "ms", "requests": {}}`, `unit "ms", want "us"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeRun(t)
			os.WriteFile(filepath.Join(dir, HistogramsFile), []byte(c.content), 0o644)
			_, err := ReadHistograms(dir)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) || !errors.Is(err, ErrCorrupt) {
				t.Errorf("err = %v, want ErrCorrupt naming %s and %q", err, dir, c.want)
			}
		})
	}
	dir := writeRun(t)
	os.Remove(filepath.Join(dir, HistogramsFile))
	if _, err := ReadHistograms(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing histograms.json: %v, want os.ErrNotExist", err)
	}
}

// TestManyNamesAreFoldedOnRead: a result with more names than the writer
// keeps (here written without the recorder's cap) reads back with the
// MaxNames busiest ones and the rest under OtherName, in result.json's
// figures and in the histograms alike.
func TestManyNamesAreFoldedOnRead(t *testing.T) {
	const names = metrics.MaxNames + 500
	snap := metrics.NewSnapshot()
	for i := range names {
		for range 1 + i%7 { // 1 to 7 requests; the busiest names are kept
			snap.Add(&metrics.Sample{Kind: metrics.Request, Name: fmt.Sprintf("GET /item/%05d", i), Status: 200, Latency: time.Duration(1+i) * time.Millisecond})
		}
	}
	snap.Add(&metrics.Sample{Kind: metrics.Request, Name: metrics.OtherName, Status: 500, Outcome: metrics.Failed, Latency: time.Millisecond})
	dir := filepath.Join(t.TempDir(), "many")
	if err := Write(dir, &Result{Kind: KindRun, Requests: snap.Summaries(metrics.Request, time.Second)}, snap); err != nil {
		t.Fatal(err)
	}
	r, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Requests) != metrics.MaxNames+1 || r.FoldedNames != 500 {
		t.Fatalf("%d names, %d folded; want %d and 500", len(r.Requests), r.FoldedNames, metrics.MaxNames+1)
	}
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "500 were folded under \"(other names)\"") {
		t.Errorf("notes %q", r.Notes)
	}
	var total, other int64
	for _, s := range r.Requests {
		total += s.Count
		if s.Name == metrics.OtherName {
			other = s.Count
			if s.Errors != 1 || s.Status["200"] != other-1 {
				t.Errorf("other names: %+v", s)
			}
		} else if s.Count < 3 {
			t.Errorf("%s kept with %d requests, while busier names were folded", s.Name, s.Count)
		}
	}
	want := int64(0)
	for _, st := range snap.Requests {
		want += st.Count
	}
	if total != want {
		t.Errorf("%d requests after folding, want %d", total, want)
	}

	h, err := ReadHistograms(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Requests) != metrics.MaxNames+1 || h.Requests[metrics.OtherName].Count != other {
		t.Errorf("histograms: %d names, other names %d values; want %d and %d", len(h.Requests), h.Requests[metrics.OtherName].Count, metrics.MaxNames+1, other)
	}
	for _, s := range r.Requests {
		if st := h.Requests[s.Name]; st == nil || st.Count != s.Count {
			t.Errorf("%s: result.json and histograms.json folded differently", s.Name)
		}
	}
}

func TestReadRefusesNegativeServerAndCeilingFigures(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func(m map[string]any)
		want string
	}{
		{"supported users", func(m map[string]any) {
			m["kind"] = "ceiling"
			m["ceiling"] = map[string]any{"supported_users": map[string]any{"value": -5, "found": true}}
		}, "ceiling: supported users -5 in [0, 0) at 0 requests/s, below zero"},
		{"server timing", func(m map[string]any) {
			m["server"] = map[string]any{"targets": []any{map[string]any{"window": map[string]any{"timings": []any{
				map[string]any{"metric": "mattermost_api_time", "items": []any{map[string]any{"name": "getPosts", "count": -1}}}}}}}}
		}, `server.targets[0].window: mattermost_api_time "getPosts" has a negative figure`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeRun(t)
			edit(t, dir, c.f)
			if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrCorrupt) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// A result directory may be someone else's (a CI artifact): its profiles
// may not name a target there is none of (report indexed by it), a phase
// twice for one target (compare matched by it), or a file outside it
// (compare opened it: "../../dev/zero" took all memory).
func TestReadRefusesProfilesThatPointOutside(t *testing.T) {
	profiles := func(slices, phases []any) func(m map[string]any) {
		return func(m map[string]any) {
			m["profiles"] = map[string]any{"targets": []any{"http://127.0.0.1:1/debug/pprof"}, "slice_s": 1, "slices": slices, "phases": phases}
		}
	}
	phase := func(target int, name, file string) map[string]any {
		return map[string]any{"target": target, "phase": name, "file": file}
	}
	for _, c := range []struct {
		name string
		f    func(m map[string]any)
		want string
	}{
		{"phase's target", profiles([]any{}, []any{phase(3, "window", "profiles/window-t4.pb.gz")}), "profiles.phases[0]: target 3 of 1"},
		{"slice's target", profiles([]any{map[string]any{"target": -1}}, nil), "profiles.slices[0]: target -1 of 1"},
		{"phase twice", profiles([]any{}, []any{phase(0, "window", "a.pb.gz"), phase(0, "window", "b.pb.gz")}), "the window phase of target 1 a second time"},
		{"phase's file", profiles([]any{}, []any{phase(0, "window", "../../../../dev/zero")}), `"../../../../dev/zero" is not a path inside the result directory`},
		{"absolute file", profiles([]any{map[string]any{"target": 0, "file": "/dev/zero"}}, nil), `"/dev/zero" is not a path inside`},
		{"heap's file", profiles([]any{map[string]any{"target": 0, "heap": "../x"}}, nil), `profiles.slices[0].heap: "../x"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeRun(t)
			edit(t, dir, c.f)
			if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrCorrupt) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
	dir := writeRun(t)
	edit(t, dir, profiles([]any{map[string]any{"target": 0, "file": "profiles/t1-0001.pb.gz"}}, []any{phase(0, "window", "profiles/window-t1.pb.gz"), phase(0, "setup", "")}))
	if _, err := Read(dir); err != nil {
		t.Errorf("profiles as headroom writes them: %v", err)
	}
}
