package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// kubelet plays the scheduler and the kubelet of one node for one
// namespace: it binds each new pod to its node, runs the pod's container
// as a local process of the headroom binary, and reports the pod's status
// (Running, then Succeeded or Failed by the exit code) as a kubelet does. A
// pod being deleted gets SIGTERM, SIGKILL after its grace period, a
// terminal status, and then its deletion completed.
//
// What stands in for a container: args and env from the pod spec ($(VAR)
// expanded; the downward API's fieldRefs resolved); each Secret, ConfigMap,
// projected and emptyDir volume written into a directory of its own (and
// removed with the pod), each persistentVolumeClaim a directory of the
// claim's that outlives its pods (container.go, claimDir), and
// every argument under a mountPath rewritten to that directory (there are
// no mount namespaces); each pod its own loopback address as its pod IP,
// with 0.0.0.0 in its arguments bound to it; a headless Service's DNS name
// in an argument resolved to the address of the pod it selects (one
// address kept per Service, see podIP: before that pod runs, dialing it is
// refused and the agent dials again, as it would after a failed lookup).
// No image is pulled: the image must be headroom's, whose entrypoint is
// the binary built here, or busybox's, whose command (sleep, for the
// results reader) runs from this machine's /usr/bin and /bin.
type kubelet struct {
	cs       kubernetes.Interface
	ns, node string
	bin      string // the headroom binary: the image's entrypoint
	dir      string // pods' directories and logs
	say      func(string, ...any)

	// startDelay holds a pod back before its process starts, as pulling a
	// large image would (nil: none).
	startDelay func(*corev1.Pod) time.Duration

	mu       sync.Mutex
	pods     map[types.UID]*podRun
	order    []*podRun // every pod seen, in order
	nextIP   int
	services map[string]string // headless Service name -> the address its pod gets
}

// podRun is one pod this kubelet has seen, and its process once started.
type podRun struct {
	name, index string
	uid         types.UID
	ip          string
	dir         string
	proc        *proc
	volumes     map[string]string // mountPath -> host directory
	seen        time.Time
	started     time.Time
	ended       time.Time
	deleted     time.Time // when its deletion was first seen
	termSent    time.Time
	grace       time.Duration
	reported    bool // its terminal status is in the API
	finishSent  bool // its deletion completed (grace 0)
	gone        bool // no longer in the API
	waiting     string
}

func newKubelet(cs kubernetes.Interface, ns, node, bin, dir string, say func(string, ...any)) *kubelet {
	return &kubelet{cs: cs, ns: ns, node: node, bin: bin, dir: dir, say: say, pods: map[types.UID]*podRun{}, nextIP: 10,
		services: map[string]string{}}
}

// run syncs every 200 ms until ctx ends, then stops every process.
func (k *kubelet) run(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			k.stopAll()
			return
		case <-t.C:
			if err := k.sync(ctx); err != nil && ctx.Err() == nil {
				k.say("kubelet: %v", err)
			}
		}
	}
}

func (k *kubelet) stopAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, r := range k.order {
		if r.proc != nil {
			r.proc.stop(5 * time.Second)
		}
	}
}

// find returns a copy of the pod run of uid (a zero podRun if none).
func (k *kubelet) find(uid types.UID) podRun {
	k.mu.Lock()
	defer k.mu.Unlock()
	if r := k.pods[uid]; r != nil {
		return *r
	}
	return podRun{}
}

// snapshot returns a copy of every pod run seen, in order.
func (k *kubelet) snapshot() []podRun {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]podRun, len(k.order))
	for i, r := range k.order {
		out[i] = *r
	}
	return out
}

func (k *kubelet) sync(ctx context.Context) error {
	list, err := k.cs.CoreV1().Pods(k.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	present := map[types.UID]bool{}
	for i := range list.Items {
		pod := &list.Items[i]
		present[pod.UID] = true
		r := k.pods[pod.UID]
		if r == nil {
			r = &podRun{name: pod.Name, uid: pod.UID, index: pod.Labels["batch.kubernetes.io/job-completion-index"], seen: time.Now()}
			k.pods[pod.UID] = r
			k.order = append(k.order, r)
			k.say("pod %s created by the Job controller (index %q)", pod.Name, r.index)
		}
		if err := k.syncPod(ctx, pod, r); err != nil {
			k.say("pod %s: %v", pod.Name, err)
		}
	}
	for uid, r := range k.pods {
		if !present[uid] && !r.gone {
			r.gone = true
			if r.proc != nil && !r.proc.exited() {
				r.proc.stop(5 * time.Second)
			}
			// Its own volumes go with it (the claims' directories do not).
			if r.dir != "" {
				os.RemoveAll(filepath.Join(r.dir, "volumes"))
			}
			k.say("pod %s removed from the API (its emptyDir, Secret and ConfigMap volumes removed)", r.name)
		}
	}
	return nil
}

func (k *kubelet) syncPod(ctx context.Context, pod *corev1.Pod, r *podRun) error {
	switch {
	case pod.DeletionTimestamp != nil:
		return k.terminate(ctx, pod, r)
	case pod.Spec.NodeName == "":
		return k.cs.CoreV1().Pods(k.ns).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: k.node}}, metav1.CreateOptions{})
	case r.proc == nil && pod.Status.Phase == corev1.PodPending:
		if k.startDelay != nil {
			if d := k.startDelay(pod); time.Since(r.seen) < d {
				if r.waiting == "" {
					r.waiting = "delay"
					k.say("pod %s: held back %s before it starts (as an image pull would)", pod.Name, d)
				}
				return nil
			}
		}
		err := k.startPod(ctx, pod, r)
		var wait errNotYet
		if errors.As(err, &wait) {
			if r.waiting != wait.Error() {
				r.waiting = wait.Error()
				k.say("pod %s waits: %v", pod.Name, wait)
			}
			return nil
		}
		return err
	case r.proc != nil && r.proc.exited() && !r.reported:
		return k.reportExit(ctx, pod, r)
	}
	return nil
}

// terminate is a kubelet's part in a pod's deletion: SIGTERM, SIGKILL past
// the grace period, the terminal status, then deletion with grace 0.
func (k *kubelet) terminate(ctx context.Context, pod *corev1.Pod, r *podRun) error {
	if r.deleted.IsZero() {
		r.deleted = time.Now()
		r.grace = 30 * time.Second
		if pod.DeletionGracePeriodSeconds != nil {
			r.grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
		}
		k.say("pod %s is being deleted (grace %s)", pod.Name, r.grace)
	}
	if r.proc != nil && !r.proc.exited() {
		if r.termSent.IsZero() {
			r.termSent = time.Now()
			syscall.Kill(-r.proc.cmd.Process.Pid, syscall.SIGTERM)
			k.say("pod %s: SIGTERM to pid %d", pod.Name, r.proc.cmd.Process.Pid)
		} else if time.Since(r.termSent) > r.grace {
			syscall.Kill(-r.proc.cmd.Process.Pid, syscall.SIGKILL)
		}
		return nil
	}
	if r.proc != nil && !r.reported {
		if err := k.reportExit(ctx, pod, r); err != nil {
			return err
		}
	}
	if r.finishSent {
		return nil // the Job controller's finalizer keeps it a while
	}
	r.finishSent = true
	zero := int64(0)
	err := k.cs.CoreV1().Pods(k.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero,
		Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// errNotYet: the pod cannot start yet (a name it needs does not resolve).
type errNotYet struct{ why string }

func (e errNotYet) Error() string { return e.why }

func (k *kubelet) startPod(ctx context.Context, pod *corev1.Pod, r *podRun) error {
	if len(pod.Spec.Containers) != 1 || len(pod.Spec.InitContainers) > 0 {
		return fmt.Errorf("want exactly one container and no init containers")
	}
	c := pod.Spec.Containers[0]
	bin, cmdArgs, err := k.entrypoint(c)
	if err != nil {
		return err
	}
	if r.ip == "" {
		ip, err := k.podIP(ctx, pod)
		if err != nil {
			return err
		}
		r.ip, r.dir = ip, filepath.Join(k.dir, "pods", pod.Name)
		if err := os.MkdirAll(r.dir, 0o700); err != nil {
			return err
		}
	}
	vols, err := k.materialize(ctx, pod, r.dir)
	if err != nil {
		return err
	}
	env, err := containerEnv(pod, c, r.ip)
	if err != nil {
		return err
	}
	var args []string
	for _, a := range append(cmdArgs, c.Args...) {
		a = expand(a, env)
		a = rewritePaths(a, vols)
		a = strings.ReplaceAll(a, "0.0.0.0:", r.ip+":")
		if a, err = k.resolveHosts(ctx, a); err != nil {
			return err
		}
		args = append(args, a)
	}
	procEnv := []string{"PATH=/usr/bin:/bin", "HOME=" + r.dir, "HOSTNAME=" + hostname(pod)}
	if tmp, ok := vols["/tmp"]; ok {
		procEnv = append(procEnv, "TMPDIR="+tmp)
	}
	for _, e := range c.Env {
		procEnv = append(procEnv, e.Name+"="+env[e.Name])
	}
	p, err := start(r.dir, "container", bin, args, procEnv)
	if err != nil {
		return err
	}
	r.proc, r.volumes, r.started, r.waiting = p, vols, time.Now(), ""
	k.say("pod %s: started pid %d on %s: %s %s", pod.Name, p.cmd.Process.Pid, r.ip, filepath.Base(bin),
		strings.ReplaceAll(strings.Join(args, " "), k.dir+"/", "$WORK/"))
	now := metav1.Now()
	return k.setStatus(ctx, pod, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodRunning
		s.PodIP, s.PodIPs = r.ip, []corev1.PodIP{{IP: r.ip}}
		s.HostIP, s.HostIPs = "127.0.0.1", []corev1.HostIP{{IP: "127.0.0.1"}}
		s.StartTime = &now
		s.Conditions = conditions(now, corev1.ConditionTrue)
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, Image: c.Image, ImageID: "local://" + bin,
			ContainerID: fmt.Sprintf("process://%d", p.cmd.Process.Pid), Ready: true, Started: ptr(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
	})
}

// entrypoint is what a container runs here: headroom's image its binary
// (the image's entrypoint; no command), busybox's its command from this
// machine's /usr/bin or /bin. The arguments before the container's args
// are returned with it.
func (k *kubelet) entrypoint(c corev1.Container) (string, []string, error) {
	switch {
	case strings.HasPrefix(c.Image, "headroom") && len(c.Command) == 0:
		return k.bin, nil, nil
	case strings.HasPrefix(c.Image, "busybox:") && len(c.Command) > 0 && !strings.Contains(c.Command[0], "/"):
		for _, d := range []string{"/usr/bin", "/bin"} {
			if p := filepath.Join(d, c.Command[0]); isExecutable(p) {
				return p, c.Command[1:], nil
			}
		}
		return "", nil, fmt.Errorf("image %q: no %s in /usr/bin or /bin here", c.Image, c.Command[0])
	}
	return "", nil, fmt.Errorf("image %q command %v: this kubelet runs headroom's image with its entrypoint, or a busybox command", c.Image, c.Command)
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// reportExit is the pod's terminal status: Succeeded on exit 0, Failed
// otherwise (restartPolicy Never: the container is not restarted).
func (k *kubelet) reportExit(ctx context.Context, pod *corev1.Pod, r *podRun) error {
	code := r.proc.exitCode()
	r.ended = time.Now()
	phase := corev1.PodSucceeded
	if code != 0 {
		phase = corev1.PodFailed
	}
	now := metav1.Now()
	err := k.setStatus(ctx, pod, func(s *corev1.PodStatus) {
		s.Phase = phase
		s.Conditions = conditions(now, corev1.ConditionFalse)
		started := metav1.NewTime(r.started)
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Spec.Containers[0].Name, Image: pod.Spec.Containers[0].Image,
			ImageID: "local://" + r.proc.cmd.Path, ContainerID: fmt.Sprintf("process://%d", r.proc.cmd.Process.Pid), Started: ptr(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code),
				StartedAt: started, FinishedAt: now, Reason: map[bool]string{true: "Completed", false: "Error"}[code == 0]}}}}
	})
	if err != nil {
		return err
	}
	r.reported = true
	k.say("pod %s: pid %d exited %d: %s", pod.Name, r.proc.cmd.Process.Pid, code, phase)
	return nil
}

func (k *kubelet) setStatus(ctx context.Context, pod *corev1.Pod, mutate func(*corev1.PodStatus)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := k.cs.CoreV1().Pods(k.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != pod.UID {
			return fmt.Errorf("pod %s was replaced", pod.Name)
		}
		mutate(&cur.Status)
		_, err = k.cs.CoreV1().Pods(k.ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func conditions(now metav1.Time, ready corev1.ConditionStatus) []corev1.PodCondition {
	return []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: ready, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: ready, LastTransitionTime: now},
	}
}

func ptr[T any](v T) *T { return &v }

func hostname(pod *corev1.Pod) string {
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	return pod.Name
}

// resolveHosts replaces a Service's DNS name in HOST:PORT (or
// --flag=HOST:PORT) with the address cluster DNS gives for a headless
// Service: a pod it selects (ready, unless publishNotReadyAddresses).
func (k *kubelet) resolveHosts(ctx context.Context, arg string) (string, error) {
	prefix, val := "", arg
	if i := strings.IndexByte(arg, '='); i >= 0 && strings.HasPrefix(arg, "-") {
		prefix, val = arg[:i+1], arg[i+1:]
	}
	host, port, err := net.SplitHostPort(val)
	if err != nil || net.ParseIP(host) != nil || host == "localhost" {
		return arg, nil
	}
	name := strings.TrimSuffix(strings.TrimSuffix(host, ".svc.cluster.local"), ".svc")
	name = strings.TrimSuffix(name, "."+k.ns)
	if strings.Contains(name, ".") {
		return arg, nil // not a name of this namespace's Services
	}
	svc, err := k.cs.CoreV1().Services(k.ns).Get(ctx, name, metav1.GetOptions{})
	if err == nil && svc.Spec.ClusterIP == corev1.ClusterIPNone {
		k.serviceAddr(name)
	}
	if apierrors.IsNotFound(err) {
		return "", errNotYet{fmt.Sprintf("%s does not resolve (no Service %s yet)", host, name)}
	}
	if err != nil {
		return "", err
	}
	pods, err := k.cs.CoreV1().Pods(k.ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
	if err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		if svc.Spec.PublishNotReadyAddresses || isReady(&p) {
			return prefix + net.JoinHostPort(p.Status.PodIP, port), nil
		}
	}
	if addr, ok := k.services[name]; ok && svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return prefix + net.JoinHostPort(addr, port), nil // the address its pod will have: dialing it is refused until then
	}
	return "", errNotYet{fmt.Sprintf("%s does not resolve yet (Service %s selects no running pod)", host, name)}
}

// podIP gives a pod its loopback address. A pod a headless Service selects
// gets the address kept for that Service (the same for each pod that takes
// its place), so a name resolved before the pod ran leads to it once it
// does, as DNS would after a lookup that failed and was made again; any
// other pod the next 127.0.1.N.
func (k *kubelet) podIP(ctx context.Context, pod *corev1.Pod) (string, error) {
	svcs, err := k.cs.CoreV1().Services(k.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, svc := range svcs.Items {
		if svc.Spec.ClusterIP == corev1.ClusterIPNone && len(svc.Spec.Selector) > 0 &&
			labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			return k.serviceAddr(svc.Name), nil
		}
	}
	ip := fmt.Sprintf("127.0.1.%d", k.nextIP)
	k.nextIP++
	return ip, nil
}

func (k *kubelet) serviceAddr(name string) string {
	if a, ok := k.services[name]; ok {
		return a
	}
	a := fmt.Sprintf("127.0.2.%d", len(k.services)+10)
	k.services[name] = a
	return a
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
