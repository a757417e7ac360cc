package cli

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"time"

	"github.com/headroom-dev/headroom/agents"
	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/runner"
	"github.com/headroom-dev/headroom/scenario"
	"google.golang.org/grpc/credentials"
)

// fleetFlags say where a run's users run: in this process (the default),
// on agent processes of this machine (--local-agents), or on agents that
// dial in from anywhere (--agents, docs/AGENTS.md).
type fleetFlags struct {
	local, remote     int
	listen, tokenFile string
	tlsCert, tlsKey   string
	plaintext         bool
	wait              time.Duration
}

func (f *fleetFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.local, "local-agents", 0, "run the users on this many agent processes on this machine, each with an equal share of the cores (docs/AGENTS.md); 0: in this process")
	fs.IntVar(&f.remote, "agents", 0, "run the users on this many agents that dial in to --listen (`headroom agent --coordinator ADDR --token-file F` on each machine), split by their cores; the run begins when all have joined")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:7070", "with --agents: where agents dial in, host:port (0.0.0.0:7070 for other machines: then give --tls-cert)")
	fs.StringVar(&f.tokenFile, "token-file", "", "with --agents: a file holding the token agents must prove they know (128 random bits or more, e.g. openssl rand -hex 32 > token; a file that does not exist yet is made, mode 0600), - for standard input")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "with --agents: a PEM certificate for --listen, so agents can check it is this coordinator and nobody reads the scenario or figures (agents: --tls-ca)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "with --tls-cert: its PEM private key")
	fs.BoolVar(&f.plaintext, "plaintext", false, "with --agents, take agents without TLS on a --listen off loopback: only on a network you trust. Frames are sealed (no one can forge or change one), but anyone on the path reads the scenario, the target's credentials and the figures")
	fs.DurationVar(&f.wait, "agents-wait", 5*time.Minute, "with --agents: how long to wait for them all to join before giving up")
}

func (f *fleetFlags) on() bool { return f.local > 0 || f.remote > 0 }

// check refuses contradictory fleet flags.
func (f *fleetFlags) check(metricsAddr string) error {
	switch {
	case f.local < 0 || f.remote < 0:
		return fmt.Errorf("--local-agents and --agents must be 0 or more")
	case f.local > 0 && f.remote > 0:
		return fmt.Errorf("--local-agents and --agents cannot be given together: start agents here with one, or wait for them with the other")
	case f.remote > 0 && f.tokenFile == "":
		return fmt.Errorf("--agents needs --token-file: the token agents prove they hold (e.g. openssl rand -hex 32 > token; give the same file to each agent)")
	case (f.tlsCert == "") != (f.tlsKey == ""):
		return fmt.Errorf("--tls-cert and --tls-key go together")
	case f.remote == 0 && (f.tokenFile != "" || f.tlsCert != ""):
		return fmt.Errorf("--token-file and --tls-cert are for --agents")
	case f.wait <= 0:
		return fmt.Errorf("--agents-wait must be positive")
	}
	return nil
}

// attachFleet starts (--local-agents) or waits for (--agents) the run's
// agents and makes them c's fleet; closeFleet ends them. Without either
// flag it does nothing.
func (f *loadFlags) attachFleet(ctx context.Context, env Env, sc *scenario.Scenario, c *runner.Common, target *url.URL) (closeFleet func(), code int, ok bool) {
	ff := &f.fleet
	if !ff.on() {
		return func() {}, 0, true
	}
	var coord *agents.Coordinator
	if ff.local > 0 {
		la, err := startLocalAgents(ctx, env, ff.local, f.maxMemory(env))
		if err != nil {
			return nil, fail(env, ExitError, "--local-agents: %v", err), false
		}
		coord, closeFleet = la.coord, func() {
			if err := la.close(); err != nil {
				fmt.Fprintf(env.Stderr, "headroom: warning: %v\n", err)
			}
		}
	} else {
		var err error
		if coord, err = ff.await(ctx, env); err != nil {
			return nil, fail(env, ExitError, "--agents: %v", err), false
		}
		closeFleet = coord.Close
	}
	start := agents.Start{Path: sc.Path, Source: sc.Source, Files: sc.Files, Hash: sc.Hash, Vars: f.vars,
		MaxSteps: f.maxSteps, LoadTimeout: f.loadTimeout, Target: target.String(), Seed: f.seed, Timeout: f.timeout, Grace: f.grace,
		Client: f.client, MaxBody: int(f.maxBody.bytes), FreshSessions: f.freshSessions, SetupOnly: c.SetupOnly,
		SetupRetries: c.SetupRetries}
	for _, a := range f.sources.addrs {
		start.SourceAddrs = append(start.SourceAddrs, a.String())
	}
	c.NewFleet = func(local engine.Config) runner.Fleet {
		start.Metrics = c.Prom != nil // its checks or --metrics-listen read the agents' samples
		return coord.Fleet(local, start)
	}
	return closeFleet, 0, true
}

// await listens for --agents agents and waits until all have joined.
func (f *fleetFlags) await(ctx context.Context, env Env) (*agents.Coordinator, error) {
	if err := makeToken(f.tokenFile, env); err != nil {
		return nil, err
	}
	token, err := readToken(f.tokenFile, env)
	if err != nil {
		return nil, err
	}
	var creds credentials.TransportCredentials
	if f.tlsCert != "" {
		if creds, err = credentials.NewServerTLSFromFile(f.tlsCert, f.tlsKey); err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %v", err)
		}
	} else if who, _ := exposure(f.listen); who != "" {
		if !f.plaintext {
			return nil, fmt.Errorf("--listen %s takes agents %s without TLS: give --tls-cert and --tls-key (agents: --tls-ca), or --plaintext if the network between them is trusted (the scenario, the target's credentials and the figures would cross it in clear)", f.listen, who)
		}
		fmt.Fprintf(env.Stderr, "warning: --listen %s takes agents %s without TLS (--plaintext): the scenario, the target's credentials and the figures cross the network in clear; frames are sealed, so no one can forge or change one\n", f.listen, who)
	}
	coord, err := agents.Listen(f.listen, token, creds)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %v", f.listen, err)
	}
	coord.OnJoin(func(i int, h agents.Hello) {
		fmt.Fprintf(env.Stderr, "agent %d joined: %s, %d cores, headroom %s\n", i, h.Name, h.Cores, h.Version)
	})
	fmt.Fprintf(env.Stderr, "waiting up to %v for %d agents at %s: on each machine, headroom agent --coordinator %s --token-file FILE\n",
		f.wait, f.remote, coord.Addr(), coord.Addr())
	wait, cancel := context.WithTimeout(ctx, f.wait)
	defer cancel()
	if err := coord.Await(wait, f.remote); err != nil {
		n := coord.Joined()
		coord.Close()
		return nil, fmt.Errorf("%d of %d agents joined within --agents-wait %v: %v", n, f.remote, f.wait, err)
	}
	return coord, nil
}
