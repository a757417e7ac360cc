// Command headroom finds how many users a system supports, and whether a
// release made it worse. See README.md.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/headroom-dev/headroom/internal/cli"
	"golang.org/x/term"
)

func main() {
	// The first Ctrl-C stops the run gracefully and still writes its result;
	// after it, signals get their default behaviour, so a second one kills.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	// HEADROOM_CPUPROFILE=file writes a CPU profile of the whole command,
	// for benchmarks (docs/BENCHMARKS.md); go tool pprof reads it.
	if path := os.Getenv("HEADROOM_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			code := cli.Main(ctx, cli.Env{Args: os.Args[1:], Stdout: os.Stdout, Stderr: os.Stderr, IsTerminal: isTerminal})
			pprof.StopCPUProfile()
			f.Close()
			os.Exit(code)
		}
	}
	os.Exit(cli.Main(ctx, cli.Env{Args: os.Args[1:], Stdout: os.Stdout, Stderr: os.Stderr, IsTerminal: isTerminal}))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
