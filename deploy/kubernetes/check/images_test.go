package check

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// ImageName is the name the Jobs give headroom's image, which the
// kustomization's images: entry rewrites (and pins by digest:
// `kustomize edit set image headroom=REGISTRY/headroom@sha256:...`).
const ImageName = "headroom"

// pinned is an image named by digest: a tag may be moved to another image,
// a digest cannot.
var pinned = regexp.MustCompile(`^[^@\s]+@sha256:[0-9a-f]{64}$`)

// Every container of every manifest, as written, names its image by digest
// or is headroom's, which the kustomization's images: entry rewrites: a
// tag alone (busybox:1.37.0) is refused.
func TestImagesAreByDigestOrPinnedByKustomize(t *testing.T) {
	k := kustomization(t)
	hasEntry := false
	for _, im := range k.Images {
		hasEntry = hasEntry || im.Name == ImageName
	}
	if !hasEntry {
		t.Errorf("kustomization.yaml: no images: entry named %q, so kustomize edit set image cannot pin it", ImageName)
	}
	files := append(slices.Clone(k.Resources), ReaderFile)
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := DecodeAll(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, o := range objs {
			var pod *corev1.PodSpec
			switch o := o.(type) {
			case *batchv1.Job:
				pod = &o.Spec.Template.Spec
			case *corev1.Pod:
				pod = &o.Spec
			default:
				continue
			}
			for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
				inKustomization := f != ReaderFile // the reader is applied alone, with kubectl apply -f
				if !pinned.MatchString(c.Image) && !(inKustomization && c.Image == ImageName) {
					t.Errorf("%s container %s: image %q: want NAME:TAG@sha256:DIGEST, or %q (pinned by kustomization.yaml's images:)", f, c.Name, c.Image, ImageName)
				}
			}
		}
	}
}

// kustomize's images: entry pins both Jobs' image by digest, as `kustomize
// edit set image headroom=REGISTRY/headroom@sha256:...` writes it.
func TestKustomizePinsHeadroomByDigest(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k map[string]any
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	k["images"] = []any{map[string]any{"name": ImageName, "newName": "registry.example/headroom", "digest": digest}}
	edited, err := yaml.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Base(abs)
	objs, err := BuildOverlay(filepath.Dir(abs), base, map[string][]byte{base + "/token": testToken, base + "/kustomization.yaml": edited})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Classify(objs)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []*batchv1.Job{s.Coordinator, s.Agents} {
		if got, want := j.Spec.Template.Spec.Containers[0].Image, "registry.example/headroom@"+digest; got != want {
			t.Errorf("Job %s: image %q, want %q", j.Name, got, want)
		}
	}
}
