package result

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
)

func TestRoundTripIsExact(t *testing.T) {
	snap := metrics.NewSnapshot()
	for i := range 5000 {
		snap.Add(&metrics.Sample{Kind: metrics.Request, Name: "GET /x", Status: 200, Latency: time.Duration(i*i) * time.Microsecond})
	}
	snap.Add(&metrics.Sample{Kind: metrics.Action, Name: "Browse", Latency: time.Millisecond})
	dir := filepath.Join(t.TempDir(), "r")
	in := &Result{Kind: "run", Status: Completed, Requests: snap.Summaries(metrics.Request, time.Second),
		Actions: snap.Summaries(metrics.Action, time.Second)}
	if err := Write(dir, in, snap); err != nil {
		t.Fatal(err)
	}
	out, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if out.Format != Format || out.Requests[0].P99Ms != in.Requests[0].P99Ms {
		t.Errorf("read back %+v", out.Requests)
	}
	if len(out.Actions) != 1 || out.Actions[0].NoRequest != 1 {
		t.Errorf("read back actions %+v, want Browse with its one run that sent no request", out.Actions)
	}
	back, err := ReadHistograms(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Requests["GET /x"].Hist().Equals(snap.Requests["GET /x"].Hist()) {
		t.Error("histogram read back differs from the one written")
	}
	if back.Actions["Browse"].Count != 1 {
		t.Errorf("action histogram count %d", back.Actions["Browse"].Count)
	}
	if _, err := os.Stat(filepath.Join(dir, ResultFile+".tmp")); !os.IsNotExist(err) {
		t.Error("temporary file left behind")
	}
}

func TestReadRejectsWithAReason(t *testing.T) {
	cases := map[string]struct{ content, want string }{
		"missing":      {"", "no result.json"},
		"corrupt":      {`{"format": "headroom-result/1", "kind": `, "corrupt result.json"},
		"newer":        {`{"format": "headroom-result/9"}`, `result format "headroom-result/9" is not supported by this headroom`},
		"not headroom": {`{"some": "json"}`, "not a headroom result directory"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if c.content != "" {
				os.WriteFile(filepath.Join(dir, ResultFile), []byte(c.content), 0o644)
			}
			_, err := Read(dir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
			if name == "missing" && !errors.Is(err, ErrNotResult) {
				t.Errorf("missing result.json should be ErrNotResult")
			}
		})
	}
}
