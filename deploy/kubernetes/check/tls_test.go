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
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

// buildTLS renders deploy/kubernetes-tls with stand-ins for the files git
// ignores (their content is not checked here; the end-to-end run uses real
// ones).
func buildTLS(t *testing.T) *Set {
	t.Helper()
	objs, err := BuildOverlay(filepath.Join(dir, ".."), "kubernetes-tls", map[string][]byte{"kubernetes/token": testToken,
		"kubernetes-tls/ca.crt": []byte("CA"), "kubernetes-tls/tls.crt": []byte("CERT"), "kubernetes-tls/tls.key": []byte("KEY")})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Classify(objs)
	if err != nil {
		t.Fatal(err)
	}
	if s.TLS == nil {
		t.Fatalf("no Secret %s", TLSName)
	}
	return s
}

func TestTLSOverlayKustomizationIsStrict(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(dir, "..", "kubernetes-tls", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k types.Kustomization
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("kubernetes-tls/kustomization.yaml: %v", err)
	}
	gi, err := os.ReadFile(filepath.Join(dir, "..", "kubernetes-tls", ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"/ca.crt", "/tls.crt", "/tls.key"} {
		if !slices.Contains(strings.Fields(string(gi)), f) {
			t.Errorf("deploy/kubernetes-tls/.gitignore does not list %s", f)
		}
	}
}

// The coordinator serves with the certificate and key of Secret
// headroom-tls; agents trust its ca.crt and never get the key.
func TestTLSOverlayMountsWhatTheFlagsName(t *testing.T) {
	s := buildTLS(t)
	if s.TLS.Namespace != s.Namespace.Name {
		t.Errorf("Secret %s in namespace %q, want %q", TLSName, s.TLS.Namespace, s.Namespace.Name)
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
		if _, plain := Flag(pod.Containers[0].Args, "plaintext"); plain {
			t.Errorf("Job %s: --plaintext is still there with TLS", c.job.Name)
		}
		path, ok := Flag(pod.Containers[0].Args, c.flag)
		if !ok {
			t.Errorf("Job %s: no --%s", c.job.Name, c.flag)
			continue
		}
		kind, name, key := mounted(pod, pod.Containers[0], path)
		if kind != "Secret" || name != TLSName || key != c.key {
			t.Errorf("Job %s: --%s=%s is %s %q key %q, want Secret %s key %s", c.job.Name, c.flag, path, kind, name, key, TLSName, c.key)
		}
		for _, v := range pod.Volumes {
			if v.Secret == nil || v.Secret.SecretName != TLSName {
				continue
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
	// The base's agreements still hold in the overlay's output.
	n, _ := Flag(s.Coordinator.Spec.Template.Spec.Containers[0].Args, "agents")
	if want := show(s.Agents.Spec.Completions); n != want {
		t.Errorf("coordinator --agents=%s, agent completions %s", n, want)
	}
}

// scripts/kube-certs.sh makes what the overlay needs: a CA, and a
// certificate of the coordinator's that verifies against it for every name
// an agent may dial, with its key; the overlay builds with them; and a
// second run keeps the CA and refuses to overwrite without FORCE=1.
func TestCertScriptMakesWhatTheOverlayNeeds(t *testing.T) {
	out, caDir := t.TempDir(), filepath.Join(t.TempDir(), "ca")
	script := func(env ...string) (string, error) {
		cmd := exec.Command("bash", filepath.Join(dir, "..", "..", "scripts", "kube-certs.sh"), out)
		cmd.Env = append(os.Environ(), append([]string{"CA_DIR=" + caDir}, env...)...)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	if msg, err := script(); err != nil {
		t.Fatalf("kube-certs.sh: %v\n%s", err, msg)
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
	if _, err := BuildOverlay(filepath.Join(dir, ".."), "kubernetes-tls", map[string][]byte{"kubernetes/token": testToken,
		"kubernetes-tls/ca.crt": ca, "kubernetes-tls/tls.crt": cert, "kubernetes-tls/tls.key": key}); err != nil {
		t.Errorf("the overlay with the files made: %v", err)
	}
	if msg, err := script(); err == nil || !strings.Contains(msg, "FORCE=1") {
		t.Errorf("a second run over the files: %v %q, want a refusal naming FORCE=1", err, msg)
	}
	if msg, err := script("FORCE=1"); err != nil || strings.Contains(msg, "a new CA") || !bytes.Equal(read("ca.crt"), ca) {
		t.Errorf("FORCE=1: %v %q: want a new certificate from the same CA", err, msg)
	}
}
