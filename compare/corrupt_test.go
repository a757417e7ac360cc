package compare

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/result"
)

// spoil copies fixture name and changes the copy's files through f.
func spoil(t *testing.T, name string, f func(dir string)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	os.Mkdir(dir, 0o755)
	for _, file := range []string{result.ResultFile, result.HistogramsFile} {
		b, err := os.ReadFile(filepath.Join(fixture(name), file))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f(dir)
	return dir
}

func rewrite(t *testing.T, path string, f func(s string) string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(f(string(b))), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptResultsAreNamed: a result that cannot be used stops the
// comparison with the directory, the file and what is wrong; none panics.
func TestCorruptResultsAreNamed(t *testing.T) {
	res := func(dir string) string { return filepath.Join(dir, result.ResultFile) }
	hist := func(dir string) string { return filepath.Join(dir, result.HistogramsFile) }
	cases := []struct {
		name string
		f    func(t *testing.T, dir string)
		want string
	}{
		{"result.json truncated", func(t *testing.T, dir string) {
			rewrite(t, res(dir), func(s string) string { return s[:len(s)/3] })
		}, "corrupt result.json: truncated after"},
		{"a count of NaN", func(t *testing.T, dir string) {
			rewrite(t, res(dir), func(s string) string { return strings.Replace(s, `"count": 141`, `"count": NaN`, 1) })
		}, "corrupt result.json: line 57, column 15: invalid character 'N'"},
		{"a negative count", func(t *testing.T, dir string) {
			rewrite(t, res(dir), func(s string) string { return strings.Replace(s, `"count": 141`, `"count": -141`, 1) })
		}, "corrupt result.json: totals: count is -141, below zero"},
		{"histograms.json truncated", func(t *testing.T, dir string) {
			rewrite(t, hist(dir), func(s string) string { return s[:len(s)-40] })
		}, "corrupt histograms.json: truncated after"},
		{"a histogram cut short", func(t *testing.T, dir string) {
			rewrite(t, hist(dir), func(s string) string { i := strings.Index(s, `"HISTF`); return s[:i+12] + s[i+30:] })
		}, "corrupt histograms.json: histogram "},
		{"histograms.json missing", func(t *testing.T, dir string) { os.Remove(hist(dir)) },
			"no histograms.json beside result.json"},
		{"result.json missing", func(t *testing.T, dir string) { os.Remove(res(dir)) },
			"not a headroom result directory (no result.json)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := spoil(t, "base-1", func(dir string) { c.f(t, dir) })
			_, err := Load("new", []string{dir})
			if err == nil || !strings.HasPrefix(err.Error(), dir+": ") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v, want %q after the directory", err, c.want)
			}
		})
	}
}

// TestMismatchedHistogramsAreNoted: histograms.json that disagrees with
// result.json (one file replaced, or a run stopped between writing them)
// is compared, with a note naming the names; a name without a histogram
// has no latency figures rather than zero.
func TestMismatchedHistogramsAreNoted(t *testing.T) {
	// base-2's histograms beside base-1's result.json, one of them dropped.
	mixed := spoil(t, "base-1", func(dir string) {
		b, err := os.ReadFile(filepath.Join(fixture("base-2"), result.HistogramsFile))
		if err != nil {
			t.Fatal(err)
		}
		var h result.Histograms
		if err := json.Unmarshal(b, &h); err != nil {
			t.Fatal(err)
		}
		delete(h.Requests, "ViewChannel")
		if b, err = json.Marshal(h); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, result.HistogramsFile), b, 0o644)
	})
	c, err := Compare(load(t, "base", mixed), load(t, "new", fixture("new-1")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range c.Notes {
		found = found || strings.Contains(n, mixed+" (base): result.json and histograms.json disagree on how many requests were made") &&
			strings.Contains(n, `"ViewChannel": 28 in result.json, 0 in histograms.json`)
	}
	if !found {
		t.Errorf("notes %q: want one naming the run and ViewChannel", c.Notes)
	}
	for _, r := range c.Window.Requests {
		if r.Name == "ViewChannel" && (r.P99.Verdict != NoData || r.Mean.Verdict != NoData) {
			t.Errorf("ViewChannel without a histogram: p99 %s, mean %s; want %q", r.P99.Verdict, r.Mean.Verdict, NoData)
		}
	}
}
