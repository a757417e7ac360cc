//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// nativeServer is a compiled HTTP server whose every request runs a hash
// loop of the rounds its second argument says, in a function of its own:
// native code (perf samples it, not py-spy), with its symbols.
const nativeServer = `package main

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
)

//go:noinline
func hashPassword(password string, rounds int) uint32 {
	h := uint32(5381)
	for i := 0; i < rounds; i++ {
		h = h*33 + uint32(i) + uint32(len(password))
	}
	return h
}

func main() {
	rounds, _ := strconv.Atoi(os.Args[2])
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, hashPassword("correct-horse", rounds))
	})
	if err := http.ListenAndServe("127.0.0.1:"+os.Args[1], nil); err != nil {
		panic(err)
	}
}
`

// TestProfilerNamesANativeFunction: a compiled server (its symbols kept)
// whose requests hash at 5,000,000 rounds (base) and 20,000,000 (new), each
// run with `headroom profiler --sampler perf` beside it (Debian's perf,
// 99 samples a second, a software clock in a VM) and --profile reading it;
// compare names hashPassword, in the server's binary, as the cause. perf
// end to end: its record and script, the folding, the phases, the diff.
func TestProfilerNamesANativeFunction(t *testing.T) {
	t.Parallel()
	sampling.Lock()
	defer sampling.Unlock()
	perf, err := exec.LookPath("perf")
	if err != nil {
		t.Fatal("perf is needed: scripts/test.sh installs linux-perf")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(nativeServer), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hashserver\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	server := filepath.Join(dir, "hashserver")
	build := exec.Command(gobin, "build", "-o", server, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the server: %v\n%s", err, out)
	}
	// Compare names a cause from 1 s of CPU sampled a side: beside the
	// whole test suite a server of lighter requests got 0.7 s of it, in
	// 8 s of 1 s slices (each of perf's slices loses a few tenths of a
	// second to starting perf and reading its samples: 2 s slices over
	// 12 s lose less: 4.0 s sampled alone, 2.0 beside three busy loops). The
	// server takes one core (GOMAXPROCS=1, as the Python server's one
	// thread does) and, as root (the test command runs as root), ahead of
	// the other tests, as scripts/synapse.sh starts Synapse; the other core
	// is left to headroom and perf, whose profiles starved when the server
	// ran ahead on both. env and nice exec it: its PID is theirs.
	run := []string{"env", "GOMAXPROCS=1", server}
	if os.Geteuid() == 0 {
		run = []string{"env", "GOMAXPROCS=1", "nice", "-n", "-10", server}
	}
	window := profiledPair(t, [2]int{5_000_000, 20_000_000}, "12s", "2s", func(port, rounds int) *process {
		return startProcess(t, run[0], append(run[1:len(run):len(run)], strconv.Itoa(port), strconv.Itoa(rounds))...)
	}, "--sampler", "perf", "--perf", perf)
	m := window.CPUPerUnit
	var moved []string
	for _, mv := range window.Moved {
		moved = append(moved, mv.Name)
	}
	t.Logf("%s: %.2f → %.2f ms (%s); cause %q; sampled %.2f s a side at least; moved %q", m.Name, m.Base, m.New, m.DeltaText(), window.Cause, window.SampledS, moved)
	if window.SampledS < 1 {
		t.Fatalf("%.2f s of CPU sampled on a side: compare names no cause under 1 s", window.SampledS)
	}
	// Four times the rounds, the rest of a request (Go's HTTP server:
	// tens of µs) the same: about ×4 a request. ×1.5 and ×8 are far from
	// it, and from ×1 (the profiles not per request, or swapped).
	if m.Delta < 0.5 || m.Delta > 7 {
		t.Errorf("server CPU a request %+.0f%%: want about +300%% (four times the rounds)", 100*m.Delta)
	}
	if !strings.HasPrefix(window.Cause, "main.hashPassword") {
		t.Errorf("cause %q: want main.hashPassword, the function whose loop grew", window.Cause)
	}
}
