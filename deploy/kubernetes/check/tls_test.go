package check

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

// buildPlaintext renders deploy/kubernetes-plaintext, the base without
// TLS, with the token the base reads.
func buildPlaintext(t *testing.T) *Set {
	t.Helper()
	objs, err := BuildOverlay(filepath.Join(dir, ".."), PlaintextOverlay, map[string][]byte{"kubernetes/token": testToken})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Classify(objs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tlsVolumes are the pod's volumes of Secret headroom-tls.
func tlsVolumes(pod corev1.PodSpec) []corev1.Volume {
	var vs []corev1.Volume
	for _, v := range pod.Volumes {
		if v.Secret != nil && v.Secret.SecretName == TLSName {
			vs = append(vs, v)
		}
	}
	return vs
}

// The base runs TLS: the coordinator serves with the certificate and key
// of Secret headroom-tls, agents trust its ca.crt and never get the key,
// nobody says --plaintext; and the Secret is not optional, so a cluster
// without it leaves the pods waiting on the volume, not running in clear.
func TestBaseRunsTLS(t *testing.T) {
	s := build(t)
	for _, j := range []*batchv1.Job{s.Coordinator, s.Agents} {
		if slices.ContainsFunc(j.Spec.Template.Spec.Containers[0].Args, func(a string) bool { return a == "--plaintext" || strings.HasPrefix(a, "--plaintext=") }) {
			t.Errorf("Job %s: --plaintext in the base (deploy/kubernetes-plaintext is where it belongs)", j.Name)
		}
	}
	for _, c := range []struct {
		job        *batchv1.Job
		flag, key  string
		forbidKeys []string
	}{
		{s.Coordinator, "tls-cert", "tls.crt", nil},
		{s.Coordinator, "tls-key", "tls.key", nil},
		{s.Agents, "tls-ca", "ca.crt", []string{"tls.key"}},
	} {
		pod := c.job.Spec.Template.Spec
		path, ok := Flag(pod.Containers[0].Args, c.flag)
		if !ok {
			t.Errorf("Job %s: no --%s", c.job.Name, c.flag)
			continue
		}
		kind, name, key := mounted(pod, pod.Containers[0], path)
		if kind != "Secret" || name != TLSName || key != c.key {
			t.Errorf("Job %s: --%s=%s is %s %q key %q, want Secret %s key %s", c.job.Name, c.flag, path, kind, name, key, TLSName, c.key)
		}
		for _, v := range tlsVolumes(pod) {
			if v.Secret.Optional != nil && *v.Secret.Optional {
				t.Errorf("Job %s volume %s: optional: without the Secret the pod would start, and headroom fail on a missing file, rather than wait", c.job.Name, v.Name)
			}
			if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o007 != 0 {
				t.Errorf("Job %s volume %s: readable by others (defaultMode)", c.job.Name, v.Name)
			}
			if len(v.Secret.Items) == 0 && len(c.forbidKeys) > 0 {
				t.Errorf("Job %s volume %s mounts every key of %s, the coordinator's private key among them", c.job.Name, v.Name, TLSName)
			}
			for _, it := range v.Secret.Items {
				if slices.Contains(c.forbidKeys, it.Key) {
					t.Errorf("Job %s mounts %s key %s", c.job.Name, TLSName, it.Key)
				}
			}
		}
	}
	if s.TLS != nil {
		t.Errorf("the kustomization makes Secret %s: the coordinator's key would pass through it", TLSName)
	}
}

// deploy/kubernetes-plaintext says what it is, takes out exactly the
// base's TLS flags and volume, and puts --plaintext in; everything else is
// the base's.
func TestPlaintextOverlay(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(dir, "..", PlaintextOverlay, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k types.Kustomization
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("%s/kustomization.yaml: %v", PlaintextOverlay, err)
	}
	if !strings.Contains(strings.ToLower(string(b)), "trusted network only") {
		t.Errorf("%s/kustomization.yaml does not say it is for a trusted network only", PlaintextOverlay)
	}
	base, plain := build(t), buildPlaintext(t)
	isTLS := func(a string) bool { return strings.HasPrefix(a, "--tls-") }
	for _, j := range [][2]*batchv1.Job{{base.Coordinator, plain.Coordinator}, {base.Agents, plain.Agents}} {
		bp, pp := j[0].Spec.Template.Spec, j[1].Spec.Template.Spec
		args := pp.Containers[0].Args
		if !slices.Contains(args, "--plaintext") {
			t.Errorf("%s Job %s: no --plaintext (headroom refuses to listen or dial off loopback in clear without it)", PlaintextOverlay, j[1].Name)
		}
		if slices.ContainsFunc(args, isTLS) || len(tlsVolumes(pp)) > 0 {
			t.Errorf("%s Job %s: still has TLS flags or the %s volume: %v", PlaintextOverlay, j[1].Name, TLSName, args)
		}
		want := slices.DeleteFunc(slices.Clone(bp.Containers[0].Args), isTLS)
		if got := slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "--plaintext" }); !slices.Equal(got, want) {
			t.Errorf("%s Job %s: arguments %v, want the base's less TLS (%v) and --plaintext", PlaintextOverlay, j[1].Name, got, want)
		}
		if len(pp.Volumes) != len(bp.Volumes)-1 || len(pp.Containers[0].VolumeMounts) != len(bp.Containers[0].VolumeMounts)-1 {
			t.Errorf("%s Job %s: %d volumes and %d mounts, want the base's %d and %d less the tls one", PlaintextOverlay, j[1].Name,
				len(pp.Volumes), len(pp.Containers[0].VolumeMounts), len(bp.Volumes), len(bp.Containers[0].VolumeMounts))
		}
	}
	if len(plain.Policies) != len(base.Policies) {
		t.Errorf("%s: %d NetworkPolicies, the base %d", PlaintextOverlay, len(plain.Policies), len(base.Policies))
	}
}

// scripts/kube-certs.sh makes what the base mounts: a CA, and a
// certificate of the coordinator's that verifies against it for every name
// an agent may dial, with its key, as files named as the keys the Jobs
// mount from Secret headroom-tls; it prints the kubectl command that makes
// the Secret of them; git ignores its default directory; and a second run
// keeps the CA and refuses to overwrite without FORCE=1.
func TestCertScriptMakesWhatTheBaseMounts(t *testing.T) {
	out, caDir := t.TempDir(), filepath.Join(t.TempDir(), "ca")
	script := func(env ...string) (string, error) {
		cmd := exec.Command("bash", filepath.Join(dir, "..", "..", "scripts", "kube-certs.sh"), out)
		cmd.Env = append(os.Environ(), append([]string{"CA_DIR=" + caDir}, env...)...)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	msg, err := script()
	if err != nil {
		t.Fatalf("kube-certs.sh: %v\n%s", err, msg)
	}
	if want := "kubectl -n headroom create secret generic " + TLSName + " --from-file=ca.crt=" + out + "/ca.crt --from-file=tls.crt=" + out + "/tls.crt --from-file=tls.key=" + out + "/tls.key"; !strings.Contains(msg, want) {
		t.Errorf("kube-certs.sh does not say how to make the Secret (%q):\n%s", want, msg)
	}
	s := build(t)
	for _, j := range []*batchv1.Job{s.Coordinator, s.Agents} {
		for _, v := range tlsVolumes(j.Spec.Template.Spec) {
			for _, it := range v.Secret.Items {
				if _, err := os.Stat(filepath.Join(out, it.Key)); err != nil {
					t.Errorf("Job %s mounts key %s of %s, which kube-certs.sh does not make: %v", j.Name, it.Key, TLSName, err)
				}
			}
		}
	}
	gi, err := os.ReadFile(filepath.Join(dir, ".gitignore"))
	if err != nil || !slices.Contains(strings.Fields(string(gi)), "/tls/") {
		t.Errorf("deploy/kubernetes/.gitignore must list /tls/, kube-certs.sh's default directory (err %v)", err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ca, cert, key := read("ca.crt"), read("tls.crt"), read("tls.key")
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		t.Fatalf("tls.crt and tls.key: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("ca.crt holds no certificate")
	}
	for _, name := range []string{ServiceName, ServiceName + ".headroom", ServiceName + ".headroom.svc", ServiceName + ".headroom.svc.cluster.local"} {
		if _, err := pair.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool}); err != nil {
			t.Errorf("an agent dialing %s: %v", name, err)
		}
	}
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{DNSName: "evil.example", Roots: pool}); err == nil {
		t.Error("the certificate verifies for a name that is not the coordinator's")
	}
	if fi, err := os.Stat(filepath.Join(out, "tls.key")); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("tls.key is readable by others (%v)", err)
	}
	if msg, err := script(); err == nil || !strings.Contains(msg, "FORCE=1") {
		t.Errorf("a second run over the files: %v %q, want a refusal naming FORCE=1", err, msg)
	}
	if msg, err := script("FORCE=1"); err != nil || strings.Contains(msg, "a new CA") || !bytes.Equal(read("ca.crt"), ca) {
		t.Errorf("FORCE=1: %v %q: want a new certificate from the same CA", err, msg)
	}
}
