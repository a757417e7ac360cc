package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// proc is a process this harness started: stopped by its PID (its process
// group: it was started in one of its own), and killed by the kernel if the
// harness itself dies first (Pdeathsig).
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when it has exited
	err  error         // its exit, once done is closed
}

// start runs bin with args, its output to dir/name.log.
func start(dir, name, bin string, args []string, env []string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = env
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitCode is the process's exit code once it has exited (-1 if killed by
// a signal).
func (p *proc) exitCode() int {
	if p.cmd.ProcessState == nil {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// stop sends SIGTERM to the process group, and SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// controlPlane is etcd, kube-apiserver and kube-controller-manager (the Job
// and ServiceAccount controllers only), all on 127.0.0.1, with their
// certificates and keys in dir.
type controlPlane struct {
	dir   string
	procs []*proc // in start order; stopped in reverse
	cfg   *rest.Config
}

func (cp *controlPlane) stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		cp.procs[i].stop(10 * time.Second)
	}
}

// startControlPlane starts the three from the binaries in binDir, and
// returns once the API server is ready and the controller manager runs.
func startControlPlane(ctx context.Context, binDir, dir string, say func(string, ...any)) (*controlPlane, error) {
	cp := &controlPlane{dir: dir}
	pki, err := makePKI(dir)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + dir}

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	etcd, err := start(dir, "etcd", filepath.Join(binDir, "etcd"), []string{
		"-data-dir", filepath.Join(dir, "etcd-data"), "-client-url", etcdURL,
		"-peer-url", "http://127.0.0.1:" + strconv.Itoa(ports[1])}, env)
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, etcd)
	say("etcd (embedded, go.etcd.io/etcd/server/v3 v3.5.21): pid %d, %s", etcd.cmd.Process.Pid, etcdURL)

	host := "https://127.0.0.1:" + strconv.Itoa(ports[2])
	api, err := start(dir, "kube-apiserver", filepath.Join(binDir, "kube-apiserver"), []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[2]),
		"--tls-cert-file=" + pki.serverCert, "--tls-private-key-file=" + pki.serverKey,
		"--client-ca-file=" + pki.caCert, "--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
		"--service-account-key-file=" + pki.saPub, "--service-account-signing-key-file=" + pki.saKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=RBAC",
		"--profiling=false", "--enable-priority-and-fairness=false",
	}, env)
	if err != nil {
		cp.stop()
		return nil, err
	}
	cp.procs = append(cp.procs, api)
	say("kube-apiserver (k8s.io/kubernetes v1.33.0): pid %d, %s", api.cmd.Process.Pid, host)

	cp.cfg = &rest.Config{Host: host, TLSClientConfig: rest.TLSClientConfig{
		CAFile: pki.caCert, CertFile: pki.adminCert, KeyFile: pki.adminKey}, QPS: 50, Burst: 100}
	if err := waitReady(ctx, cp.cfg, api, 120*time.Second); err != nil {
		cp.stop()
		return nil, err
	}
	say("kube-apiserver: ready")

	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: %q, certificate-authority: %q}
users:
- name: admin
  user: {client-certificate: %q, client-key: %q}
contexts:
- name: e2e
  context: {cluster: e2e, user: admin}
current-context: e2e
`, host, pki.caCert, pki.adminCert, pki.adminKey)), 0o600); err != nil {
		cp.stop()
		return nil, err
	}
	kcm, err := start(dir, "kube-controller-manager", filepath.Join(binDir, "kube-controller-manager"), []string{
		"--kubeconfig=" + kubeconfig, "--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--controllers=job,serviceaccount", "--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port=0", "--use-service-account-credentials=false",
	}, env)
	if err != nil {
		cp.stop()
		return nil, err
	}
	cp.procs = append(cp.procs, kcm)
	say("kube-controller-manager (controllers: job, serviceaccount): pid %d", kcm.cmd.Process.Pid)
	return cp, nil
}

// waitReady polls /readyz until it answers ok, the process exits or the
// timeout passes.
func waitReady(ctx context.Context, cfg *rest.Config, p *proc, timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(c)
		cancel()
		if err == nil && string(body) == "ok" {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("%s exited (%v) before it was ready; its log: %s", p.name, p.err, p.log)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s (last: %v); its log: %s", p.name, timeout, err, p.log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

type pkiFiles struct {
	caCert, serverCert, serverKey, adminCert, adminKey, saKey, saPub string
}

// makePKI writes a CA, the API server's serving certificate, an admin
// client certificate (group system:masters) and the service-account
// signing key pair into dir: made fresh per run, removed with dir.
func makePKI(dir string) (*pkiFiles, error) {
	f := &pkiFiles{}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "headroom-e2e-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	var errs []error
	write := func(name, typ string, der []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		errs = append(errs, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode))
		return p
	}
	f.caCert = write("ca.crt", "CERTIFICATE", caDER, 0o644)
	leaf := func(name string, serial int64, subj pkix.Name, usage x509.ExtKeyUsage, ips []net.IP, dns []string) (string, string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: subj,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips, DNSNames: dns}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		errs = append(errs, err)
		kder, err := x509.MarshalECPrivateKey(key)
		errs = append(errs, err)
		return write(name+".crt", "CERTIFICATE", der, 0o644), write(name+".key", "EC PRIVATE KEY", kder, 0o600)
	}
	f.serverCert, f.serverKey = leaf("apiserver", 2, pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth,
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"})
	f.adminCert, f.adminKey = leaf("admin", 3, pkix.Name{CommonName: "e2e-admin", Organization: []string{"system:masters"}},
		x509.ExtKeyUsageClientAuth, nil, nil)
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	errs = append(errs, err)
	f.saKey = write("sa.key", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(sa), 0o600)
	f.saPub = write("sa.pub", "PUBLIC KEY", pub, 0o644)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	return f, nil
}
