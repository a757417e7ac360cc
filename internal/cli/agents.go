package cli

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/headroom-dev/headroom/agents"
	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/runner"
	"github.com/headroom-dev/headroom/scenario"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const agentHelp = `
Runs users for a coordinator: a headroom run, step or ceiling that spreads
its users over agents (docs/AGENTS.md). The agent dials the coordinator,
both prove they hold the same token (neither sends it), and the agent then
runs the scenario the coordinator sends, with the users it is given, and
sends back its figures every second. It ends when the coordinator's run
ends.

An agent runs whatever scenario its coordinator sends: keep the token as
secret as a password to this machine. Without TLS (not built yet), use
agents on loopback only, as --local-agents does.

Examples:
  headroom agent --coordinator 127.0.0.1:7070 --token-file /etc/headroom/token
  echo "$TOKEN" | headroom agent --coordinator 127.0.0.1:7070 --token-file -

Exit codes: 0 the coordinator's run ended, 1 could not join or the run
broke off, 2 bad flags, 5 an internal error (a bug in headroom).
`

func agentCmd(ctx context.Context, env Env, args []string) int {
	var coordinator, tokenFile, name string
	fs := newFlags(env, "agent", "--coordinator HOST:PORT --token-file FILE [flags]", agentHelp)
	fs.StringVar(&coordinator, "coordinator", "", "the coordinator's address, host:port (required)")
	fs.StringVar(&tokenFile, "token-file", "", "a file holding the shared token, or - for standard input (required)")
	host, _ := os.Hostname()
	fs.StringVar(&name, "name", host, "this agent's name in the coordinator's result")
	pos, code, ok := parse(env, fs, args)
	if !ok {
		return code
	}
	switch {
	case len(pos) > 0:
		return fail(env, ExitUsage, "agent takes no arguments, got %q", strings.Join(pos, " "))
	case coordinator == "" || tokenFile == "":
		return fail(env, ExitUsage, "--coordinator and --token-file are required")
	}
	token, err := readToken(tokenFile, env)
	if err != nil {
		return fail(env, ExitUsage, "%v", err)
	}
	conn, err := grpc.NewClient(coordinator, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fail(env, ExitUsage, "--coordinator %s: %v", coordinator, err)
	}
	defer conn.Close()
	s, err := agents.Join(ctx, conn)
	if err != nil {
		return fail(env, ExitError, "cannot join the coordinator at %s: %v", coordinator, err)
	}
	err = agents.Serve(ctx, s, agents.AgentOptions{Token: token, Name: name, Version: Version,
		Print: func(user int, msg string) { fmt.Fprintf(env.Stderr, "[user %d] %s\n", user, msg) }})
	if err != nil {
		return fail(env, ExitError, "agent %s: %v", name, err)
	}
	return ExitOK
}

// readToken reads a token file ("-": standard input), trimmed of white space.
func readToken(path string, env Env) ([]byte, error) {
	var b []byte
	var err error
	if path == "-" {
		if env.Stdin == nil {
			return nil, errors.New("--token-file -: no standard input")
		}
		b, err = io.ReadAll(io.LimitReader(env.Stdin, 1<<16))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("--token-file: %v", err)
	}
	t := strings.TrimSpace(string(b))
	if len(t) < 16 {
		return nil, fmt.Errorf("--token-file: the token is %d characters; use 16 or more (e.g. openssl rand -hex 32)", len(t))
	}
	return []byte(t), nil
}

// localAgents is --local-agents: n agent processes of this binary on this
// machine, joined to a coordinator on loopback with a token made for them
// (on their standard input, never in their command line). close stops them.
type localAgents struct {
	coord *agents.Coordinator
	procs []*exec.Cmd
	logs  sync.WaitGroup
}

// startLocalAgents starts n agents, each with an equal share of the cores
// (GOMAXPROCS), and waits until all have joined.
func startLocalAgents(ctx context.Context, env Env, n int) (*localAgents, error) {
	raw := make([]byte, 32)
	rand.Read(raw)
	token := hex.EncodeToString(raw)
	coord, err := agents.Listen("127.0.0.1:0", []byte(token), nil)
	if err != nil {
		return nil, err
	}
	la := &localAgents{coord: coord}
	exe, err := os.Executable()
	if err != nil {
		coord.Close()
		return nil, err
	}
	procs := max(1, runtime.NumCPU()/n)
	for i := range n {
		cmd := exec.Command(exe, "agent", "--coordinator", coord.Addr(), "--token-file", "-", "--name", fmt.Sprintf("local-%d", i))
		cmd.Env = append(os.Environ(), fmt.Sprintf("GOMAXPROCS=%d", procs))
		cmd.Stdin = strings.NewReader(token)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			la.close()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			la.close()
			return nil, fmt.Errorf("start agent %d: %v", i, err)
		}
		la.procs = append(la.procs, cmd)
		la.logs.Go(func() { // the agent's own lines, prefixed
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				fmt.Fprintf(env.Stderr, "[agent %d] %s\n", i, sc.Text())
			}
		})
	}
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := coord.Await(wait, n); err != nil {
		la.close()
		return nil, fmt.Errorf("%d local agents did not all join within 30 s: %v", n, err)
	}
	return la, nil
}

// fleet is the runner's Fleet over the agents, for scenario sc.
func (la *localAgents) fleet(sc *scenario.Scenario, f *loadFlags, target string) func(engine.Config) runner.Fleet {
	start := agents.Start{Path: sc.Path, Source: sc.Source, Files: sc.Files, Hash: sc.Hash, Vars: f.vars,
		MaxSteps: f.maxSteps, LoadTimeout: f.loadTimeout, Target: target, Seed: f.seed, Timeout: f.timeout, Grace: f.grace,
		Insecure: f.insecure, MaxBody: int(f.maxBody.bytes)}
	for _, a := range f.sources.addrs {
		start.SourceAddrs = append(start.SourceAddrs, a.String())
	}
	return func(local engine.Config) runner.Fleet { return la.coord.Fleet(local, start) }
}

// close ends the coordinator and waits for the agents, killing one that
// has not exited 10 s after.
func (la *localAgents) close() error {
	la.coord.Close()
	var errs []error
	for i, p := range la.procs {
		done := make(chan error, 1)
		go func() { done <- p.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				errs = append(errs, fmt.Errorf("agent %d: %v", i, err))
			}
		case <-time.After(10 * time.Second):
			p.Process.Kill()
			<-done
			errs = append(errs, fmt.Errorf("agent %d did not exit within 10 s of the run's end: killed", i))
		}
	}
	la.logs.Wait()
	return errors.Join(errs...)
}
