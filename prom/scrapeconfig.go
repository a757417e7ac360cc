package prom

import (
	"fmt"
	"strings"
)

// The scrape configs a Prometheus needs to judge a run with --prometheus
// (docs/PROMETHEUS.md): every second, as the checks' short windows want
// (rate needs two samples in a window), and each a scrape_configs section
// of prometheus.yml. A run on agents is scraped either at its coordinator
// (ScrapeConfig: the agents' sum, what one process would expose) or at its
// agents (AgentsScrapeConfig, KubernetesScrapeConfig: one series per agent,
// agent="NAME"), never both: both would count every request twice. The
// default checks add the agents' series up (TestDefaultsAcrossAgents).

// ScrapeConfig returns a prometheus.yml scrape_configs section that scrapes
// headroom's own /metrics at addr (host:port, e.g. "127.0.0.1:9465") every
// second, as job "headroom": one headroom process, or a coordinator serving
// its agents' sum (--local-agents, or --agents whose agents are not scraped).
func ScrapeConfig(addr string) string {
	return fmt.Sprintf(`scrape_configs:
  - job_name: headroom
    scrape_interval: 1s
    scrape_timeout: 1s
    metrics_path: /metrics
    static_configs:
      - targets: [%q]
`, addr)
}

// AgentsScrapeConfig returns a prometheus.yml scrape_configs section that
// scrapes every agent's /metrics (`headroom agent --metrics-listen ADDR`) at
// addrs (host:port each, e.g. "10.0.0.7:9465") every second, as job
// "headroom-agents". An agent labels its series agent="NAME" (its --name).
func AgentsScrapeConfig(addrs ...string) string {
	quoted := make([]string, len(addrs))
	for i, a := range addrs {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	return fmt.Sprintf(`scrape_configs:
  # headroom's agents, each started with --metrics-listen: their series carry
  # agent="NAME". Scrape these or the coordinator's --metrics-listen (already
  # their sum), not both: both would count every request twice.
  - job_name: headroom-agents
    scrape_interval: 1s
    scrape_timeout: 1s
    metrics_path: /metrics
    static_configs:
      - targets: [%s]
`, strings.Join(quoted, ", "))
}

// KubernetesScrapeConfig returns a prometheus.yml scrape_configs section
// that finds headroom's agent pods in namespace (deploy/kubernetes uses
// "headroom") with Kubernetes pod discovery and scrapes them every second,
// as job "headroom-agents": the pods annotated prometheus.io/scrape: "true"
// that are running, at their IP and the port in prometheus.io/port (and the
// path in prometheus.io/path, /metrics if none), each target labelled with
// its namespace and pod. An agent's series keep their own agent label (its
// --name, stable when the Job makes a pod again); a series without one gets
// the pod's name (honor_labels: the target's agent label applies only where
// the scraped series has none). Prometheus's service account must be allowed
// to list and watch pods in namespace.
func KubernetesScrapeConfig(namespace string) string {
	return fmt.Sprintf(`scrape_configs:
  # headroom's agent pods (deploy/kubernetes/agent-job.yaml), found by
  # Kubernetes pod discovery. The coordinator's pod is not annotated: it
  # serves the agents' sum, and scraping both would count requests twice.
  - job_name: headroom-agents
    scrape_interval: 1s
    scrape_timeout: 1s
    # A series keeps its own agent label (the agent's --name); one without
    # gets the target's: the pod's name, set below.
    honor_labels: true
    kubernetes_sd_configs:
      - role: pod
        namespaces:
          names: [%q]
    relabel_configs:
      - source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_scrape]
        regex: "true"
        action: keep
      - source_labels: [__meta_kubernetes_pod_phase]
        regex: Running
        action: keep
      # The pod's IP (bracketed if IPv6) and the port in prometheus.io/port.
      - source_labels: [__address__, __meta_kubernetes_pod_annotation_prometheus_io_port]
        regex: (\[[^\]]+\]|[^:]+)(?::\d+)?;(\d+)
        replacement: $1:$2
        target_label: __address__
      - source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_path]
        regex: (.+)
        target_label: __metrics_path__
      - source_labels: [__meta_kubernetes_namespace]
        target_label: namespace
      - source_labels: [__meta_kubernetes_pod_name]
        target_label: pod
      - source_labels: [__meta_kubernetes_pod_name]
        target_label: agent
`, namespace)
}
