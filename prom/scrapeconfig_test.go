package prom

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
	"go.yaml.in/yaml/v2"

	"github.com/headroom-dev/headroom/internal/testing/servertest"
)

// scrapeFile is the part of prometheus.yml the scrape configs write.
type scrapeFile struct {
	ScrapeConfigs []struct {
		JobName        string            `yaml:"job_name"`
		ScrapeInterval string            `yaml:"scrape_interval"`
		ScrapeTimeout  string            `yaml:"scrape_timeout"`
		MetricsPath    string            `yaml:"metrics_path"`
		HonorLabels    bool              `yaml:"honor_labels"`
		RelabelConfigs []*relabel.Config `yaml:"relabel_configs"`
		StaticConfigs  []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
		KubernetesSD []struct {
			Role       string `yaml:"role"`
			Namespaces struct {
				Names []string `yaml:"names"`
			} `yaml:"namespaces"`
		} `yaml:"kubernetes_sd_configs"`
	} `yaml:"scrape_configs"`
}

func decodeScrape(t *testing.T, text string) scrapeFile {
	t.Helper()
	var f scrapeFile
	if err := yaml.UnmarshalStrict([]byte(text), &f); err != nil {
		t.Fatalf("%v in:\n%s", err, text)
	}
	if len(f.ScrapeConfigs) != 1 {
		t.Fatalf("%d scrape configs, want 1", len(f.ScrapeConfigs))
	}
	for _, rc := range f.ScrapeConfigs[0].RelabelConfigs {
		if err := rc.Validate(model.UTF8Validation); err != nil {
			t.Fatalf("relabel config %+v: %v", rc, err)
		}
	}
	return f
}

func TestScrapeConfigs(t *testing.T) {
	one := decodeScrape(t, ScrapeConfig("127.0.0.1:9465")).ScrapeConfigs[0]
	agents := decodeScrape(t, AgentsScrapeConfig("10.0.0.1:9465", "[fd00::2]:9465")).ScrapeConfigs[0]
	k8s := decodeScrape(t, KubernetesScrapeConfig("headroom")).ScrapeConfigs[0]
	for _, c := range []struct {
		job  string
		got  string
		want string
	}{
		{"headroom", one.JobName, "headroom"},
		{"headroom-agents", agents.JobName, "headroom-agents"},
		{"kubernetes", k8s.JobName, "headroom-agents"},
		{"kubernetes role", k8s.KubernetesSD[0].Role, "pod"},
		{"kubernetes namespace", strings.Join(k8s.KubernetesSD[0].Namespaces.Names, ","), "headroom"},
		{"agents' targets", strings.Join(agents.StaticConfigs[0].Targets, ","), "10.0.0.1:9465,[fd00::2]:9465"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.job, c.got, c.want)
		}
	}
	for _, sc := range []string{one.ScrapeInterval, one.ScrapeTimeout, agents.ScrapeInterval, agents.ScrapeTimeout, k8s.ScrapeInterval} {
		if sc != "1s" { // the checks' short windows want two samples
			t.Errorf("scrape interval or timeout %q, want 1s", sc)
		}
	}
	if !k8s.HonorLabels || one.HonorLabels || agents.HonorLabels {
		t.Errorf("honor_labels: %v (kubernetes), %v, %v: want it on Kubernetes alone (a pod's name only where an agent gave none)",
			k8s.HonorLabels, one.HonorLabels, agents.HonorLabels)
	}
}

// TestKubernetesRelabel runs the Kubernetes config's relabelling, with
// Prometheus's own relabel package, on the labels pod discovery gives the
// pods of deploy/kubernetes: agents are kept at their annotated port, the
// coordinator and pods that do not run are not.
func TestKubernetesRelabel(t *testing.T) {
	rcs := decodeScrape(t, KubernetesScrapeConfig("headroom")).ScrapeConfigs[0].RelabelConfigs
	pod := func(name, phase, address string, annotated bool) labels.Labels {
		m := map[string]string{
			"__address__":                 address,
			"__metrics_path__":            "/metrics",
			"__scheme__":                  "http",
			"job":                         "headroom-agents",
			"__meta_kubernetes_namespace": "headroom",
			"__meta_kubernetes_pod_name":  name,
			"__meta_kubernetes_pod_phase": phase,
			"__meta_kubernetes_pod_ip":    strings.Trim(address[:strings.LastIndex(address+":", ":")], "[]"),
			"__meta_kubernetes_pod_label_app_kubernetes_io_component": "agent",
		}
		if annotated { // agent-job.yaml's
			m["__meta_kubernetes_pod_annotation_prometheus_io_scrape"] = "true"
			m["__meta_kubernetes_pod_annotation_prometheus_io_port"] = "9465"
			m["__meta_kubernetes_pod_annotation_prometheus_io_path"] = "/metrics"
		}
		return labels.FromMap(m)
	}
	for _, c := range []struct {
		what    string
		in      labels.Labels
		address string // "" when dropped
	}{
		{"an agent pod", pod("headroom-agent-0-x7k2p", "Running", "10.1.2.3:9465", true), "10.1.2.3:9465"},
		{"an agent pod on IPv6", pod("headroom-agent-1-q9z8r", "Running", "[fd00::5]:9465", true), "[fd00::5]:9465"},
		{"a pod that declares another port", pod("headroom-agent-2-a", "Running", "10.1.2.4:8080", true), "10.1.2.4:9465"},
		{"the coordinator (not annotated)", pod("headroom-coordinator-5fj2l", "Running", "10.1.2.9:7070", false), ""},
		{"an agent pod not yet running", pod("headroom-agent-3-b", "Pending", "10.1.2.5:9465", true), ""},
		{"an agent pod that ended", pod("headroom-agent-0-old", "Succeeded", "10.1.2.6:9465", true), ""},
	} {
		lb := labels.NewBuilder(c.in)
		keep := relabel.ProcessBuilder(lb, rcs...)
		got := lb.Labels()
		if !keep {
			if c.address != "" {
				t.Errorf("%s: dropped, want it scraped at %s", c.what, c.address)
			}
			continue
		}
		if c.address == "" {
			t.Errorf("%s: scraped at %s, want it dropped", c.what, got.Get("__address__"))
			continue
		}
		name := c.in.Get("__meta_kubernetes_pod_name")
		want := map[string]string{"__address__": c.address, "__metrics_path__": "/metrics", "namespace": "headroom", "pod": name, "agent": name}
		for k, v := range want {
			if got.Get(k) != v {
				t.Errorf("%s: %s = %q, want %q (labels %v)", c.what, k, got.Get(k), v, got)
			}
		}
	}
}

// TestPromtoolChecksScrapeConfigs checks the static scrape configs with
// the promtool of Debian's prometheus package. That build has no Kubernetes
// discovery (Debian leaves client-go out): kubernetes_sd_configs is an
// unknown field to it, so the Kubernetes config is checked by
// TestKubernetesRelabel and by hand (docs/PROMETHEUS.md).
func TestPromtoolChecksScrapeConfigs(t *testing.T) {
	const promtool = "/usr/bin/promtool"
	servertest.Require(t, promtool, "prometheus")
	dir := t.TempDir()
	for name, text := range map[string]string{
		"one.yml":    ScrapeConfig("127.0.0.1:9465"),
		"agents.yml": AgentsScrapeConfig("10.0.0.1:9465", "10.0.0.2:9465", "[fd00::3]:9465"),
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(promtool, "check", "config", path).CombinedOutput(); err != nil {
			t.Errorf("promtool check config %s: %v\n%s\n%s", name, err, out, text)
		}
	}
}
