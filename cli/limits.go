package cli

import "fmt"

// filesMargin is how many open files headroom keeps for itself besides
// one connection per user: scrape and metrics connections, listeners,
// result and report files, the Go runtime's own.
const filesMargin = 64

// checkOpenFiles refuses, before traffic, a run whose users (what: the
// flag that asks for them) would run out of open files: each user holds
// one connection to the target (and one to each other host it visits).
func checkOpenFiles(env Env, users int, what string) (int, bool) {
	limit := env.limits().OpenFiles
	need := uint64(users) + filesMargin
	if limit == 0 || need <= limit {
		return 0, true
	}
	return fail(env, ExitUsage, "%s needs %d open files (a connection per user, plus %d for headroom), but this process may open %d (ulimit -n)\n"+
		"  fix: raise the limit (ulimit -n %d in the shell that starts headroom; above the hard limit, ulimit -Hn, needs root or /etc/security/limits.conf), "+
		"run at most %d users, or spread them over more machines", what, need, filesMargin, limit, need, limit-filesMargin), false
}

// maxUsersFor lowers a default --max-users to what the open-files limit
// allows, saying so; it returns max unchanged when the limit allows it.
func maxUsersFor(env Env, max int) int {
	limit := env.limits().OpenFiles
	if limit == 0 || uint64(max)+filesMargin <= limit || limit <= filesMargin {
		return max
	}
	fit := int(limit - filesMargin)
	fmt.Fprintf(env.Stderr, "note: --max-users lowered from %d to %d: this process may open %d files (ulimit -n), one per user plus %d\n", max, fit, limit, filesMargin)
	return fit
}
