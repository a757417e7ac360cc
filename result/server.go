package result

// Server is what the system under test exposed on its /metrics endpoints
// during the run (--scrape), one entry per endpoint in the order given.
type Server struct {
	Targets []ServerTarget `json:"targets"`
}

// ServerTarget is one scraped endpoint. Kind says what its CPU and memory
// figures are: "process" (process_cpu_seconds_total and the memory of the
// process serving /metrics, such as an application server) or "node" (the
// machine's CPU and used memory, from node_exporter); Memory names the
// metric the memory figures come from.
type ServerTarget struct {
	URL      string        `json:"url"`
	Instance string        `json:"instance"`
	Kind     string        `json:"kind"`
	Memory   string        `json:"memory,omitempty"` // e.g. "go_memstats_heap_inuse_bytes", "process_resident_memory_bytes"
	Has      []string      `json:"has"`              // which of "cpu", "memory", "goroutines" it exposed
	Timeline []ServerPoint `json:"timeline"`
	// Window covers the run's measured window, as result.Window does.
	Window ServerWindow `json:"window"`
	// Setup covers users' setup: from the run's start (its first scrape)
	// to the measured window, a bounded run's; nil otherwise. What a
	// database did in it, over Setup.Users, is its work a user set up.
	Setup     *ServerWindow `json:"setup,omitempty"`
	Scrapes   int           `json:"scrapes"`
	Failed    int           `json:"failed"`
	LastError string        `json:"last_error,omitempty"`
}

// ServerPoint is one scrape; T is seconds since the run started. CPU is
// in cores (1 = one core busy), memory in MiB (the Go heap in use for a
// Go process, else its resident memory; used memory for a node).
type ServerPoint struct {
	T          float64 `json:"t"`
	CPUCores   float64 `json:"cpu_cores"`
	MemoryMB   float64 `json:"memory_mb"`
	Goroutines float64 `json:"goroutines,omitempty"`
	// MeanMs is each latency family's mean over its requests since the
	// previous scrape, e.g. {"mattermost_db_store_time": 12.5}; absent
	// when none came in.
	MeanMs map[string]float64 `json:"mean_ms,omitempty"`
}

// ServerWindow sums a target up over a span of the run.
type ServerWindow struct {
	Seconds        float64       `json:"seconds"`
	CPUCoresMean   float64       `json:"cpu_cores_mean"`
	CPUCoresMax    float64       `json:"cpu_cores_max"`
	MemoryMBMean   float64       `json:"memory_mb_mean"`
	MemoryMBMax    float64       `json:"memory_mb_max"`
	GoroutinesMean float64       `json:"goroutines_mean,omitempty"`
	GoroutinesMax  float64       `json:"goroutines_max,omitempty"`
	Timings        []TimingGroup `json:"timings,omitempty"`
	// Database is what a database did over the span, from its exporter's
	// counters; nil for an endpoint that is no database exporter.
	Database *DatabaseWork `json:"database,omitempty"`
}

// DatabaseWork counts a database's work over a span (serverstats names
// the exporters' counters): MySQL and MariaDB count their data statements
// (Queries), PostgreSQL its transactions; both the rows their scans read.
// The reports give each per request of the span.
type DatabaseWork struct {
	System       string  `json:"system"` // "mysql" (MySQL or MariaDB) or "postgresql"
	Queries      float64 `json:"queries,omitempty"`
	Transactions float64 `json:"transactions,omitempty"`
	RowsRead     float64 `json:"rows_read"`
}

// TimingGroup is one server-side latency family split by one label, such
// as mattermost_api_time by handler or
// synapse_http_server_response_time_seconds by servlet. Type is
// "histogram", or "summary" (count and sum only: no p99); empty in results
// written before summaries were read.
type TimingGroup struct {
	Metric string   `json:"metric"`
	Label  string   `json:"label"`
	Title  string   `json:"title"`
	Type   string   `json:"type,omitempty"`
	Items  []Timing `json:"items"`
}

// Timing is one label value's figures over the window. P99Ms is
// interpolated within the histogram's buckets, as PromQL's
// histogram_quantile does, so it is only as fine as the buckets; 0 for a
// summary.
type Timing struct {
	Name   string  `json:"name"`
	Count  float64 `json:"count"`
	RPS    float64 `json:"rps"`
	MeanMs float64 `json:"mean_ms"`
	P99Ms  float64 `json:"p99_ms"`
}
