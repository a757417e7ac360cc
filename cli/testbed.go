package cli

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/headroom-dev/headroom/testbed"
)

const testbedHelp = `
Starts the testbed: a small chat-like HTTP API (users, login, channels,
posts, threads, reactions) whose capacity you set, so its ceiling is known in
advance. Every request holds one of --workers slots for its route's service
time (times --scale); more requests wait, and beyond --queue waiting ones the
server answers 503. It exposes Prometheus metrics at /metrics
(mattermost_api_time, mattermost_db_store_time, process and Go metrics).

Capacity = workers / mean service time of the mix. For a scenario with mean
think time Z the ceiling is about workers * (Z + S) / S users. docs/TESTBED.md
has the model, the service-time table and a worked example.

It binds to loopback by default and runs until Ctrl-C.

Examples:
  headroom testbed --listen 127.0.0.1:8065
  headroom testbed --listen 127.0.0.1:8065 --workers 4 --scale 2   # a quarter of the default capacity

Exit codes: 0 stopped by Ctrl-C, 1 could not listen, 2 bad flags,
5 an internal error (a bug in headroom).
`

func testbedCmd(ctx context.Context, env Env, args []string) int {
	var (
		listen string
		cfg    testbed.Config
	)
	def := testbed.Config{}.WithDefaults()
	fs := newFlags(env, "testbed", "[flags]", testbedHelp)
	fs.StringVar(&listen, "listen", "127.0.0.1:8065", "address to listen on")
	fs.IntVar(&cfg.Workers, "workers", def.Workers, "requests served at once")
	fs.IntVar(&cfg.Queue, "queue", def.Queue, "requests that may wait for a worker; more get 503")
	numberVar(fs, &cfg.Scale, "scale", def.Scale, 0, 1e6, true, "a factor above 0, e.g. 2", "multiplies every service time (2 = half the capacity)")
	fs.IntVar(&cfg.Channels, "channels", def.Channels, "public channels created at start")
	fs.Int64Var(&cfg.Seed, "seed", def.Seed, "seed of the store's content")
	fs.DurationVar(&cfg.EventCost, "event-cost", def.EventCost, "worker time of delivering one WebSocket event to one connection, before --scale; 0: none")
	fs.DurationVar(&cfg.ConnCost, "conn-cost", def.ConnCost, "worker time each open WebSocket connection costs per second, before --scale; 0: none")
	fs.DurationVar(&cfg.LoginCost, "login-cost", 0, "worker time added to every sign-up and login, not scaled (a password hashed slowly, e.g. 500ms as Mattermost 11's); 0: none")
	fs.IntVar(&cfg.HashRounds, "hash-rounds", 0, "hash every sign-up's and login's password with PBKDF2-SHA256 at this many rounds: real CPU, named hashPassword in a profile (Mattermost 11: 600000, about 0.5 s); 0: one SHA-256")
	fs.BoolVar(&cfg.Pprof, "pprof", false, "serve Go's profiles at /debug/pprof/ (net/http/pprof), for headroom's --profile; on loopback only unless you mean it: anyone who reaches it can make the testbed profile itself")
	if code, ok := parseNone(env, fs, args, "testbed"); !ok {
		return code
	}
	if cfg.Workers < 1 || cfg.Queue < 0 || !(cfg.Scale > 0) || cfg.Channels < 1 || cfg.EventCost < 0 || cfg.ConnCost < 0 || cfg.LoginCost < 0 || cfg.HashRounds < 0 {
		return fail(env, ExitUsage, "need --workers >= 1, --queue >= 0, --scale > 0, --channels >= 1, --event-cost, --conn-cost, --login-cost and --hash-rounds >= 0")
	}
	for _, d := range []*time.Duration{&cfg.EventCost, &cfg.ConnCost} {
		if *d == 0 {
			*d = -1 // none (0 in a Config means the default)
		}
	}
	srv := testbed.New(cfg)
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fail(env, ExitError, "testbed: %v", err)
	}
	c := srv.Config()
	fmt.Fprintf(env.Stderr, "testbed listening on http://%s (workers %d, queue %d, scale %g); metrics at /metrics; Ctrl-C stops\n",
		ln.Addr(), c.Workers, c.Queue, c.Scale)
	return serveUntil(ctx, env, "testbed", ln, srv.Handler(), 5*time.Second)
}
