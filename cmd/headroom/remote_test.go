//go:build linux

package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/result"
)

// TestRemoteAgents runs a coordinator waiting for two agents that dial in
// over TLS with a token file, as on other machines: one agent starts
// before the coordinator listens (it dials again), an impostor with
// another token is refused, and an agent killed mid-run is replaced by a
// new process of the same name, which takes its place and its users.
func TestRemoteAgents(t *testing.T) {
	t.Parallel() // beside the rest: a server or a browser of its own, mostly waited on
	dir := t.TempDir()
	star, token, bad := filepath.Join(dir, "ping.star"), filepath.Join(dir, "token"), filepath.Join(dir, "bad")
	cert, key := selfSigned(t, dir)
	scenario := strings.NewReplacer(`names = data.csv("names.csv")`, `names = [{"name": "ax"}, {"name": "bo"}, {"name": "cy"}]`).Replace(agentScenario)
	for name, content := range map[string]string{star: scenario, token: "b4e1f07c9a3d52e8a6c0d1f93b7e2a45", bad: "7d2c9e0b41fa863c5e17ab09d4f2c6e8"} {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addr := freeAddr(t)
	agent := func(name, tokenFile string) (*exec.Cmd, *syncBuffer) {
		cmd := command(t, "", nil, "agent", "--coordinator", addr, "--token-file", tokenFile, "--tls-ca", cert, "--name", name, "--wait", "30s")
		var out syncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
		return cmd, &out
	}
	a, aOut := agent("a", token) // before the coordinator: it dials again

	out := filepath.Join(t.TempDir(), "run")
	coord := command(t, "", nil, "run", star, "--target", testbedURL(t), "--users", "20", "--ramp", "1s", "--duration", "14s",
		"--out", out, "--quiet", "--no-report", "--agents", "2", "--listen", addr, "--token-file", token, "--tls-cert", cert, "--tls-key", key)
	var coordOut syncBuffer
	coord.Stdout, coord.Stderr = &coordOut, &coordOut
	if err := coord.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Process.Kill() })
	coordDone := make(chan error, 1)
	go func() { coordDone <- coord.Wait() }()

	impostor, impOut := agent("x", bad)
	if err := waitExit(impostor, 20*time.Second); err == nil || !strings.Contains(impOut.String(), "refused") {
		t.Errorf("an agent with another token: %v, want refused\n%s", err, impOut.String())
	}
	b, _ := agent("b", token)
	waitFor(t, &coordOut, "agent 1 joined", 20*time.Second)
	time.Sleep(5 * time.Second) // the ramp, and a few seconds of both
	if err := b.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	b.Wait()
	time.Sleep(time.Second)
	b2, b2Out := agent("b", token) // the Job re-creating its pod

	select {
	case err := <-coordDone:
		if err != nil {
			t.Fatalf("the coordinator: %v\n%s", err, coordOut.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the run did not end\n%s", coordOut.String())
	}
	for name, c := range map[string]*exec.Cmd{"a": a, "b (the second)": b2} {
		if err := waitExit(c, 20*time.Second); err != nil {
			t.Errorf("agent %s: %v\n%s%s", name, err, aOut.String(), b2Out.String())
		}
	}
	r, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != result.Completed || r.Agents == nil || len(r.Agents.Agents) != 3 || len(r.Agents.Faults) != 1 {
		t.Fatalf("status %q, agents %+v: want completed, three agents (b twice), one fault\n%s", r.Status, r.Agents, coordOut.String())
	}
	f := r.Agents.Faults[0]
	if f.Name != "b" || f.Users != 10 || f.To != 1 {
		t.Errorf("fault %+v: want b's 10 users moved to a", f)
	}
	var late *result.Agent
	for i, ag := range r.Agents.Agents {
		if ag.Name == "b" && ag.JoinedS > f.T {
			late = &r.Agents.Agents[i]
		}
	}
	if late == nil || late.Index != f.Index || late.Peak == 0 || late.Requests == 0 || late.Lost != "" {
		t.Errorf("the second b: %+v, want it in b's place (%d) after the fault, with users and requests", late, f.Index)
	}
	last := r.Timeline[len(r.Timeline)-2]
	if last.Users != 20 || last.Ready != 20 {
		t.Errorf("at the end %d users, %d ready: want 20", last.Users, last.Ready)
	}
	t.Logf("agents %+v\nfault %+v", r.Agents.Agents, f)
}

// selfSigned writes a certificate for 127.0.0.1 and its key into dir.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "headroom coordinator"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// freeAddr is a loopback address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitExit waits for a started cmd, killing it after d.
func waitExit(cmd *exec.Cmd, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		cmd.Process.Kill()
		return <-done
	}
}

// waitFor waits until b holds s.
func waitFor(t *testing.T, b *syncBuffer, s string, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); !strings.Contains(b.String(), s); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within %v:\n%s", s, d, b.String())
		}
	}
}

// syncBuffer is a strings.Builder a process and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAgentSIGTERMLeavesInGoodOrder: an agent told to stop mid-run (as a
// node drain's SIGTERM does) stops its users, delivers its last samples
// and exits 3 (left when told, cli.ExitLeft: not 0, which would tell a Job
// its work is done) once they are acknowledged; the coordinator moves its users
// to the other agent and records it as having left, every sample of it
// delivered (agents.TestAgentLeavesWithEverySample holds the figures to
// the last sample).
func TestAgentSIGTERMLeavesInGoodOrder(t *testing.T) {
	dir := t.TempDir()
	star, token := filepath.Join(dir, "ping.star"), filepath.Join(dir, "token")
	scenario := strings.NewReplacer(`names = data.csv("names.csv")`, `names = [{"name": "ax"}, {"name": "bo"}, {"name": "cy"}]`).Replace(agentScenario)
	for name, content := range map[string]string{star: scenario, token: "c9f1e27a04b83d6f5a2e18c07d94b3f6"} {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addr := freeAddr(t)
	out := filepath.Join(t.TempDir(), "run")
	coord := command(t, "", nil, "run", star, "--target", testbedURL(t), "--users", "20", "--ramp", "1s", "--duration", "10s",
		"--out", out, "--quiet", "--no-report", "--agents", "2", "--listen", addr, "--token-file", token)
	var coordOut syncBuffer
	coord.Stdout, coord.Stderr = &coordOut, &coordOut
	if err := coord.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Process.Kill() })
	agent := func(name string) (*exec.Cmd, *syncBuffer) {
		cmd := command(t, "", nil, "agent", "--coordinator", addr, "--token-file", token, "--name", name, "--wait", "30s")
		var o syncBuffer
		cmd.Stdout, cmd.Stderr = &o, &o
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
		return cmd, &o
	}
	a, aOut := agent("a")
	b, _ := agent("b")
	waitFor(t, &coordOut, "agent 1 joined", 20*time.Second)
	time.Sleep(4 * time.Second)
	if err := a.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := waitExit(a, 30*time.Second); a.ProcessState == nil || a.ProcessState.ExitCode() != 3 || !strings.Contains(aOut.String(), "every sample delivered") {
		t.Errorf("agent a on SIGTERM: %v, want exit 3 saying every sample was delivered\n%s", err, aOut.String())
	}
	if err := waitExit(coord, 60*time.Second); err != nil {
		t.Fatalf("the coordinator: %v\n%s", err, coordOut.String())
	}
	if err := waitExit(b, 20*time.Second); err != nil {
		t.Errorf("agent b: %v", err)
	}
	r, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != result.Completed || r.Agents == nil || len(r.Agents.Faults) != 1 {
		t.Fatalf("status %q, agents %+v: want completed, one fault\n%s", r.Status, r.Agents, coordOut.String())
	}
	if f := r.Agents.Faults[0]; f.Name != "a" || f.Users != 10 || f.To != 1 || !strings.Contains(f.Reason, "left the run") {
		t.Errorf("fault %+v: want a's 10 users moved to b, a having left the run", f)
	}
	if last := r.Timeline[len(r.Timeline)-2]; last.Users != 20 || last.Ready != 20 {
		t.Errorf("at the end %d users, %d ready: want 20", last.Users, last.Ready)
	}
}
