package cli

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/headroom-dev/headroom/agents"
	"github.com/headroom-dev/headroom/metrics"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

const agentHelp = `
Runs users for a coordinator: a headroom run, step or ceiling that spreads
its users over agents (docs/AGENTS.md). The agent dials the coordinator
(again and again until it answers, for --wait), both prove they hold the
same token (neither sends it), and the agent then runs the scenario the
coordinator sends, with the users it is given, and sends back its figures
every second. It ends when the coordinator's run ends. An agent that
joins a run already going takes the place of one the run lost.

An agent runs whatever scenario its coordinator sends: keep the token as
secret as a password to this machine (128 random bits or more: openssl
rand -hex 32; a weak one is refused). Every frame after the handshake is
sealed with a key of that stream, so no one can forge or change one. Off
loopback give --tls-ca, so nobody else reads the scenario either (the
coordinator then needs --tls-cert and --tls-key), or --plaintext on a
network you trust.

Examples:
  headroom agent --coordinator 127.0.0.1:7070 --token-file /etc/headroom/token
  headroom agent --coordinator coord.example:7070 --token-file token --tls-ca ca.pem --name "$(hostname)"
  echo "$TOKEN" | headroom agent --coordinator 127.0.0.1:7070 --token-file -

Exit codes: 0 the coordinator's run ended, 1 could not join or the run
broke off, 2 bad flags, 3 it left the run when told to (Ctrl-C, SIGTERM)
with every sample delivered: the run goes on without it (on Kubernetes, the
agents' Job makes its pod again and does not count it as a failure), 5 an
internal error (a bug in headroom).
`

func agentCmd(ctx context.Context, env Env, args []string) int {
	var coordinator, tokenFile, name, tlsCA, metricsAddr string
	var wait time.Duration
	var plaintext bool
	mem := memory{flagText{"50%"}}
	fs := newFlags(env, "agent", "--coordinator HOST:PORT --token-file FILE [flags]", agentHelp)
	fs.Var(&mem, "max-memory", "memory this agent may use, e.g. 4GiB, or a share of the machine's (its cgroup's limit, if lower), e.g. 50%; past it the agent cancels its users and its coordinator stops the run (status stopped), as a run of one process does; 0: no limit")
	fs.StringVar(&coordinator, "coordinator", "", "the coordinator's address, host:port (required)")
	fs.StringVar(&tokenFile, "token-file", "", "a file holding the shared token, or - for standard input (required)")
	host, _ := os.Hostname()
	fs.StringVar(&name, "name", host, "this agent's name in the coordinator's result; an agent of the same name takes a lost one's place first")
	fs.StringVar(&tlsCA, "tls-ca", "", "a PEM file of the certificate authority that signed the coordinator's --tls-cert: TLS, and the coordinator checked to be the one named in --coordinator")
	fs.StringVar(&metricsAddr, "metrics-listen", "", "serve this agent's Prometheus metrics (its users' samples, labelled agent=NAME) at this address, e.g. 0.0.0.0:9465 for a Prometheus that scrapes agents; off by default")
	fs.BoolVar(&plaintext, "plaintext", false, "dial a coordinator off loopback without TLS: only on a network you trust (frames are sealed, but the scenario, the target's credentials and the figures cross it in clear)")
	fs.DurationVar(&wait, "wait", 5*time.Minute, "how long to keep dialing a coordinator that does not answer, or that has no place yet")
	if code, ok := parseNone(env, fs, args, "agent"); !ok {
		return code
	}
	switch {
	case coordinator == "" || tokenFile == "":
		return fail(env, ExitUsage, "--coordinator and --token-file are required")
	case wait <= 0:
		return fail(env, ExitUsage, "--wait must be positive")
	case tlsCA == "" && !plaintext && !loopbackHost(coordinator):
		return fail(env, ExitUsage, "--coordinator %s is not on this machine: give --tls-ca (the coordinator's --tls-cert then proves it is the one named), or --plaintext if the network between them is trusted (the scenario, the target's credentials and the figures would cross it in clear)", coordinator)
	}
	token, err := readToken(tokenFile, env)
	if err != nil {
		return fail(env, ExitUsage, "%v", err)
	}
	creds := insecure.NewCredentials()
	if tlsCA != "" {
		if creds, err = credentials.NewClientTLSFromFile(tlsCA, ""); err != nil {
			return fail(env, ExitUsage, "--tls-ca: %v", err)
		}
	}
	// A connection the coordinator closes as it accepts it (its door full
	// of strangers from this address: docs/AGENTS.md, "Security") is
	// dialed again within seconds, not gRPC's default of up to 2 minutes.
	conn, err := grpc.NewClient(coordinator, grpc.WithTransportCredentials(creds), grpc.WithConnectParams(grpc.ConnectParams{
		Backoff: backoff.Config{BaseDelay: 250 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second}, MinConnectTimeout: 20 * time.Second}))
	if err != nil {
		return fail(env, ExitUsage, "--coordinator %s: %v", coordinator, err)
	}
	defer conn.Close()
	opt := agents.AgentOptions{Token: token, Name: name, Version: Version, MaxMemory: mem.resolve(env),
		Print: func(user int, msg string) { fmt.Fprintf(env.Stderr, "[user %d] %s\n", user, msg) },
		Log:   func(msg string) { fmt.Fprintf(env.Stderr, "headroom agent: %s\n", msg) }}
	// A stream that breaks is dialed again and resumed within the
	// coordinator's lease: the users run on, nothing is counted twice.
	opt.Redial = func(ctx context.Context) (agents.Stream, error) { return agents.Join(ctx, conn) }
	if metricsAddr != "" {
		opt.Prom = metrics.NewProm()
		stop, err := serveGatherer(metricsAddr, metrics.Labelled(opt.Prom.Gather, "agent", name))
		if err != nil {
			return fail(env, ExitUsage, "--metrics-listen: %v", err)
		}
		defer stop()
		fmt.Fprintf(env.Stderr, "metrics at http://%s/metrics\n", metricsAddr)
	}
	return joinUntil(ctx, env, conn, opt, coordinator, wait)
}

// joinUntil joins the coordinator and serves its run, dialing again for
// up to wait while it does not answer or has no place. Ctrl-C or SIGTERM
// (ctx) makes the agent leave in good order: its users stop, its last
// samples go and are acknowledged (bounded), on a stream and users that
// outlive the signal (hard) until then.
func joinUntil(ctx context.Context, env Env, conn *grpc.ClientConn, opt agents.AgentOptions, coordinator string, wait time.Duration) int {
	opt.Leave = ctx.Done()
	hard, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	deadline, said := time.Now().Add(wait), ""
	for {
		err := joinOnce(hard, conn, opt)
		switch {
		case err == nil:
			return ExitOK
		case errors.Is(err, agents.ErrLeft):
			fmt.Fprintf(env.Stderr, "headroom agent: %v\n", err)
			return ExitLeft
		case !agents.Retry(err) || time.Now().After(deadline):
			return fail(env, ExitError, "agent %s: %v", opt.Name, err)
		}
		if msg := err.Error(); msg != said { // once per reason, not once a second
			fmt.Fprintf(env.Stderr, "headroom agent: %s: %v; trying again for up to %v\n", coordinator, err, time.Until(deadline).Round(time.Second))
			said = msg
		}
		select {
		case <-ctx.Done(): // told to stop while it was not in a run
			return fail(env, ExitError, "agent %s: %v", opt.Name, context.Cause(ctx))
		case <-time.After(time.Second):
		}
	}
}

// joinOnce opens a stream to the coordinator and serves it.
func joinOnce(ctx context.Context, conn *grpc.ClientConn, opt agents.AgentOptions) error {
	s, err := agents.Join(ctx, conn)
	if err != nil {
		return err
	}
	return agents.Serve(ctx, s, opt)
}

// readToken reads a token file ("-": standard input), trimmed of white
// space, and refuses a weak token.
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
	t := []byte(strings.TrimSpace(string(b)))
	if err := agents.CheckToken(t); err != nil {
		return nil, fmt.Errorf("--token-file %s: %v", path, err)
	}
	return t, nil
}

// loopbackHost says whether addr (host:port) names this machine.
func loopbackHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// makeToken writes a new token to path, if no file is there, and says
// so: what a coordinator's --token-file does the first time.
func makeToken(path string, env Env) error {
	if path == "-" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--token-file: %v", err)
	}
	_, err = fmt.Fprintln(f, agents.MakeToken())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("--token-file: %v", err)
	}
	fmt.Fprintf(env.Stderr, "wrote a new token (256 random bits) to %s: give each agent a copy (--token-file), as you would a password\n", path)
	return nil
}

// localAgents is --local-agents: n agent processes of this binary on this
// machine, joined to a coordinator on loopback with a token made for them
// (on their standard input, never in their command line). close stops them.
type localAgents struct {
	coord  *agents.Coordinator
	procs  []*exec.Cmd
	exited []chan error // each agent's Wait, once it exited
	logs   sync.WaitGroup
}

// startLocalAgents starts n agents, each with an equal share of the cores
// (GOMAXPROCS) and of memory (bytes, the run's --max-memory; 0: no
// limit), and waits until all have joined.
func startLocalAgents(ctx context.Context, env Env, n int, memory uint64) (*localAgents, error) {
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
		cmd := exec.Command(exe, "agent", "--coordinator", coord.Addr(), "--token-file", "-", "--name", fmt.Sprintf("local-%d", i), "--wait", "10s",
			"--max-memory", agentMemory(memory, n))
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
		exited := make(chan error, 1)
		la.exited = append(la.exited, exited)
		la.logs.Go(func() { // the agent's own lines, prefixed
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				fmt.Fprintf(env.Stderr, "[agent %d] %s\n", i, sc.Text())
			}
		})
		go func() { // a process that ended cannot resume: lost at once, not at its lease
			err := cmd.Wait()
			why := err
			if why == nil {
				why = errors.New("exit status 0")
			}
			coord.Exited(fmt.Sprintf("local-%d", i), why)
			exited <- err
		}()
	}
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := coord.Await(wait, n); err != nil {
		la.close()
		return nil, fmt.Errorf("%d local agents did not all join within 30 s: %v", n, err)
	}
	return la, nil
}

// close ends the coordinator and waits for the agents, killing one that
// has not exited 10 s after.
func (la *localAgents) close() error {
	la.coord.Close()
	var errs []error
	for i, p := range la.procs {
		done := la.exited[i]
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
