// Package serverstats keeps the server's own figures, what the system
// under test exposes on its /metrics endpoints during a run: CPU, memory,
// goroutines over time and its own latency histograms or summaries (time
// by handler, servlet, URI or view: the families of [Known], and any named
// with [New]), summed up over the spans a result reports on.
//
// It is fed by prom.Scraper (its Gathered hook), so a ceiling run scrapes
// each endpoint once a tick for both its checks and its result.
package serverstats

import (
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/headroom-dev/headroom/result"
)

// maxItems bounds the label values kept per family and endpoint.
const maxItems = 500

// Watch collects scrapes of some endpoints. Safe for concurrent use.
type Watch struct {
	start    time.Time
	families []Family
	mu       sync.Mutex
	targets  []*target
	pending  []*Mark // marks waiting for a scrape of some endpoint
}

type target struct {
	url      string
	lastT    time.Time // when the latest successful scrape was taken
	kind     string
	db       string // the database system, when the endpoint is its exporter
	memory   string // the metric memory figures come from
	has      map[string]bool
	timeline []result.ServerPoint
	cpu      float64 // the last cumulative CPU seconds, at cpuT
	cpuT     time.Time
	hists    map[key]*cum // the latest cumulative histograms
	attempts int
	scrapes  int
	lastErr  string
}

type key struct{ family, name string }

// cum is a cumulative histogram as exposed: counts per upper bound; a
// summary's has no bounds (count and sum only).
type cum struct {
	count, sum float64
	bounds     []float64
	counts     []float64
}

// New returns a Watch of the endpoints at urls; times in its figures are
// seconds since start. It keeps the latency families of Known and extra
// (see WithFamilies).
func New(urls []string, start time.Time, extra ...Family) *Watch {
	w := &Watch{start: start, families: WithFamilies(extra)}
	for _, u := range urls {
		w.targets = append(w.targets, &target{url: u, has: map[string]bool{}, hists: map[key]*cum{}})
	}
	return w
}

// Attempted counts one scrape of every endpoint and the errors it gave
// (errors name the URL they are about, as prom.Scraper's do).
func (w *Watch) Attempted(errs []error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, tg := range w.targets {
		tg.attempts++
		for _, err := range errs {
			if strings.Contains(err.Error(), tg.url) {
				tg.lastErr = err.Error()
			}
		}
	}
}

// Gathered takes one successful scrape of the endpoint at url (the
// signature of prom.Scraper.Gathered).
func (w *Watch) Gathered(url string, mfs []*dto.MetricFamily, t time.Time) {
	byName := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var tg *target
	for _, c := range w.targets {
		if c.url == url {
			tg = c
		}
	}
	if tg == nil {
		return
	}
	defer w.resolve(tg, t)
	tg.scrapes++
	p := result.ServerPoint{T: t.Sub(w.start).Seconds()}
	tg.gather(byName, t, &p)
	tg.means(w.families, byName, &p)
	if len(tg.has) > 0 || p.MeanMs != nil {
		tg.timeline = append(tg.timeline, p)
	}
}

// gather reads the scrape's resources into p (CPU over the time since the
// previous scrape, memory, goroutines), or a database exporter's counters
// of work into tg's state.
func (tg *target) gather(byName map[string]*dto.MetricFamily, t time.Time, p *result.ServerPoint) {
	cpu, mem, gor, kind, memory := resources(byName)
	if system, counts := databaseCounters(byName); system != "" {
		// an exporter's process_* figures are its own, not the database's
		cpu, mem, gor, kind, memory = math.NaN(), math.NaN(), math.NaN(), "database", ""
		tg.db = system
		for k, v := range counts {
			tg.hists[k] = &cum{count: v}
		}
	}
	tg.kind = kind
	if !math.IsNaN(mem) {
		tg.memory = memory
	}
	if !math.IsNaN(cpu) {
		if !tg.cpuT.IsZero() && t.After(tg.cpuT) {
			p.CPUCores = math.Max(0, (cpu-tg.cpu)/t.Sub(tg.cpuT).Seconds())
			tg.has["cpu"] = true
		}
		tg.cpu, tg.cpuT = cpu, t
	}
	if !math.IsNaN(mem) {
		p.MemoryMB = mem / (1 << 20)
		tg.has["memory"] = true
	}
	if !math.IsNaN(gor) {
		p.Goroutines = gor
		tg.has["goroutines"] = true
	}
}

// means keeps each latency family's items (at most maxItems a family)
// and puts in p each family's mean since the previous scrape, over all
// its items.
func (tg *target) means(families []Family, byName map[string]*dto.MetricFamily, p *result.ServerPoint) {
	first := tg.scrapes == 1
	for _, f := range families {
		mf := byName[f.Metric]
		if mf == nil || (mf.GetType() != dto.MetricType_HISTOGRAM && mf.GetType() != dto.MetricType_SUMMARY) {
			continue
		}
		var dn, ds float64
		for k, c := range histograms(f, mf) {
			prev := tg.hists[k]
			if prev == nil && len(tg.hists) >= maxItems*len(families) {
				continue // past the cap: not kept, not counted
			}
			if prev != nil && c.count >= prev.count {
				dn, ds = dn+c.count-prev.count, ds+c.sum-prev.sum
			} else if !first {
				dn, ds = dn+c.count, ds+c.sum // new since the previous scrape, or restarted
			}
			tg.hists[k] = c
		}
		if dn > 0 {
			if p.MeanMs == nil {
				p.MeanMs = map[string]float64{}
			}
			p.MeanMs[f.Metric] = 1000 * ds / dn
		}
	}
}

// resources reads CPU seconds, memory bytes and goroutines, NaN where the
// endpoint has no such metric, and says where memory comes from. A node
// is a node_exporter; a process is anything with the standard process_*
// metrics (every official Prometheus client library exposes
// process_cpu_seconds_total and process_resident_memory_bytes: Go, Python
// (Synapse, Django), Java's simpleclient), or a Go runtime's go_*.
func resources(m map[string]*dto.MetricFamily) (cpu, mem, gor float64, kind, memory string) {
	cpu, mem, gor = math.NaN(), math.NaN(), math.NaN()
	if mf := m["node_cpu_seconds_total"]; mf != nil {
		cpu = 0
		for _, s := range mf.GetMetric() {
			if mode := label(s, "mode"); mode != "idle" && mode != "iowait" && mode != "steal" {
				cpu += value(s)
			}
		}
		total, avail := m["node_memory_MemTotal_bytes"], m["node_memory_MemAvailable_bytes"]
		if total != nil && avail != nil && len(total.GetMetric()) > 0 && len(avail.GetMetric()) > 0 {
			mem = value(total.GetMetric()[0]) - value(avail.GetMetric()[0])
		}
		return cpu, mem, gor, "node", "node_memory_MemTotal_bytes - node_memory_MemAvailable_bytes"
	}
	first := func(name string) float64 {
		if mf := m[name]; mf != nil && len(mf.GetMetric()) > 0 {
			return value(mf.GetMetric()[0])
		}
		return math.NaN()
	}
	cpu, gor = first(prefixed(m, "process_cpu_seconds_total")), first("go_goroutines")
	memory = "go_memstats_heap_inuse_bytes"
	if mem = first(memory); math.IsNaN(mem) {
		memory = prefixed(m, "process_resident_memory_bytes")
		mem = first(memory)
	}
	return cpu, mem, gor, "process", memory
}

// prefixed is name if the endpoint exposes it, or else the first (by
// name) of its families that end in _name: a server that prefixes the
// standard process metrics with its own namespace, as Mattermost does
// (mattermost_process_cpu_seconds_total).
func prefixed(m map[string]*dto.MetricFamily, name string) string {
	if m[name] != nil {
		return name
	}
	found := ""
	for n := range m {
		if strings.HasSuffix(n, "_"+name) && (found == "" || n < found) {
			found = n
		}
	}
	if found == "" {
		return name
	}
	return found
}

func value(s *dto.Metric) float64 {
	switch {
	case s.Counter != nil:
		return s.Counter.GetValue()
	case s.Gauge != nil:
		return s.Gauge.GetValue()
	case s.Untyped != nil:
		return s.Untyped.GetValue()
	}
	return math.NaN()
}

func label(s *dto.Metric, name string) string {
	for _, l := range s.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// histograms sums a family's series per value of its label (other labels,
// such as instance or status, are added together). A summary gives its
// count and sum: its quantiles cannot be added up.
func histograms(f Family, mf *dto.MetricFamily) map[key]*cum {
	out := map[key]*cum{}
	for _, s := range mf.GetMetric() {
		if q := s.GetSummary(); q != nil {
			k := key{f.Metric, label(s, f.Label)}
			c := out[k]
			if c == nil {
				c = &cum{}
				out[k] = c
			}
			c.count += float64(q.GetSampleCount())
			c.sum += q.GetSampleSum()
			continue
		}
		h := s.GetHistogram()
		if h == nil {
			continue
		}
		k := key{f.Metric, label(s, f.Label)}
		c := out[k]
		if c == nil {
			c = &cum{}
			for _, b := range h.GetBucket() {
				c.bounds = append(c.bounds, b.GetUpperBound())
			}
			c.counts = make([]float64, len(c.bounds))
			out[k] = c
		}
		c.count += float64(h.GetSampleCount())
		c.sum += h.GetSampleSum()
		for i, b := range h.GetBucket() {
			if i < len(c.counts) && b.GetUpperBound() == c.bounds[i] {
				c.counts[i] += float64(b.GetCumulativeCount())
			}
		}
	}
	return out
}

// Mark is the state of the endpoints at one moment, to sum up what
// happened between two marks. The zero Mark (or nil) is the start of the
// watch.
type Mark struct {
	t     float64
	at    time.Time
	hists []map[key]cum // per target; nil until its scrape at or after at came in
}

// slack lets a scrape taken a moment before a mark's time count as taken at
// it: a run starts a scrape and sums up its figures at the same tick, a few
// microseconds apart. Scrapes are a tick (1 s) apart, so it cannot pick the
// wrong one.
const slack = 50 * time.Millisecond

// Mark returns the state of every endpoint as of its first scrape taken at
// or after at: the one a run started at that tick, even if it is still in
// flight (the mark is filled in when it comes back). An endpoint scraped
// again before at is already past it and gives its state now.
func (w *Watch) Mark(at time.Time) *Mark {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := &Mark{t: at.Sub(w.start).Seconds(), at: at, hists: make([]map[key]cum, len(w.targets))}
	for i, tg := range w.targets {
		if !tg.lastT.IsZero() && !tg.lastT.Before(at.Add(-slack)) {
			m.hists[i] = tg.snapshot()
		}
	}
	w.pending = append(w.pending, m)
	return m
}

func (tg *target) snapshot() map[key]cum {
	hs := make(map[key]cum, len(tg.hists))
	for k, c := range tg.hists {
		hs[k] = *c // the slices are never written after a scrape stores them
	}
	return hs
}

// resolve fills the pending marks that tg's scrape taken at t answers.
// Called with w.mu held.
func (w *Watch) resolve(tg *target, t time.Time) {
	tg.lastT = t
	i := slices.Index(w.targets, tg)
	keep := w.pending[:0]
	for _, m := range w.pending {
		if m.hists[i] == nil && !t.Before(m.at.Add(-slack)) {
			m.hists[i] = tg.snapshot()
		}
		if slices.IndexFunc(m.hists, func(h map[key]cum) bool { return h == nil }) >= 0 {
			keep = append(keep, m)
		}
	}
	clear(w.pending[len(keep):])
	w.pending = keep
}

// state is a mark's state of target i: the latest if no scrape came in
// after the mark (the run ended first), nothing for the zero mark.
func (w *Watch) state(m *Mark, i int) map[key]cum {
	if m == nil || m.hists == nil {
		return nil
	}
	if m.hists[i] == nil {
		return w.targets[i].snapshot()
	}
	return m.hists[i]
}

// Windows sums up each endpoint between two marks, in the order of the
// URLs given to New.
func (w *Watch) Windows(from, to *Mark) []result.ServerWindow {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]result.ServerWindow, len(w.targets))
	ft, tt := 0.0, 0.0
	if from != nil {
		ft = from.t
	}
	if to != nil {
		tt = to.t
	}
	for i, tg := range w.targets {
		out[i] = tg.window(w.families, ft, tt, w.state(from, i), w.state(to, i))
	}
	return out
}

// Result is the whole record: every endpoint's timeline, and its figures
// over the span between from and to.
func (w *Watch) Result(from, to *Mark) *result.Server {
	wins := w.Windows(from, to)
	w.mu.Lock()
	defer w.mu.Unlock()
	s := &result.Server{}
	for i, tg := range w.targets {
		st := result.ServerTarget{
			URL: tg.url, Instance: instance(tg.url), Kind: tg.kind, Memory: tg.memory, Timeline: tg.timeline, Window: wins[i],
			Scrapes: tg.scrapes, Failed: max(0, tg.attempts-tg.scrapes), LastError: tg.lastErr,
		}
		for _, h := range []string{"cpu", "memory", "goroutines"} {
			if tg.has[h] {
				st.Has = append(st.Has, h)
			}
		}
		s.Targets = append(s.Targets, st)
	}
	return s
}

func instance(url string) string {
	s := url[strings.Index(url, "//")+2:]
	if i := strings.IndexByte(s, '/'); i >= 0 {
		s = s[:i]
	}
	return s
}

func (tg *target) window(families []Family, fromT, toT float64, from, to map[key]cum) result.ServerWindow {
	w := result.ServerWindow{Seconds: toT - fromT}
	n := 0.0
	for _, p := range tg.timeline {
		if p.T <= fromT || p.T > toT {
			continue
		}
		n++
		w.CPUCoresMean += p.CPUCores
		w.MemoryMBMean += p.MemoryMB
		w.GoroutinesMean += p.Goroutines
		w.CPUCoresMax = math.Max(w.CPUCoresMax, p.CPUCores)
		w.MemoryMBMax = math.Max(w.MemoryMBMax, p.MemoryMB)
		w.GoroutinesMax = math.Max(w.GoroutinesMax, p.Goroutines)
	}
	if n > 0 {
		w.CPUCoresMean /= n
		w.MemoryMBMean /= n
		w.GoroutinesMean /= n
	}
	w.Database = database(tg.db, from, to)
	for _, f := range families {
		g := result.TimingGroup{Metric: f.Metric, Label: f.Label, Title: f.Title, Type: "histogram"}
		for k, end := range to {
			if k.family != f.Metric {
				continue
			}
			if end.bounds == nil {
				g.Type = "summary"
			}
			if t, ok := timing(k.name, from[k], end, w.Seconds); ok {
				g.Items = append(g.Items, t)
			}
		}
		if len(g.Items) == 0 {
			continue
		}
		sort.Slice(g.Items, func(a, b int) bool { return g.Items[a].Name < g.Items[b].Name })
		w.Timings = append(w.Timings, g)
	}
	return w
}

// timing is what a histogram gained between begin (zero if it did not
// exist yet) and end. A counter reset (the server restarted) counts from
// zero, as Prometheus's increase() does. A summary (no buckets) has no p99.
func timing(name string, begin, end cum, seconds float64) (result.Timing, bool) {
	if end.count < begin.count || len(begin.counts) != len(end.counts) {
		begin = cum{counts: make([]float64, len(end.counts))}
	}
	n := end.count - begin.count
	if n <= 0 {
		return result.Timing{}, false
	}
	t := result.Timing{Name: name, Count: n, MeanMs: 1000 * (end.sum - begin.sum) / n}
	if seconds > 0 {
		t.RPS = n / seconds
	}
	counts := make([]float64, len(end.counts))
	for j := range counts {
		counts[j] = end.counts[j] - begin.counts[j]
	}
	if len(end.bounds) > 0 {
		t.P99Ms = 1000 * quantile(0.99, end.bounds, counts, n)
	}
	return t, true
}

// quantile interpolates linearly within the bucket holding rank q*n, as
// PromQL's histogram_quantile; past the last finite bound it returns that
// bound.
func quantile(q float64, bounds, counts []float64, n float64) float64 {
	rank := q * n
	lower, below := 0.0, 0.0
	for j, ub := range bounds {
		if counts[j] >= rank {
			if math.IsInf(ub, 1) {
				return lower
			}
			in := counts[j] - below
			if in <= 0 {
				return ub
			}
			return lower + (ub-lower)*(rank-below)/in
		}
		lower, below = ub, counts[j]
	}
	return lower // rank is in the implicit +Inf bucket
}
