package cli

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/headroom-dev/headroom/sampler"
)

const profilerHelp = `
Stands beside a server that serves no profiles of its own (Python, native
code) and serves its CPU profiles as Go's pprof endpoint does, so that
--profile reads them as it reads a Go server's: phases, flame graphs,
compare's diff and the cause work unchanged (docs/PROFILES.md, "Python and
native servers"). Run it on the server's machine:

  headroom profiler --pid 1234 --listen 127.0.0.1:6061 &
  headroom run scenario.star --target http://127.0.0.1:8000 \
      --profile http://127.0.0.1:6061/debug/pprof --profile-slice 2s --out runs/new

GET /debug/pprof/profile?seconds=N (1 to 60; 30 when not given) answers
after N seconds with a gzipped pprof CPU profile of the process and its
children (gunicorn's workers too), sampled 100 times a second:
  py-spy   CPython (py-spy ` + sampler.PySpyVersion + `: pip install py-spy==` + sampler.PySpyVersion + `, or
           ./scripts/py-spy.sh install); functions named "name (file)"; threads
           waiting for the GIL count as running (--gil: only its holder)
  perf     native code (Debian's linux-perf), 99 times a second; symbols
           as the binaries have them, stacks as far as frame pointers go
  auto     py-spy when the process runs CPython (its program is python…
           or it maps libpython), else perf
One profile is taken at a time: a request while one is taken is answered
429 at once (Retry-After: the seconds left). /debug/pprof/heap is 404
(--profile then takes the CPU profiles alone). A process that cannot be
sampled is answered 503 with the reason, and the profiler goes on:
gone (--name finds a restarted server again), py-spy or perf missing,
ptrace not permitted (run as root or as the process's user).

It listens on loopback only: to profile another machine's server, run it
there and reach it through a tunnel (ssh -L 6061:127.0.0.1:6061 host).
--token-file makes every request carry the token (at least 128 random
bits: openssl rand -hex 32 > token), for a machine others log in to:
--profile http://headroom:TOKEN@127.0.0.1:6061/debug/pprof.

The cost to the server: py-spy reads its memory 100 times a second
without stopping it (--nonblocking); perf takes a sample 99 times a second.

Exit codes: 0 stopped by Ctrl-C, 1 could not listen or no such process,
2 bad flags, 5 an internal error (a bug in headroom).
`

func profilerCmd(ctx context.Context, env Env, args []string) int {
	var (
		target                                sampler.Target
		listen, tokenFile, which, pyspy, perf string
		gil                                   bool
	)
	fs := newFlags(env, "profiler", "--pid PID | --name NAME [flags]", profilerHelp)
	fs.IntVar(&target.PID, "pid", 0, "the process to profile, and its children")
	fs.StringVar(&target.Name, "name", "", "the process to profile, by its command name or a word of its command line (python3, server.py, gunicorn), found again at each profile; of a parent and its children, the parent")
	fs.StringVar(&listen, "listen", "127.0.0.1:6061", "address to serve /debug/pprof/ on: loopback only")
	fs.StringVar(&tokenFile, "token-file", "", "a file holding a token every request must carry (Authorization: Bearer TOKEN, or the password of http://user:TOKEN@host/), or - for standard input")
	fs.StringVar(&which, "sampler", "auto", "py-spy (CPython), perf (native code), or auto: py-spy when the process runs CPython, else perf")
	fs.StringVar(&pyspy, "py-spy", "py-spy", "the py-spy program ("+sampler.PySpyVersion+")")
	fs.BoolVar(&gil, "gil", false, "py-spy: sample only the thread that holds the GIL (py-spy --gil): for a server of several busy Python threads, whose threads waiting for the GIL py-spy counts as running; it misses native code that lets the GIL go (bcrypt, zlib)")
	fs.StringVar(&perf, "perf", "perf", "the perf program")
	if code, ok := parseNone(env, fs, args, "profiler"); !ok {
		return code
	}
	switch {
	case (target.PID > 0) == (target.Name != ""):
		return fail(env, ExitUsage, "give --pid or --name, one of them")
	case target.PID < 0:
		return fail(env, ExitUsage, "--pid %d: want a process id", target.PID)
	case which != "auto" && which != "py-spy" && which != "perf":
		return fail(env, ExitUsage, "--sampler %q: want py-spy, perf or auto", which)
	case !sampler.Loopback(listen):
		return fail(env, ExitUsage, "--listen %s: the profiler listens on loopback only (127.0.0.1:PORT); to reach it from another machine use a tunnel: ssh -L 6061:127.0.0.1:6061 thishost", listen)
	}
	srv := &sampler.Server{Target: target, Log: func(msg string) { fmt.Fprintf(env.Stderr, "headroom profiler: %s\n", msg) }}
	if tokenFile != "" {
		t, err := readToken(tokenFile, env)
		if err != nil {
			return fail(env, ExitUsage, "%v", err)
		}
		srv.Token = t
	}
	pid, err := target.Find(srv.Proc)
	if err != nil {
		return fail(env, ExitError, "profiler: %v", err)
	}
	if which == "auto" {
		if which = "perf"; srv.Proc.Python(pid) {
			which = "py-spy"
		}
	}
	if which == "py-spy" {
		srv.Sampler = sampler.PySpy{Path: pyspy, GIL: gil, Proc: srv.Proc}
	} else {
		srv.Sampler = sampler.Perf{Path: perf, Proc: srv.Proc}
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fail(env, ExitError, "profiler: %v", err)
	}
	now := ""
	if target.Name != "" {
		now = fmt.Sprintf(" (now process %d)", pid)
	}
	fmt.Fprintf(env.Stderr, "headroom profiler: %s%s with %s, at http://%s/debug/pprof (--profile); Ctrl-C stops\n", target, now, which, ln.Addr())
	// a profile in flight is cut at Ctrl-C: its sampler is stopped with its request
	return serveUntil(ctx, env, "profiler", ln, srv.Handler(), time.Second)
}
