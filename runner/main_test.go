package runner

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs 4 parallel tests at a time unless -parallel says
// otherwise: most of this package's tests wait on runs of a few wall-clock
// seconds (the real Prometheus's 28 among them), and the default of one
// a core left 2 cores idle behind them (`go test ./runner` took 94 s; the
// test command gives -parallel 3).
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "4")
	}
	os.Exit(m.Run())
}
