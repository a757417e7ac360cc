package compare

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/result"
)

func fixture(name string) string { return filepath.Join("..", "report", "testdata", "runs", name) }

func load(t *testing.T, label string, dirs ...string) *Side {
	t.Helper()
	s, err := Load(label, dirs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestOneRunIsOneRepeat: `compare A A --vs B B` counted each run twice,
// as two repeats, and gave a verdict with an interval of zero width. A run
// given twice on a side, however it is named or copied, is refused with
// both paths and what to do.
func TestOneRunIsOneRepeat(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	if err := os.Symlink(mustAbs(t, fixture("base-1")), link); err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(dir, "copy")
	os.Mkdir(copied, 0o755)
	for _, f := range []string{result.ResultFile, result.HistogramsFile} {
		b, err := os.ReadFile(filepath.Join(fixture("base-1"), f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(copied, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rewritten := copyRun(t, "base-1", func(r *result.Result) { r.Notes = append(r.Notes, "edited") })
	for _, c := range []struct {
		name  string
		dirs  []string
		other string
		why   string
	}{
		{"the same directory", []string{fixture("base-1"), fixture("base-1")}, fixture("base-1"), "the same directory"},
		{"a path to it", []string{fixture("base-1"), fixture("base-2") + "/../base-1/"}, fixture("base-1"), "the same directory"},
		{"a symbolic link", []string{fixture("base-1"), link}, link, "the same directory"},
		{"a copy", []string{fixture("base-1"), copied}, copied, "the same result.json"},
		{"a copy rewritten", []string{fixture("base-1"), fixture("base-2"), rewritten}, rewritten, `the run started at 2026-11-23T09:27:22.620648305Z on "`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Compare(load(t, "base", c.dirs...), load(t, "new", fixture("new-1"), fixture("new-2")), Options{})
			if err == nil {
				t.Fatal("compared, want an error")
			}
			msg := err.Error()
			for _, want := range []string{"base: " + fixture("base-1") + " and " + filepath.Clean(c.other) + " are one run (" + c.why, "give each run once"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q lacks %q", msg, want)
				}
			}
		})
	}
}

// TestRunOnBothSides: a run on both sides is refused, unless the sides
// are the same runs (a comparison of a build with itself), which is noted.
func TestRunOnBothSides(t *testing.T) {
	_, err := Compare(load(t, "base", fixture("base-1"), fixture("base-2")), load(t, "new", fixture("new-1"), fixture("base-2")), Options{})
	if err == nil || !strings.Contains(err.Error(), fixture("base-2")+" (base) and "+fixture("base-2")+" (new) are one run (the same directory): a run cannot stand for both builds") {
		t.Errorf("err %v, want the shared run named", err)
	}
	c, err := Compare(load(t, "base", fixture("base-1"), fixture("base-2")), load(t, "new", fixture("base-2"), fixture("base-1")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Notes) == 0 || !strings.Contains(c.Notes[0], "base and new are the same 2 run(s): every change is zero by construction") {
		t.Errorf("notes %q, want one saying the sides are the same runs", c.Notes)
	}
	if c.Window.Throughput.Delta != 0 || c.Window.Throughput.Verdict != NoChange {
		t.Errorf("throughput %s %s, want 0 and no change", c.Window.Throughput.DeltaText(), c.Window.Throughput.Verdict)
	}
	// Runs that only share a start time are not one run.
	other := copyRun(t, "base-1", func(r *result.Result) { r.Generator.Host = "elsewhere" })
	if _, err := Compare(load(t, "base", fixture("base-1"), other), load(t, "new", fixture("new-1"), fixture("new-2")), Options{}); err != nil {
		t.Errorf("runs on two hosts started at the same time: %v", err)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
