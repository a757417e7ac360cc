package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixtures are real results (report/testdata/runs/README.md says how they
// were made): base-N against a testbed, new-N against one with 10% less
// capacity, a step run and ceilings.
func fixtures(names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, filepath.Join("..", "report", "testdata", "runs", n))
	}
	return out
}

func args(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestCompareGatesAndWritesReports(t *testing.T) {
	out := filepath.Join(t.TempDir(), "cmp")
	base, new := fixtures("base-1", "base-2", "base-3"), fixtures("new-1", "new-2", "new-3")
	code, stdout, stderr := headroom(t, args([]string{"compare"}, base, []string{"--vs"}, new, []string{"--out", out, "--fail-on", "rps:-5%,p99:+50%"})...)
	if code != ExitRegression {
		t.Fatalf("exit %d, want %d (throughput fell more than 5%%)\n%s%s", code, ExitRegression, stdout, stderr)
	}
	for _, want := range []string{"new (3 runs) vs base (3 runs), run results", "requests/s", "regression", "FAIL: 1 change(s) beyond --fail-on", "window: requests/s -",
		"per request and action:", "regression GetChannelPosts: mean +"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	for _, f := range []string{"report.md", "report.html", "compare.json", "rps.png"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	var c struct {
		Format string `json:"format"`
		Window struct {
			Throughput struct{ Verdict string } `json:"throughput_rps"`
		} `json:"window"`
	}
	b, _ := os.ReadFile(filepath.Join(out, "compare.json"))
	if err := json.Unmarshal(b, &c); err != nil || c.Format != "headroom-compare/1" || c.Window.Throughput.Verdict != "regression" {
		t.Errorf("compare.json: %v, %+v", err, c)
	}

	// A looser gate passes; the same side against itself has no change.
	if code, stdout, _ := headroom(t, args([]string{"compare"}, base, []string{"--vs"}, new, []string{"--fail-on", "rps:-10%"})...); code != ExitOK || !strings.Contains(stdout, "PASS") {
		t.Errorf("rps:-10%%: exit %d, want 0 and PASS:\n%s", code, stdout)
	}
	code, stdout, _ = headroom(t, args([]string{"compare"}, base, []string{"--vs"}, base, []string{"--fail-on", "rps:-1%,p99:+1%"})...)
	if code != ExitOK || strings.Contains(stdout, "regression") {
		t.Errorf("base against itself: exit %d, want 0 and no regression:\n%s", code, stdout)
	}
	// One run a side: no verdict on noise, said so.
	code, stdout, _ = headroom(t, args([]string{"compare"}, base[:1], []string{"--vs"}, new[:1])...)
	if code != ExitOK || !strings.Contains(stdout, "no verdict: one run per side") || !strings.Contains(stdout, "no measure of the noise") {
		t.Errorf("one run a side: exit %d:\n%s", code, stdout)
	}
}

func TestCompareBadInput(t *testing.T) {
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "corrupt")
	os.MkdirAll(corrupt, 0o755)
	write(t, corrupt, "result.json", `{"format": "headroom-result/1", "kind": "run", "requests": [`)
	old := filepath.Join(dir, "old")
	os.MkdirAll(old, 0o755)
	write(t, old, "result.json", `{"format": "headroom-result/0", "kind": "run"}`)
	base := fixtures("base-1")
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"different kinds", args([]string{"compare"}, base, []string{"--vs"}, fixtures("ceil-1")), ExitUsage, `the base runs are "run" results and the new runs "ceiling" results`},
		{"kinds mixed on a side", args([]string{"compare"}, fixtures("base-1", "step-1"), []string{"--vs"}, base), ExitError, "the repeats of one side must be of one kind"},
		{"open against closed", args([]string{"compare"}, base, []string{"--vs"}, fixtures("open-1")), ExitUsage, "a result of the closed model and " +
			filepath.Join("..", "report", "testdata", "runs", "open-1") + " of the open model: compare refuses"},
		{"models mixed on a side", args([]string{"compare"}, fixtures("open-1", "base-2"), []string{"--vs"}, base), ExitUsage, "compare open-model results with open-model ones"},
		{"missing directory", args([]string{"compare"}, base, []string{"--vs", filepath.Join(dir, "nope")}), ExitError, "nope: no such directory"},
		{"corrupt result.json", args([]string{"compare"}, base, []string{"--vs", corrupt}), ExitError, "corrupt: corrupt result.json"},
		{"older format", args([]string{"compare"}, base, []string{"--vs", old}), ExitError, `result format "headroom-result/0" is not supported by this headroom`},
		{"no --vs", args([]string{"compare"}, base), ExitUsage, "then --vs and the new runs"},
		{"empty side", args([]string{"compare", "--vs"}, base), ExitUsage, "at least one result directory on each side"},
		{"bad confidence", args([]string{"compare"}, base, []string{"--vs"}, base, []string{"--confidence", "95"}), ExitUsage, "want a probability in (0.5, 1)"},
		{"bad gate", args([]string{"compare"}, base, []string{"--vs"}, base, []string{"--fail-on", "p99:10%"}), ExitUsage, "must be signed"},
		{"report of a run and a ceiling", args([]string{"report"}, fixtures("base-1", "ceil-1"), []string{"--out", dir}), ExitUsage, "all must be ceiling results"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := headroom(t, c.args...)
			if code != c.code || !strings.Contains(stderr, c.stderr) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", code, stderr, c.code, c.stderr)
			}
		})
	}
}

// TestCompareOpenResults: two open-model results compare as closed ones
// do, their latencies labelled from the intended start and said so in a
// note, with the service times beside them.
func TestCompareOpenResults(t *testing.T) {
	code, stdout, stderr := headroom(t, args([]string{"compare"}, fixtures("open-1"), []string{"--vs"}, fixtures("open-2"))...)
	if code != ExitOK {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"new (1 runs) vs base (1 runs), run results", "p99 latency from intended start, common mix",
		"mean service time (from the send)", "p99 service time (from the send)", "latencies are from each arrival's intended start"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}

func TestReportCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "matrix")
	code, stdout, stderr := headroom(t, args([]string{"report"}, fixtures("ceil-1", "ceil-2"), []string{"--out", out})...)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil || !strings.Contains(string(md), "| ceil ") || !strings.Contains(string(md), "headroom ceiling matrix") {
		t.Errorf("matrix report: %v\n%s", err, md)
	}
}
