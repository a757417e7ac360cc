// Package grafana holds headroom's Grafana dashboard, headroom.json: a run's
// metrics across agents, as a Prometheus that scrapes them (or one process,
// or a coordinator) has them. Import it in Grafana (Dashboards, New,
// Import) and pick the Prometheus data source; docs/PROMETHEUS.md says what
// to scrape. There is no Go API: the package's test keeps the dashboard's
// queries to the metrics headroom exposes (metrics.Prom) and its check
// panels to the default checks (health.Defaults).
package grafana
