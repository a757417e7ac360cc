package check

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

const dir = ".." // deploy/kubernetes

var testToken = []byte("0123456789abcdef0123456789abcdef")

// build is the kustomize output every check below reads: what `kubectl
// apply -k deploy/kubernetes` sends to the API server.
func build(t *testing.T) *Set {
	t.Helper()
	objs, err := Build(dir, testToken)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Classify(objs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func kustomization(t *testing.T) types.Kustomization {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k types.Kustomization
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	return k
}

// Every file the kustomization lists decodes strictly as it is written,
// before kustomize touches it.
func TestEveryManifestDecodesStrictly(t *testing.T) {
	k := kustomization(t)
	if len(k.Resources) == 0 {
		t.Fatal("kustomization.yaml lists no resources")
	}
	for _, r := range k.Resources {
		b, err := os.ReadFile(filepath.Join(dir, r))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := DecodeAll(b)
		if err != nil {
			t.Errorf("%s: %v", r, err)
			continue
		}
		if len(objs) == 0 {
			t.Errorf("%s: no objects", r)
		}
	}
}

// A broken manifest fails: each mutation of agent-job.yaml is one mistake a
// hand could make, and each must be an error, not a dropped line.
func TestBrokenManifestsFail(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(dir, "agent-job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	good := string(b)
	if _, err := DecodeAll(b); err != nil {
		t.Fatalf("agent-job.yaml as committed: %v", err)
	}
	for _, c := range []struct{ name, old, new, want string }{
		{"misspelled field", "completionMode: Indexed", "completionMod: Indexed", `unknown field "spec.completionMod"`},
		{"field at the wrong level", "  backoffLimit: 6", "  backoffLimit: 6\n  restartPolicy: Never", `unknown field "spec.restartPolicy"`},
		{"unknown field in a container", "        image: headroom", "        image: headroom\n        imagePullPolicyy: Always", `unknown field "spec.template.spec.containers[0].imagePullPolicyy"`},
		{"duplicate field", "  parallelism: 2", "  parallelism: 2\n  parallelism: 3", `key "parallelism" already set`},
		{"wrong type", "backoffLimit: 6", "backoffLimit: six", "backoffLimit"},
		{"unknown version", "apiVersion: batch/v1", "apiVersion: batch/v2", "no kind"},
		{"another kind's shape", "kind: Job", "kind: CronJob", `unknown field "spec.completionMode"`},
		{"kind not in the group", "kind: Job", "kind: Deployment", `no kind "Deployment" is registered`},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := strings.Replace(good, c.old, c.new, 1)
			if bad == good {
				t.Fatalf("%q is not in agent-job.yaml", c.old)
			}
			_, err := DecodeAll([]byte(bad))
			if err == nil {
				t.Fatal("decoded without an error")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
		})
	}
}

// kubectl apply -k works: kustomize builds the directory (files under it
// only, as kubectl's default load restrictions want) and its output decodes
// strictly into exactly the expected objects, all in one namespace.
func TestKustomizationBuilds(t *testing.T) {
	s := build(t)
	for _, o := range s.Objects()[1:] {
		if ns := o.(interface{ GetNamespace() string }).GetNamespace(); ns != s.Namespace.Name {
			t.Errorf("%T %s in namespace %q, want %q", o, nameOf(o), ns, s.Namespace.Name)
		}
	}
	if got := string(s.Token.Data["token"]); got != string(testToken) {
		t.Errorf("Secret %s key token = %q, want the token file's content", TokenName, got)
	}
	for _, j := range []*batchv1.Job{s.Coordinator, s.Agents} {
		if img := j.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, "headroom:") {
			t.Errorf("Job %s: image %q, want the kustomization's images entry applied (headroom:TAG)", j.Name, img)
		}
	}
}

// The token is never committed: the Secret comes from a file git ignores.
func TestTokenIsNotCommitted(t *testing.T) {
	k := kustomization(t)
	if len(k.SecretGenerator) != 1 || !slices.Equal(k.SecretGenerator[0].FileSources, []string{"token"}) {
		t.Fatalf("want one secretGenerator from the file token, got %+v", k.SecretGenerator)
	}
	gi, err := os.ReadFile(filepath.Join(dir, ".gitignore"))
	if err != nil || !slices.Contains(strings.Fields(string(gi)), "/token") {
		t.Errorf("deploy/kubernetes/.gitignore must list /token (err %v)", err)
	}
}

// The scenario in the ConfigMap is examples/chat.star, byte for byte:
// kustomize reads files under its directory only, so it keeps a copy.
func TestScenarioIsTheExample(t *testing.T) {
	s := build(t)
	want, err := os.ReadFile(filepath.Join(dir, "..", "..", "examples", "chat.star"))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Scenario.Data["chat.star"]; got != string(want) {
		t.Errorf("ConfigMap %s key chat.star differs from examples/chat.star: cp examples/chat.star deploy/kubernetes/scenario/", ScenarioName)
	}
}

func TestAgentsAreAnIndexedJob(t *testing.T) {
	j := build(t).Agents.Spec
	if j.CompletionMode == nil || *j.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("completionMode %v, want Indexed", j.CompletionMode)
	}
	if j.Parallelism == nil || j.Completions == nil || *j.Parallelism != *j.Completions || *j.Completions < 1 {
		t.Errorf("parallelism %s, completions %s: want equal, at least 1 (every agent at once)", show(j.Parallelism), show(j.Completions))
	}
	// A deleted or failed pod is made again: the Job must allow retries, and
	// (with restartPolicy Never) start the new pod only once the old one has
	// ended, so two agents of one name never run at once.
	if j.BackoffLimit == nil || *j.BackoffLimit < 1 {
		t.Errorf("backoffLimit %v: a deleted agent pod would fail the Job instead of being made again", j.BackoffLimit)
	}
	if p := j.Template.Spec.RestartPolicy; p != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %s, want Never (podFailurePolicy needs it)", p)
	}
	if j.PodReplacementPolicy == nil || *j.PodReplacementPolicy != batchv1.Failed {
		t.Errorf("podReplacementPolicy %v, want Failed", j.PodReplacementPolicy)
	}
	// The agent's name is its index (the same in a re-created pod), through
	// the downward API, not its pod name (new in a re-created pod).
	c := j.Template.Spec.Containers[0]
	name, _ := Flag(c.Args, "name")
	ref, ok := strings.CutPrefix(name, "agent-$(")
	ref, _ = strings.CutSuffix(ref, ")")
	if !ok || envField(c, ref) != "metadata.labels['batch.kubernetes.io/job-completion-index']" {
		t.Errorf("--name=%s: want agent-$(VAR), VAR from the pod's completion-index label", name)
	}
}

func show(p *int32) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(int(*p))
}

func envField(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			return e.ValueFrom.FieldRef.FieldPath
		}
	}
	return ""
}

func TestAgentCountAgrees(t *testing.T) {
	s := build(t)
	n, _ := Flag(s.Coordinator.Spec.Template.Spec.Containers[0].Args, "agents")
	if want := strconv.Itoa(int(*s.Agents.Spec.Completions)); n != want {
		t.Errorf("coordinator --agents=%s, agent Job completions %s: the run would wait for agents that never come, or leave some out", n, want)
	}
}

func TestServiceIsHeadlessAndSelectsTheCoordinator(t *testing.T) {
	s := build(t)
	svc := s.Service.Spec
	if svc.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("clusterIP %q, want None (headless)", svc.ClusterIP)
	}
	sel := labels.SelectorFromSet(svc.Selector)
	if len(svc.Selector) == 0 || !sel.Matches(labels.Set(s.Coordinator.Spec.Template.Labels)) {
		t.Errorf("selector %v does not match the coordinator pod's labels %v", svc.Selector, s.Coordinator.Spec.Template.Labels)
	}
	if sel.Matches(labels.Set(s.Agents.Spec.Template.Labels)) {
		t.Errorf("selector %v matches the agent pods too", svc.Selector)
	}
	listen, _ := Flag(s.Coordinator.Spec.Template.Spec.Containers[0].Args, "listen")
	host, port, err := net.SplitHostPort(listen)
	if err != nil || host != "0.0.0.0" {
		t.Fatalf("coordinator --listen=%s: want 0.0.0.0:PORT (reachable from other pods)", listen)
	}
	if len(svc.Ports) != 1 || strconv.Itoa(int(svc.Ports[0].Port)) != port {
		t.Fatalf("Service ports %+v, want one, %s (--listen's)", svc.Ports, port)
	}
	if tp := svc.Ports[0].TargetPort; containerPort(s.Coordinator.Spec.Template.Spec.Containers[0], tp.String()) != port && tp.String() != port {
		t.Errorf("Service targetPort %s is not the coordinator's --listen port %s", tp.String(), port)
	}
}

func containerPort(c corev1.Container, name string) string {
	for _, p := range c.Ports {
		if p.Name == name {
			return strconv.Itoa(int(p.ContainerPort))
		}
	}
	return ""
}

func TestAgentsDialTheService(t *testing.T) {
	s := build(t)
	coord, _ := Flag(s.Agents.Spec.Template.Spec.Containers[0].Args, "coordinator")
	host, port, err := net.SplitHostPort(coord)
	if err != nil {
		t.Fatalf("agents' --coordinator=%s: %v", coord, err)
	}
	ns := s.Namespace.Name
	names := []string{ServiceName, ServiceName + "." + ns, ServiceName + "." + ns + ".svc", ServiceName + "." + ns + ".svc.cluster.local"}
	if !slices.Contains(names, host) {
		t.Errorf("agents' --coordinator=%s: host is not the Service's DNS name (one of %v)", coord, names)
	}
	if strconv.Itoa(int(s.Service.Spec.Ports[0].Port)) != port {
		t.Errorf("agents' --coordinator=%s: port is not the Service's %d", coord, s.Service.Spec.Ports[0].Port)
	}
}

// mounted says which object and key the file at path comes from in pod's
// container c: "Secret", "ConfigMap" (or "" when no volume holds it).
func mounted(pod corev1.PodSpec, c corev1.Container, path string) (kind, name, key string) {
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok || m.SubPath != "" {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name != m.Name {
				continue
			}
			if v.Secret != nil {
				return "Secret", v.Secret.SecretName, keyOf(v.Secret.Items, rel)
			}
			if v.ConfigMap != nil {
				return "ConfigMap", v.ConfigMap.Name, keyOf(v.ConfigMap.Items, rel)
			}
			if v.Projected != nil {
				for _, src := range v.Projected.Sources {
					if src.Secret != nil {
						if k := keyOf(src.Secret.Items, rel); k != "" && (len(src.Secret.Items) > 0) {
							return "Secret", src.Secret.Name, k
						}
					}
					if src.ConfigMap != nil {
						if k := keyOf(src.ConfigMap.Items, rel); k != "" && (len(src.ConfigMap.Items) > 0) {
							return "ConfigMap", src.ConfigMap.Name, k
						}
					}
				}
			}
		}
	}
	return "", "", ""
}

// keyOf is the key whose file is rel: its item's path, or the key itself
// when the volume lists no items.
func keyOf(items []corev1.KeyToPath, rel string) string {
	if len(items) == 0 {
		return rel
	}
	for _, it := range items {
		if it.Path == rel {
			return it.Key
		}
	}
	return ""
}

func TestTokenIsMountedWhereTokenFilePoints(t *testing.T) {
	s := build(t)
	for _, j := range []*batchv1.Job{s.Coordinator, s.Agents} {
		pod := j.Spec.Template.Spec
		path, ok := Flag(pod.Containers[0].Args, "token-file")
		if !ok {
			t.Errorf("Job %s: no --token-file", j.Name)
			continue
		}
		kind, name, key := mounted(pod, pod.Containers[0], path)
		if kind != "Secret" || name != TokenName || key != "token" {
			t.Errorf("Job %s: --token-file=%s is %s %q key %q, want Secret %s key token", j.Name, path, kind, name, key, TokenName)
		}
	}
}

func TestScenarioIsMountedWhereTheCoordinatorReadsIt(t *testing.T) {
	s := build(t)
	pod := s.Coordinator.Spec.Template.Spec
	args := pod.Containers[0].Args
	if len(args) < 2 || args[0] != "run" {
		t.Fatalf("coordinator args %v: want run SCENARIO ...", args)
	}
	kind, name, key := mounted(pod, pod.Containers[0], args[1])
	if kind != "ConfigMap" || name != ScenarioName || s.Scenario.Data[key] == "" {
		t.Errorf("scenario %s is %s %q key %q, want a key of ConfigMap %s", args[1], kind, name, key, ScenarioName)
	}
}

func TestScrapeAnnotationsMatchMetricsListen(t *testing.T) {
	tmpl := build(t).Agents.Spec.Template
	a := tmpl.Annotations
	if a["prometheus.io/scrape"] != "true" || a["prometheus.io/path"] != "/metrics" {
		t.Errorf("annotations %v: want prometheus.io/scrape \"true\" and prometheus.io/path /metrics", a)
	}
	c := tmpl.Spec.Containers[0]
	listen, _ := Flag(c.Args, "metrics-listen")
	host, port, err := net.SplitHostPort(listen)
	if err != nil || host != "0.0.0.0" {
		t.Fatalf("agents' --metrics-listen=%s: want 0.0.0.0:PORT (scraped from outside the pod)", listen)
	}
	if a["prometheus.io/port"] != port || containerPort(c, "metrics") != port {
		t.Errorf("prometheus.io/port %q, containerPort metrics %q, --metrics-listen port %s: want all three equal", a["prometheus.io/port"], containerPort(c, "metrics"), port)
	}
}

// Pods run as nobody on a read-only root, with no API token, with memory
// requests and limits, and agents without a CPU limit.
func TestPodsAreLockedDownAndSized(t *testing.T) {
	s := build(t)
	for _, j := range []*batchv1.Job{s.Coordinator, s.Agents} {
		pod := j.Spec.Template.Spec
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			t.Errorf("Job %s: automountServiceAccountToken not false (headroom needs no API access)", j.Name)
		}
		if psc := pod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
			t.Errorf("Job %s: pod not runAsNonRoot with a non-zero runAsUser", j.Name)
		}
		for _, c := range pod.Containers {
			sc := c.SecurityContext
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
				sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("Job %s container %s: want readOnlyRootFilesystem, no privilege escalation, capabilities drop ALL", j.Name, c.Name)
			}
			r := c.Resources
			if r.Requests.Cpu().IsZero() || r.Requests.Memory().IsZero() || r.Limits.Memory().Cmp(*r.Requests.Memory()) < 0 {
				t.Errorf("Job %s container %s: want CPU and memory requests, a memory limit at least the request", j.Name, c.Name)
			}
			if j == s.Agents && !r.Limits.Cpu().IsZero() {
				t.Errorf("Job %s: a CPU limit throttles the generator, whose stalls then read as the target's latency", j.Name)
			}
		}
		for _, v := range pod.Volumes {
			if v.Secret != nil && (v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o007 != 0) ||
				v.Projected != nil && (v.Projected.DefaultMode == nil || *v.Projected.DefaultMode&0o007 != 0) {
				t.Errorf("Job %s volume %s: the token would be readable by others (defaultMode)", j.Name, v.Name)
			}
		}
	}
}

// The Dockerfile builds the image the manifests name, static and non-root.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(dir, "..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CGO_ENABLED=0", "./cmd/headroom", "FROM gcr.io/distroless/static", "USER 65532:65532"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("Dockerfile does not say %q", want)
		}
	}
}

// The namespace enforces the restricted Pod Security profile, and each
// pod's termination grace covers what SIGTERM makes it do before it exits.
// (Who may reach whom: policy_test.go.)
func TestPodSecurityAndGrace(t *testing.T) {
	s := build(t)
	if got := s.Namespace.Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
		t.Errorf("namespace Pod Security enforce %q, want restricted", got)
	}
	if g := *s.Coordinator.Spec.Template.Spec.TerminationGracePeriodSeconds; g < 5+15+60 {
		t.Errorf("the coordinator's termination grace is %d s: under --grace (5 s) + the agents' last figures (15 s) + a minute to write", g)
	}
	if g := *s.Agents.Spec.Template.Spec.TerminationGracePeriodSeconds; g < 5+10+15 {
		t.Errorf("the agents' termination grace is %d s: under --grace (5 s) + the wait for the last acknowledgement (10 s) + margin", g)
	}
}

// The coordinator writes its result to the claim, which outlives its pod,
// and the reader pod mounts that claim read-only at the same path, as the
// coordinator's user, locked down as the run's pods are: kubectl cp then
// finds /results/run there.
func TestResultsOutliveTheCoordinator(t *testing.T) {
	s := build(t)
	if got := s.Results.Spec.Resources.Requests.Storage(); got.IsZero() || len(s.Results.Spec.AccessModes) == 0 {
		t.Errorf("claim %s: storage %v, access modes %v: want a size and a mode", ResultsName, got, s.Results.Spec.AccessModes)
	}
	coord := s.Coordinator.Spec.Template.Spec
	out, _ := Flag(coord.Containers[0].Args, "out")
	mount := claimMount(t, coord, ResultsName, out)
	if mount == "" {
		t.Fatalf("the coordinator's --out=%s is not on a volume of the claim %s", out, ResultsName)
	}
	pod, err := Reader(dir)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Namespace != s.Namespace.Name {
		t.Errorf("%s: namespace %q, want %q (it is applied with kubectl apply -f, outside the kustomization)", ReaderFile, pod.Namespace, s.Namespace.Name)
	}
	if got := claimMount(t, pod.Spec, ResultsName, out); got != mount {
		t.Errorf("%s mounts the claim at %q, the coordinator at %q: kubectl cp of %s would find nothing", ReaderFile, got, mount, out)
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && !v.PersistentVolumeClaim.ReadOnly {
			t.Errorf("%s: the claim is mounted writable; a reader needs it read-only", ReaderFile)
		}
	}
	c, psc := pod.Spec.Containers[0], pod.Spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil ||
		*psc.RunAsUser != *coord.SecurityContext.RunAsUser || psc.SeccompProfile == nil {
		t.Errorf("%s: want runAsNonRoot as the coordinator's user (%d), a seccomp profile", ReaderFile, *coord.SecurityContext.RunAsUser)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("%s: want readOnlyRootFilesystem, no privilege escalation, capabilities drop ALL (the namespace enforces restricted)", ReaderFile)
	}
	if pod.Spec.ActiveDeadlineSeconds == nil || pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Errorf("%s: want an activeDeadlineSeconds and no service account token", ReaderFile)
	}
}

// claimMount is the mount path in pod's container of the volume of claim
// that holds path ("" when none does).
func claimMount(t *testing.T, pod corev1.PodSpec, claim, path string) string {
	t.Helper()
	for _, v := range pod.Volumes {
		if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != claim {
			continue
		}
		for _, m := range pod.Containers[0].VolumeMounts {
			if m.Name == v.Name && (path == m.MountPath || strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")) {
				return m.MountPath
			}
		}
	}
	return ""
}

// An agent that leaves when told (SIGTERM, exit 3: cli.ExitLeft) is made
// again without counting a failure; bad flags and bugs fail the Job.
func TestAgentsLeftAreMadeAgain(t *testing.T) {
	p := build(t).Agents.Spec.PodFailurePolicy
	action := map[int32]batchv1.PodFailurePolicyAction{}
	for _, r := range p.Rules {
		if r.OnExitCodes != nil && r.OnExitCodes.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn {
			for _, v := range r.OnExitCodes.Values {
				action[v] = r.Action
			}
		}
	}
	want := map[int32]batchv1.PodFailurePolicyAction{2: batchv1.PodFailurePolicyActionFailJob, 3: batchv1.PodFailurePolicyActionIgnore, 5: batchv1.PodFailurePolicyActionFailJob}
	for code, a := range want {
		if action[code] != a {
			t.Errorf("podFailurePolicy for exit %d: %q, want %q", code, action[code], a)
		}
	}
}
