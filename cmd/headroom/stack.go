package main

import (
	"os"
	"strings"
	"syscall"
)

// fixedStackStart runs headroom again in the same process (exec) with
// GODEBUG=adaptivestackstart=0 added, unless GODEBUG sets it already. The
// runtime otherwise starts each new goroutine with a stack as large as the
// average in use at the last collection, and users running Starlark make
// that 4 KB: every connected user's WebSocket reader, parked 1 KB deep,
// would hold 4 KB for its life instead of 2 KB. An idle user holding a
// WebSocket costs 22.8 KB with it, 25.2 KB without (docs/BENCHMARKS.md).
// Goroutines that need more grow as they always do. The setting is
// runtime-only (not a //go:debug one), read once at start: hence the exec.
// When the exec fails, headroom runs on as it is.
func fixedStackStart() {
	godebug := os.Getenv("GODEBUG")
	if strings.Contains(godebug, "adaptivestackstart=") {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	if godebug != "" {
		godebug += ","
	}
	env := []string{"GODEBUG=" + godebug + "adaptivestackstart=0"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GODEBUG=") {
			env = append(env, kv)
		}
	}
	_ = syscall.Exec(exe, os.Args, env) // returns only on failure
}
