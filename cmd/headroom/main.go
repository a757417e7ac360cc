// Command headroom finds how many users a system supports, and whether a
// release made it worse. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"syscall"

	"github.com/headroom-dev/headroom/cli"
)

// CrashFile is where, in a run's result directory, the report of a fatal
// runtime error goes (besides stderr); it is removed when empty.
const CrashFile = "crash.txt"

func main() {
	fixedStackStart()
	// A fatal runtime error (out of memory, a data race the runtime
	// catches, ...) cannot be recovered. Go would exit with 2, the code
	// for bad input; "crash" makes it die by SIGABRT instead (134 in a
	// shell), after printing every goroutine's stack: long with many
	// users, but a crash is rare and that report is what fixes it. A core
	// file follows only where ulimit -c allows one.
	debug.SetTraceback("crash")
	// The first Ctrl-C stops the run gracefully and still writes its result;
	// after it, signals get their default behaviour, so a second one kills.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	env := cli.Env{Args: os.Args[1:], Stdin: os.Stdin, Stdout: stdio(os.Stdout), Stderr: stdio(os.Stderr), IsTerminal: isTerminal,
		Getenv: os.Getenv, CrashOutput: crashOutput, Limits: limits}
	// HEADROOM_CPUPROFILE=file writes a CPU profile of the whole command,
	// for benchmarks (docs/BENCHMARKS.md); go tool pprof reads it.
	if path := os.Getenv("HEADROOM_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			code := cli.Main(ctx, env)
			pprof.StopCPUProfile()
			f.Close()
			os.Exit(code)
		}
	}
	os.Exit(cli.Main(ctx, env))
}

// crashOutput sends the report of a fatal runtime error to dir/crash.txt
// too, until undo, which removes the file if nothing was written to it.
func crashOutput(dir string) (undo func()) {
	path := filepath.Join(dir, CrashFile)
	f, err := os.Create(path)
	if err != nil {
		return func() {}
	}
	defer f.Close() // SetCrashOutput keeps its own descriptor
	if debug.SetCrashOutput(f, debug.CrashOptions{}) != nil {
		os.Remove(path)
		return func() {}
	}
	return func() {
		_ = debug.SetCrashOutput(nil, debug.CrashOptions{})
		if fi, err := os.Stat(path); err == nil && fi.Size() == 0 {
			os.Remove(path)
		}
	}
}
