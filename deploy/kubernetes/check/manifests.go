// Package check reads deploy/kubernetes as `kubectl apply -k` does and
// decodes every object strictly into the Kubernetes API types (k8s.io/api
// v0.33.0): an unknown field, a duplicated one or a kind the manifests are
// not meant to hold is an error, not a silently dropped line. The tests here
// and the end-to-end harness (deploy/kubernetes/e2e) both read the manifests
// through it.
package check

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Set is one run's objects, by role.
type Set struct {
	Namespace   *corev1.Namespace
	Service     *corev1.Service               // headless; agents dial it
	Coordinator *batchv1.Job                  // headroom run --agents N
	Agents      *batchv1.Job                  // Indexed, N pods of headroom agent
	Scenario    *corev1.ConfigMap             // the scenario's source
	Token       *corev1.Secret                // the shared token, key "token"
	Results     *corev1.PersistentVolumeClaim // where the coordinator writes its result, outliving the pod
	// Policies are the NetworkPolicies, in PolicyNames' order: every pod
	// shut in, then what the coordinator and the agents may do.
	Policies []*networkingv1.NetworkPolicy
	// TLS is the Secret headroom-tls (ca.crt, tls.crt, tls.key) the base's
	// pods mount. No kustomization makes it: the user does, from
	// scripts/kube-certs.sh's files, so Classify leaves it nil and the
	// end-to-end harness sets it.
	TLS *corev1.Secret
}

// Objects returns the set in the order to create them: the namespace, then
// what the pods mount, then the Service, the policies and the Jobs.
func (s *Set) Objects() []runtime.Object {
	objs := []runtime.Object{s.Namespace, s.Token}
	if s.TLS != nil {
		objs = append(objs, s.TLS)
	}
	objs = append(objs, s.Scenario, s.Results, s.Service)
	for _, p := range s.Policies {
		objs = append(objs, p)
	}
	return append(objs, s.Coordinator, s.Agents)
}

// Names of the objects a Set is made of.
const (
	ServiceName     = "headroom-coordinator"
	CoordinatorName = "headroom-coordinator"
	AgentsName      = "headroom-agent"
	ScenarioName    = "headroom-scenario"
	TokenName       = "headroom-token"
	TLSName         = "headroom-tls"     // made by the user, not by kustomize
	ResultsName     = "headroom-results" // the claim, and the reader pod that mounts it
	// ReaderFile is the pod that mounts the results claim for kubectl cp,
	// applied on its own once the coordinator's Job has ended.
	ReaderFile = "results-reader.yaml"
	// PlaintextOverlay is the kustomization beside the base that runs it
	// without TLS, for a trusted network only.
	PlaintextOverlay = "kubernetes-plaintext"
)

// PolicyNames are the NetworkPolicies of a Set: the namespace's default
// deny, then the coordinator's and the agents' allowances.
var PolicyNames = [...]string{"headroom-default-deny", "headroom-coordinator", "headroom-agent"}

// newStrictSerializer decodes YAML or JSON into the types of core/v1,
// batch/v1 and networking/v1, the only groups the manifests use, rejecting
// unknown and duplicate fields.
func newStrictSerializer() *json.Serializer {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, batchv1.AddToScheme, networkingv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err) // a registration of k8s.io/api's own types cannot fail
		}
	}
	return json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
}

// DecodeStrict decodes one YAML or JSON document into the Go type its
// apiVersion and kind name. Unknown fields, duplicated fields, a kind
// outside core/v1, batch/v1 and networking/v1, and a document that is not one object are
// errors.
func DecodeStrict(doc []byte) (runtime.Object, error) {
	obj, gvk, err := newStrictSerializer().Decode(doc, nil, nil)
	if err != nil {
		return nil, err // strict errors included: the object is not returned on them
	}
	if gvk == nil || gvk.Kind == "" {
		return nil, errors.New("no kind")
	}
	return obj, nil
}

// DecodeAll splits a YAML stream at its "---" lines and decodes each
// non-empty document strictly.
func DecodeAll(data []byte) ([]runtime.Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []runtime.Object
	for i := 1; ; i++ {
		doc, err := r.Read()
		if err == io.EOF {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, err := DecodeStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		objs = append(objs, obj)
	}
}

func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// Build renders dir with kustomize as `kubectl apply -k dir` does (kubectl
// 1.33 embeds kustomize v5.6.0, whose api module is pinned here), with token
// as the content of dir/token, the file .gitignore keeps out of the
// repository; and decodes each object it outputs strictly.
func Build(dir string, token []byte) ([]runtime.Object, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	base := filepath.Base(dir)
	return BuildOverlay(filepath.Dir(dir), base, map[string][]byte{filepath.Join(base, "token"): token})
}

// BuildOverlay renders the kustomization in dir/overlay ("kubernetes", the
// base, or "kubernetes-plaintext", which takes TLS out of it: kustomize
// wants an overlay outside its base), with files (paths relative to dir) in
// place of the files git ignores: kubernetes/token. dir is read into memory first (all but the Go modules under it), so
// nothing is written to it.
func BuildOverlay(dir, overlay string, files map[string][]byte) ([]runtime.Object, error) {
	mem := filesys.MakeFsInMemory()
	const root = "/manifests"
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			if rel != "." {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // check/, e2e/: code, not manifests
				}
			}
			return nil
		}
		if _, ok := files[rel]; ok {
			return nil // the caller's stands in for any local one
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return mem.WriteFile(filepath.Join(root, rel), b)
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	for rel, b := range files {
		if err := mem.WriteFile(filepath.Join(root, rel), b); err != nil {
			return nil, err
		}
	}
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, filepath.Join(root, overlay))
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	out, err := rm.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	objs, err := DecodeAll(out)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s, its output: %w", dir, err)
	}
	return objs, nil
}

// Classify sorts objects into a Set: exactly one of each role, by kind and
// name, and nothing else.
func Classify(objs []runtime.Object) (*Set, error) {
	s := &Set{}
	var policies [len(PolicyNames)]*networkingv1.NetworkPolicy
	for _, o := range objs {
		var dup bool
		switch o := o.(type) {
		case *corev1.Namespace:
			dup, s.Namespace = s.Namespace != nil, o
		case *corev1.Service:
			dup, s.Service = s.Service != nil || o.Name != ServiceName, o
		case *corev1.ConfigMap:
			dup, s.Scenario = s.Scenario != nil || o.Name != ScenarioName, o
		case *corev1.Secret:
			switch o.Name {
			case TokenName:
				dup, s.Token = s.Token != nil, o
			default: // headroom-tls too: its key must not pass through kustomize
				dup = true
			}
		case *networkingv1.NetworkPolicy:
			i := slices.Index(PolicyNames[:], o.Name)
			dup = i < 0 || policies[i] != nil
			if !dup {
				policies[i] = o
			}
		case *corev1.PersistentVolumeClaim:
			dup, s.Results = s.Results != nil || o.Name != ResultsName, o
		case *batchv1.Job:
			switch o.Name {
			case CoordinatorName:
				dup, s.Coordinator = s.Coordinator != nil, o
			case AgentsName:
				dup, s.Agents = s.Agents != nil, o
			default:
				dup = true
			}
		default:
			return nil, fmt.Errorf("unexpected object %T", o)
		}
		if dup {
			return nil, fmt.Errorf("unexpected or second %T %q", o, nameOf(o))
		}
	}
	for _, missing := range []struct {
		what string
		nil_ bool
	}{{"Namespace", s.Namespace == nil}, {"Service " + ServiceName, s.Service == nil},
		{"Job " + CoordinatorName, s.Coordinator == nil}, {"Job " + AgentsName, s.Agents == nil},
		{"ConfigMap " + ScenarioName, s.Scenario == nil}, {"Secret " + TokenName, s.Token == nil},
		{"PersistentVolumeClaim " + ResultsName, s.Results == nil}} {
		if missing.nil_ {
			return nil, fmt.Errorf("no %s", missing.what)
		}
	}
	for i, p := range policies {
		if p == nil {
			return nil, fmt.Errorf("no NetworkPolicy %s", PolicyNames[i])
		}
	}
	s.Policies = policies[:]
	return s, nil
}

// Reader decodes dir/results-reader.yaml strictly: the pod that mounts
// the results claim once the coordinator's Job has ended.
func Reader(dir string) (*corev1.Pod, error) {
	b, err := os.ReadFile(filepath.Join(dir, ReaderFile))
	if err != nil {
		return nil, err
	}
	objs, err := DecodeAll(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ReaderFile, err)
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("%s: %d objects, want one Pod", ReaderFile, len(objs))
	}
	pod, ok := objs[0].(*corev1.Pod)
	if !ok || pod.Name != ResultsName {
		return nil, fmt.Errorf("%s: a %T %q, want the Pod %s", ReaderFile, objs[0], nameOf(objs[0]), ResultsName)
	}
	return pod, nil
}

func nameOf(o runtime.Object) string {
	if m, ok := o.(interface{ GetName() string }); ok {
		return m.GetName()
	}
	return ""
}

// Flag returns the value of --name in args, written --name=value or
// --name value, and whether it is there.
func Flag(args []string, name string) (string, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// SetFlag returns args with --name's value replaced (or appended).
func SetFlag(args []string, name, value string) []string {
	out := append([]string(nil), args...)
	for i, a := range out {
		if strings.HasPrefix(a, "--"+name+"=") {
			out[i] = "--" + name + "=" + value
			return out
		}
		if a == "--"+name && i+1 < len(out) {
			out[i+1] = value
			return out
		}
	}
	return append(out, "--"+name+"="+value)
}
