package main

// What stands in for a container's view of its pod: its volumes as
// directories, its environment, and its arguments pointed at both.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// materialize writes the pod's volumes into dir/volumes/NAME and returns
// each mount's path in the container -> its directory (or file, for a
// subPath) here.
func (k *kubelet) materialize(ctx context.Context, pod *corev1.Pod, dir string) (map[string]string, error) {
	hostDirs := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		d := filepath.Join(dir, "volumes", v.Name)
		if v.PersistentVolumeClaim != nil {
			var err error
			if d, err = k.claimDir(ctx, v.PersistentVolumeClaim.ClaimName); err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
		hostDirs[v.Name] = d
		var err error
		switch {
		case v.EmptyDir != nil, v.PersistentVolumeClaim != nil:
		case v.Secret != nil:
			err = k.writeSecret(ctx, d, v.Secret.SecretName, v.Secret.Items, v.Secret.DefaultMode)
		case v.ConfigMap != nil:
			err = k.writeConfigMap(ctx, d, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.DefaultMode)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				switch {
				case src.Secret != nil:
					err = errors.Join(err, k.writeSecret(ctx, d, src.Secret.Name, src.Secret.Items, v.Projected.DefaultMode))
				case src.ConfigMap != nil:
					err = errors.Join(err, k.writeConfigMap(ctx, d, src.ConfigMap.Name, src.ConfigMap.Items, v.Projected.DefaultMode))
				default:
					err = errors.Join(err, fmt.Errorf("volume %s: projected source %+v not supported here", v.Name, src))
				}
			}
		default:
			err = fmt.Errorf("volume %s: only secret, configMap, projected, emptyDir and persistentVolumeClaim volumes are supported here", v.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
	}
	mounts := map[string]string{}
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		d, ok := hostDirs[m.Name]
		if !ok {
			return nil, fmt.Errorf("mount %s: no volume %s", m.MountPath, m.Name)
		}
		mounts[strings.TrimSuffix(m.MountPath, "/")] = filepath.Join(d, m.SubPath)
	}
	return mounts, nil
}

// claimDir is the directory that stands for a PersistentVolumeClaim's
// volume: one per claim (by UID: a claim deleted and made again is a new,
// empty volume), under the harness's claims/, outliving every pod that
// mounts it, as a provisioned volume does. The pod waits until the claim
// exists. (No provisioner or PersistentVolume: the harness is the storage.)
func (k *kubelet) claimDir(ctx context.Context, name string) (string, error) {
	pvc, err := k.cs.CoreV1().PersistentVolumeClaims(k.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", errNotYet{fmt.Sprintf("claim %s: %v", name, err)}
	}
	return filepath.Join(k.dir, "claims", name+"-"+string(pvc.UID)), nil
}

func (k *kubelet) writeSecret(ctx context.Context, dir, name string, items []corev1.KeyToPath, mode *int32) error {
	s, err := k.cs.CoreV1().Secrets(k.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err // the pod stays Pending until it exists, as with a kubelet
	}
	return writeKeys(dir, s.Data, items, mode)
}

func (k *kubelet) writeConfigMap(ctx context.Context, dir, name string, items []corev1.KeyToPath, mode *int32) error {
	cm, err := k.cs.CoreV1().ConfigMaps(k.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	data := map[string][]byte{}
	for key, v := range cm.Data {
		data[key] = []byte(v)
	}
	return writeKeys(dir, data, items, mode)
}

// writeKeys writes data's keys (or only items, at their paths) into dir.
// The mode is the volume's, with the owner's read bit kept: the process
// runs as this user, not as the pod's fsGroup.
func writeKeys(dir string, data map[string][]byte, items []corev1.KeyToPath, mode *int32) error {
	perm := os.FileMode(0o644)
	if mode != nil {
		perm = os.FileMode(*mode) | 0o400
	}
	paths := map[string]string{}
	if len(items) == 0 {
		for key := range data {
			paths[key] = key
		}
	}
	for _, it := range items {
		paths[it.Key] = it.Path
	}
	for key, p := range paths {
		v, ok := data[key]
		if !ok {
			return fmt.Errorf("no key %q", key)
		}
		f := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(f, v, perm); err != nil {
			return err
		}
	}
	return nil
}

// containerEnv resolves the container's env: values ($(VAR) expanded
// against the variables before them) and the downward API's fieldRefs.
func containerEnv(pod *corev1.Pod, c corev1.Container, ip string) (map[string]string, error) {
	env := map[string]string{}
	label := regexp.MustCompile(`^metadata\.(labels|annotations)\['([^']+)'\]$`)
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = expand(e.Value, env)
		case e.ValueFrom.FieldRef != nil:
			f := e.ValueFrom.FieldRef.FieldPath
			switch f {
			case "metadata.name":
				env[e.Name] = pod.Name
			case "metadata.namespace":
				env[e.Name] = pod.Namespace
			case "metadata.uid":
				env[e.Name] = string(pod.UID)
			case "status.podIP":
				env[e.Name] = ip
			case "spec.nodeName":
				env[e.Name] = pod.Spec.NodeName
			default:
				m := label.FindStringSubmatch(f)
				if m == nil {
					return nil, fmt.Errorf("env %s: fieldPath %s not supported here", e.Name, f)
				}
				if m[1] == "labels" {
					env[e.Name] = pod.Labels[m[2]]
				} else {
					env[e.Name] = pod.Annotations[m[2]]
				}
			}
		default:
			return nil, fmt.Errorf("env %s: only values and fieldRefs are supported here", e.Name)
		}
	}
	return env, nil
}

var varRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// expand replaces $(VAR) with VAR's value when defined, and $$ with $, as
// Kubernetes does in args and env values.
func expand(s string, env map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		if v, ok := env[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// rewritePaths maps an argument (or the value of --flag=VALUE) under a
// mount's path to the mount's directory here, the longest path first.
func rewritePaths(arg string, mounts map[string]string) string {
	prefix, val := "", arg
	if strings.HasPrefix(arg, "-") {
		if i := strings.IndexByte(arg, '='); i >= 0 {
			prefix, val = arg[:i+1], arg[i+1:]
		}
	}
	paths := make([]string, 0, len(mounts))
	for p := range mounts {
		paths = append(paths, p)
	}
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	for _, p := range paths {
		if val == p {
			return prefix + mounts[p]
		}
		if rest, ok := strings.CutPrefix(val, p+"/"); ok {
			return prefix + filepath.Join(mounts[p], rest)
		}
	}
	return arg
}
