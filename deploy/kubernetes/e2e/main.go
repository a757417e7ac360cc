// Command e2e runs deploy/kubernetes against a real Kubernetes control
// plane on this machine, with no kubelet and no images: etcd,
// kube-apiserver and kube-controller-manager (built by scripts/kube-e2e.sh
// from pinned modules), the manifests as `kubectl apply -k` renders them,
// and this program in the scheduler's and kubelet's place (kubelet.go),
// running each pod the Job controller creates as a local process of the
// headroom binary. The target is headroom's testbed. It shows that
//
//  1. the Job's agents join the coordinator,
//  2. an agent pod deleted mid-run is re-created by the Job controller, its
//     process started again, and it rejoins the run,
//  3. the coordinator's Job completes (and the agents' too),
//  4. its result outlives its pod, on the claim, and is copied out through
//     the results reader pod once the Job has ended,
//
// and prints a summary. Everything listens on 127.0.0.0/8; every wait is
// bounded; every process it started is stopped by PID at the end.
//
//	e2e -bin-dir DIR -headroom BIN -manifests deploy/kubernetes [-users 20 -duration 60s]
//
// Exit codes: 0 every check passed, 1 a check failed or the run broke off,
// 2 bad flags.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/headroom-dev/headroom/deploy/kubernetes/check"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

type options struct {
	binDir, headroom, manifests, work string
	users                             int
	ramp, duration, deleteAfter       time.Duration
	coordinatorDelay                  time.Duration
	timeout                           time.Duration
	keep, tls                         bool
}

// serviceAddr is the loopback address the coordinator Service's name
// stands for here (kubelet.podIP): its pod's address.
const serviceAddr = "127.0.2.10"

func main() {
	var o options
	flag.StringVar(&o.binDir, "bin-dir", "", "directory of etcd, kube-apiserver and kube-controller-manager (required)")
	flag.StringVar(&o.headroom, "headroom", "", "the headroom binary: the image's entrypoint (required)")
	flag.StringVar(&o.manifests, "manifests", "deploy/kubernetes", "the kustomization to apply")
	flag.StringVar(&o.work, "work", "", "working directory (certificates, etcd's data, pods' volumes, logs); default a new temporary one, removed on success")
	flag.IntVar(&o.users, "users", 20, "the coordinator's --users")
	flag.DurationVar(&o.ramp, "ramp", 5*time.Second, "the coordinator's --ramp")
	flag.DurationVar(&o.duration, "duration", 60*time.Second, "the coordinator's --duration")
	flag.DurationVar(&o.deleteAfter, "delete-after", 20*time.Second, "delete agent pod 1 this long after every agent has joined")
	flag.DurationVar(&o.coordinatorDelay, "coordinator-delay", 5*time.Second, "hold the coordinator's pod back this long (a slow image pull), so the agents start first and dial until it answers")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "the whole check's limit")
	flag.BoolVar(&o.keep, "keep", false, "keep the working directory")
	flag.BoolVar(&o.tls, "tls", true, "apply -manifests (TLS), with the Secret headroom-tls made here from a CA and a coordinator certificate, as a user makes it from scripts/kube-certs.sh's files; -tls=false: deploy/kubernetes-plaintext (beside -manifests)")
	flag.Parse()
	if o.binDir == "" || o.headroom == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: e2e -bin-dir DIR -headroom BIN [-manifests DIR] [flags]")
		os.Exit(2)
	}
	os.Exit(run(o))
}

var t0 = time.Now()

func say(format string, args ...any) {
	fmt.Printf("[%6.1fs] %s\n", time.Since(t0).Seconds(), fmt.Sprintf(format, args...))
}

// report is what the summary prints: each check and its evidence.
type report struct {
	checks []string
	failed bool
}

func (r *report) check(ok bool, format string, args ...any) {
	mark := "PASS"
	if !ok {
		mark, r.failed = "FAIL", true
	}
	line := mark + "  " + fmt.Sprintf(format, args...)
	r.checks = append(r.checks, line)
	say("%s", line)
}

func run(o options) int {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, o.timeout)
	defer cancelTimeout()

	work := o.work
	if work == "" {
		var err error
		if work, err = os.MkdirTemp("", "headroom-kube-e2e-"); err != nil {
			say("%v", err)
			return 1
		}
	}
	rep := &report{}
	defer func() {
		if o.keep || rep.failed {
			say("working directory kept: %s (logs: *.log, pods/*/container.log)", work)
		} else {
			os.RemoveAll(work)
		}
	}()
	say("working directory %s ($WORK below)", work)
	broke := func(what string, err error) int {
		say("%s%v", what, err)
		rep.failed = true
		return 1
	}

	tb, target, err := startTarget(ctx, o, work)
	if tb != nil {
		defer tb.stop(5 * time.Second)
	}
	if err != nil {
		return broke("testbed: ", err)
	}
	cp, err := startControlPlane(ctx, o.binDir, work, say)
	if err != nil {
		return broke("control plane: ", err)
	}
	defer cp.stop()
	cs, err := kubernetes.NewForConfig(cp.cfg)
	if err != nil {
		return broke("", err)
	}
	if v, err := cs.Discovery().ServerVersion(); err == nil {
		say("API server version %s", v.GitVersion)
	}
	set, err := manifests(o, target)
	if err != nil {
		return broke("manifests: ", err)
	}
	kl, stopKubelet := startKubelet(cs, set.Namespace.Name, o, work)
	defer stopKubelet()
	if err := apply(ctx, cs, set); err != nil {
		return broke("apply: ", err)
	}
	e := &e2e{o: o, cs: cs, ns: set.Namespace.Name, set: set, kl: kl, rep: rep}
	e.run(ctx)
	e.summary()
	if rep.failed {
		return 1
	}
	return 0
}

// startTarget starts the target, headroom's testbed on a free loopback
// port, and returns its process (nil if none started) and URL.
func startTarget(ctx context.Context, o options, work string) (*proc, string, error) {
	tb, err := start(work, "testbed", o.headroom, []string{"testbed", "--listen", "127.0.0.1:0"}, []string{"PATH=/usr/bin:/bin"})
	if err != nil {
		return nil, "", err
	}
	target, err := waitLine(ctx, tb, regexp.MustCompile(`listening on (http://127\.[0-9.]+:[0-9]+)`), 30*time.Second)
	if err != nil {
		return tb, "", err
	}
	say("testbed (the target): pid %d, %s", tb.cmd.Process.Pid, target)
	return tb, target, nil
}

// startKubelet starts the stand-in for the scheduler and the kubelet of
// namespace ns, the coordinator's pod held back o.coordinatorDelay; stop
// ends it and every process it started.
func startKubelet(cs kubernetes.Interface, ns string, o options, work string) (kl *kubelet, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	kl = newKubelet(cs, ns, "e2e-node", o.headroom, work, say)
	kl.services[check.ServiceName] = serviceAddr
	kl.startDelay = func(p *corev1.Pod) time.Duration {
		if p.Labels["app.kubernetes.io/component"] == "coordinator" {
			return o.coordinatorDelay
		}
		return 0
	}
	done := make(chan struct{})
	go func() { kl.run(ctx); close(done) }()
	return kl, func() { cancel(); <-done }
}

// manifests renders the kustomization as kubectl would, with a fresh
// token, adds the Secret headroom-tls as a user makes it (kubectl create
// secret, from scripts/kube-certs.sh's files) for the base, and edits the
// coordinator's flags as a user would for this target: --target, a small
// load, and shorter waits.
func manifests(o options, target string) (*check.Set, error) {
	raw := make([]byte, 32)
	rand.Read(raw)
	token := []byte(hex.EncodeToString(raw))
	dir, err := filepath.Abs(o.manifests)
	if err != nil {
		return nil, err
	}
	base, overlay := filepath.Base(dir), check.PlaintextOverlay
	if o.tls {
		overlay = base
	}
	objs, err := check.BuildOverlay(filepath.Dir(dir), overlay, map[string][]byte{base + "/token": token})
	if err != nil {
		return nil, err
	}
	set, err := check.Classify(objs)
	if err != nil {
		return nil, err
	}
	if o.tls {
		var names []string
		for _, suffix := range []string{"", ".headroom", ".headroom.svc", ".headroom.svc.cluster.local"} {
			names = append(names, check.ServiceName+suffix)
		}
		ca, cert, key, err := coordinatorTLS(names, serviceAddr)
		if err != nil {
			return nil, err
		}
		set.TLS = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: check.TLSName, Namespace: set.Namespace.Name},
			Data: map[string][]byte{"ca.crt": ca, "tls.crt": cert, "tls.key": key}}
		say("TLS: Secret %s made here (as kubectl create secret from kube-certs.sh's files would): a CA and a certificate for %s and %s", check.TLSName, strings.Join(names, ", "), serviceAddr)
	}
	c := &set.Coordinator.Spec.Template.Spec.Containers[0]
	for _, f := range [][2]string{{"target", target}, {"users", strconv.Itoa(o.users)},
		{"ramp", o.ramp.String()}, {"duration", o.duration.String()}, {"agents-wait", "3m"}} {
		c.Args = check.SetFlag(c.Args, f[0], f[1])
	}
	say("rendered %s (kustomize, as kubectl apply -k): %d objects; coordinator: headroom %s", filepath.Join(filepath.Dir(dir), overlay), len(objs), strings.Join(c.Args, " "))
	return set, nil
}

// apply creates the objects in kubectl's order, once the namespace's
// default ServiceAccount exists (the admission of pods needs it).
func apply(ctx context.Context, cs kubernetes.Interface, set *check.Set) error {
	ns := set.Namespace.Name
	if _, err := cs.CoreV1().Namespaces().Create(ctx, set.Namespace, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "e2e-node",
		Labels: map[string]string{"kubernetes.io/hostname": "e2e-node"}}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := poll(ctx, 60*time.Second, func() (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("the ServiceAccount controller made no default ServiceAccount in %s: %w", ns, err)
	}
	for _, obj := range set.Objects()[1:] {
		var err error
		switch o := obj.(type) {
		case *corev1.Secret:
			_, err = cs.CoreV1().Secrets(ns).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ConfigMap:
			_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Service:
			_, err = cs.CoreV1().Services(ns).Create(ctx, o, metav1.CreateOptions{})
		case *networkingv1.NetworkPolicy:
			_, err = cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.PersistentVolumeClaim:
			_, err = cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, o, metav1.CreateOptions{})
		case *batchv1.Job:
			_, err = cs.BatchV1().Jobs(ns).Create(ctx, o, metav1.CreateOptions{})
		default:
			err = fmt.Errorf("cannot create %T", obj)
		}
		if err != nil {
			return fmt.Errorf("create %T %s: %w", obj, nameOf(obj), err)
		}
		say("created %s %s/%s", strings.TrimPrefix(fmt.Sprintf("%T", obj), "*v1."), ns, nameOf(obj))
	}
	return nil
}

func nameOf(o runtime.Object) string { return o.(metav1.Object).GetName() }

// poll calls f every 250 ms until it says done, it errs, ctx ends or
// timeout passes.
func poll(ctx context.Context, timeout time.Duration, f func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, err := f()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// waitLine waits for a line of p's log to match re, and returns its first
// group.
func waitLine(ctx context.Context, p *proc, re *regexp.Regexp, timeout time.Duration) (string, error) {
	var got string
	err := poll(ctx, timeout, func() (bool, error) {
		if m := re.FindStringSubmatch(readFile(p.log)); m != nil {
			got = m[1]
			return true, nil
		}
		if p.exited() {
			return false, fmt.Errorf("exited (%v); its log: %s", p.err, p.log)
		}
		return false, nil
	})
	return got, err
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// usersActive reads loadtest_users_active from an agent's /metrics (its
// --metrics-listen, the address the scrape annotations name): how many
// users it runs for the coordinator.
func usersActive(ctx context.Context, addr string) (float64, error) {
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(c, http.MethodGet, "http://"+addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var sum float64
	found := false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "loadtest_users_active") {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum, found = sum+v, true
		}
	}
	if !found {
		return 0, fmt.Errorf("no loadtest_users_active at %s/metrics", addr)
	}
	return sum, sc.Err()
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
