package compare

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/result"
)

// FuzzCompareResult: any result.json that reads compares with a real
// result of its kind, or is refused with an error; never a panic.
func FuzzCompareResult(f *testing.F) {
	for _, run := range []string{"base-1", "step-1", "ceil-1"} {
		b, err := os.ReadFile(filepath.Join(fixture(run), result.ResultFile))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add([]byte(strings.Replace(string(b), `"users": `, `"users": 1`, 3)))
	}
	hists := map[string][]byte{}
	base := map[string]*Side{}
	for kind, run := range map[string]string{result.KindRun: "base-1", result.KindStep: "step-1", result.KindCeiling: "ceil-1"} {
		b, err := os.ReadFile(filepath.Join(fixture(run), result.HistogramsFile))
		if err != nil {
			f.Fatal(err)
		}
		hists[kind] = b
		if base[kind], err = Load("base", []string{fixture(run)}); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, result.ResultFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := result.Read(dir)
		if err != nil {
			return
		}
		if err := os.WriteFile(filepath.Join(dir, result.HistogramsFile), hists[r.Kind], 0o644); err != nil {
			t.Fatal(err)
		}
		nw, err := Load("new", []string{dir})
		if err != nil {
			return
		}
		c, err := Compare(base[r.Kind], nw, Options{})
		if err != nil {
			return
		}
		_ = c.Breaches([]Gate{{Key: "p99", Limit: 0.1}, {Key: "users", Limit: -0.05}})
	})
}
