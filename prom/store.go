// Package prom is a Prometheus in a box, so a run needs no server to judge
// its health: a [Scraper] scrapes targets' /metrics into an in-memory
// [Store] that headroom also feeds with its own metrics, and [Embedded]
// evaluates PromQL on it with Prometheus's own engine. [Remote] asks a real
// Prometheus instead; the scrape configs tell one what to scrape. Both
// answer an instant query with one value, or an error (ErrNoData when the
// vector is empty).
package prom

import (
	"context"
	"math"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// DefaultRetention is what NewStore keeps when given a retention <= 0: the
// default lookback delta (5m) plus the longest range a health check should use.
const DefaultRetention = 10 * time.Minute

// Store is an in-memory time-series store fed by headroom: its own registry
// each second, and the endpoints it scrapes. It keeps float samples newer than
// its retention (older ones are dropped as it goes, amortised over appends).
// Samples of a series must come in time order: one at or before the series'
// newest sample is dropped, as Prometheus drops out-of-order samples.
// Safe for concurrent use.
type Store struct {
	retention int64 // milliseconds

	mu        sync.RWMutex
	series    map[uint64][]*memSeries // by labels hash; a slice for hash collisions
	byName    map[string][]*memSeries // by __name__
	newest    int64                   // newest sample time, ms
	compacted int64                   // cut-off of the last compaction, ms
}

type memSeries struct {
	lset    labels.Labels
	samples []sample // in time order; replaced, never modified in place, when trimmed
}

type sample struct {
	t int64 // ms
	f float64
}

// NewStore returns an empty store that keeps samples newer than retention
// (DefaultRetention if retention <= 0).
func NewStore(retention time.Duration) *Store {
	if retention <= 0 {
		retention = DefaultRetention
	}
	return &Store{
		retention: retention.Milliseconds(),
		series:    map[uint64][]*memSeries{},
		byName:    map[string][]*memSeries{},
		compacted: math.MinInt64,
	}
}

// AppendGathered adds a gathered registry snapshot (from
// prometheus.Gatherer.Gather(), or parsed from the text format) at time t,
// with extra labels such as job="headroom" added to every series. A metric
// label that clashes with an extra one is renamed exported_<name>, as
// Prometheus does. Samples with their own timestamp keep it.
//
// Families become series as a scrape would make them: counters, gauges and
// untyped metrics one each; histograms name_bucket{le} (with le="+Inf"),
// name_sum and name_count; summaries name{quantile}, name_sum and name_count.
// Native histogram buckets are ignored: only classic buckets are stored.
func (s *Store) AppendGathered(mfs []*dto.MetricFamily, t time.Time, extra labels.Labels) {
	ts := t.UnixMilli()
	var b labels.ScratchBuilder
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, mf := range mfs {
		name := mf.GetName()
		for _, m := range mf.GetMetric() {
			at := ts
			if m.TimestampMs != nil {
				at = m.GetTimestampMs()
			}
			add := func(suffix, label string, value float64, v float64) {
				s.append(seriesLabels(&b, name+suffix, m.GetLabel(), label, value, extra), at, v)
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				add("", "", 0, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add("", "", 0, m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				add("", "", 0, m.GetUntyped().GetValue())
			case dto.MetricType_SUMMARY:
				q := m.GetSummary()
				for _, qu := range q.GetQuantile() {
					add("", model.QuantileLabel, qu.GetQuantile(), qu.GetValue())
				}
				add("_sum", "", 0, q.GetSampleSum())
				add("_count", "", 0, float64(q.GetSampleCount()))
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				h := m.GetHistogram()
				count := float64(h.GetSampleCount())
				if h.SampleCountFloat != nil {
					count = h.GetSampleCountFloat()
				}
				infSeen := false
				for _, bk := range h.GetBucket() {
					c := float64(bk.GetCumulativeCount())
					if bk.CumulativeCountFloat != nil {
						c = bk.GetCumulativeCountFloat()
					}
					infSeen = infSeen || math.IsInf(bk.GetUpperBound(), +1)
					add("_bucket", model.BucketLabel, bk.GetUpperBound(), c)
				}
				if !infSeen {
					add("_bucket", model.BucketLabel, math.Inf(+1), count)
				}
				add("_sum", "", 0, h.GetSampleSum())
				add("_count", "", 0, count)
			}
		}
	}
	s.maybeCompact()
}

// seriesLabels builds {__name__=name, metric labels, label=value, extra}.
// label is "" for none; its value is formatted as the text format writes it.
func seriesLabels(b *labels.ScratchBuilder, name string, pairs []*dto.LabelPair, label string, value float64, extra labels.Labels) labels.Labels {
	b.Reset()
	b.Add(model.MetricNameLabel, name)
	for _, p := range pairs {
		n := p.GetName()
		if extra.Has(n) {
			n = model.ExportedLabelPrefix + n
		}
		b.Add(n, p.GetValue())
	}
	if label != "" {
		b.Add(label, formatFloat(value))
	}
	extra.Range(func(l labels.Label) { b.Add(l.Name, l.Value) })
	b.Sort()
	return b.Labels()
}

// formatFloat formats an le or quantile value as client_golang's text format does.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, +1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	default:
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
}

// appendSample adds one sample; used by the scraper for up. Takes the lock.
func (s *Store) appendSample(lset labels.Labels, t time.Time, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.append(lset, t.UnixMilli(), v)
	s.maybeCompact()
}

// append adds a sample to its series, creating it. s.mu must be held.
func (s *Store) append(lset labels.Labels, t int64, v float64) {
	if t < s.newest-s.retention {
		return // already past retention
	}
	h := lset.Hash()
	var ms *memSeries
	for _, c := range s.series[h] {
		if labels.Equal(c.lset, lset) {
			ms = c
			break
		}
	}
	if ms == nil {
		ms = &memSeries{lset: lset}
		s.series[h] = append(s.series[h], ms)
		name := lset.Get(model.MetricNameLabel)
		s.byName[name] = append(s.byName[name], ms)
	}
	if n := len(ms.samples); n > 0 && ms.samples[n-1].t >= t {
		return // out of order or duplicate
	}
	ms.samples = append(ms.samples, sample{t, v})
	s.newest = max(s.newest, t)
}

// maybeCompact drops samples older than the retention once the cut-off has
// moved by a quarter of the retention since the last time, so each sample is
// copied a bounded number of times. s.mu must be held.
func (s *Store) maybeCompact() {
	cut := s.newest - s.retention
	if s.compacted != math.MinInt64 && cut-s.compacted < s.retention/4 {
		return
	}
	s.compacted = cut
	for h, list := range s.series {
		kept := list[:0]
		for _, ms := range list {
			i := sort.Search(len(ms.samples), func(i int) bool { return ms.samples[i].t >= cut })
			if i == len(ms.samples) {
				continue // series has nothing left: forget it
			}
			if i > 0 {
				// A new slice: queriers may hold the old one.
				ms.samples = slices.Clone(ms.samples[i:])
			}
			kept = append(kept, ms)
		}
		if len(kept) == 0 {
			delete(s.series, h)
		} else {
			clear(list[len(kept):])
			s.series[h] = kept
		}
	}
	for name, list := range s.byName {
		list = slices.DeleteFunc(list, func(ms *memSeries) bool { return len(ms.samples) == 0 || ms.samples[len(ms.samples)-1].t < cut })
		if len(list) == 0 {
			delete(s.byName, name)
		} else {
			s.byName[name] = list
		}
	}
}

// Has reports whether any series has this metric name (__name__).
func (s *Store) Has(metric string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byName[metric]) > 0
}

// Queryable lets the PromQL engine read the store.
func (s *Store) Queryable() storage.Queryable {
	return storage.QueryableFunc(func(mint, maxt int64) (storage.Querier, error) {
		return &querier{s: s, mint: mint, maxt: maxt}, nil
	})
}

// querier reads the store between mint and maxt (milliseconds, inclusive).
type querier struct {
	s          *Store
	mint, maxt int64
}

var _ storage.Querier = (*querier)(nil)

// Select returns the series matching every matcher that have samples in the
// querier's range (narrowed by hints), sorted by labels.
func (q *querier) Select(_ context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	mint, maxt := q.mint, q.maxt
	if hints != nil {
		mint, maxt = max(mint, hints.Start), min(maxt, hints.End)
	}
	var out []storage.Series
	q.s.mu.RLock()
	for _, s := range q.candidates(ms) {
		if !matches(s.lset, ms) {
			continue
		}
		lo := sort.Search(len(s.samples), func(i int) bool { return s.samples[i].t >= mint })
		hi := sort.Search(len(s.samples), func(i int) bool { return s.samples[i].t > maxt })
		if lo < hi {
			// Full slice expression: appends go past hi, trims allocate anew.
			view := samplesView(s.samples[lo:hi:hi])
			out = append(out, &storage.SeriesEntry{
				Lset:             s.lset,
				SampleIteratorFn: func(chunkenc.Iterator) chunkenc.Iterator { return storage.NewListSeriesIterator(view) },
			})
		}
	}
	q.s.mu.RUnlock()
	slices.SortFunc(out, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	return &seriesSet{series: out, i: -1}
}

// candidates narrows the series to those of one name when a matcher says so.
// q.s.mu must be held for reading.
func (q *querier) candidates(ms []*labels.Matcher) []*memSeries {
	for _, m := range ms {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			return q.s.byName[m.Value]
		}
	}
	var all []*memSeries
	for _, list := range q.s.series {
		all = append(all, list...)
	}
	return all
}

func matches(lset labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}

// LabelValues returns the sorted values of a label among matching series.
func (q *querier) LabelValues(_ context.Context, name string, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	seen := map[string]struct{}{}
	q.s.mu.RLock()
	for _, s := range q.candidates(ms) {
		if v := s.lset.Get(name); v != "" && matches(s.lset, ms) {
			seen[v] = struct{}{}
		}
	}
	q.s.mu.RUnlock()
	return sortedKeys(seen), nil, nil
}

// LabelNames returns the sorted label names among matching series.
func (q *querier) LabelNames(_ context.Context, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	seen := map[string]struct{}{}
	q.s.mu.RLock()
	for _, s := range q.candidates(ms) {
		if matches(s.lset, ms) {
			s.lset.Range(func(l labels.Label) { seen[l.Name] = struct{}{} })
		}
	}
	q.s.mu.RUnlock()
	return sortedKeys(seen), nil, nil
}

func sortedKeys(m map[string]struct{}) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (q *querier) Close() error { return nil }

// seriesSet iterates a selected list of series.
type seriesSet struct {
	series []storage.Series
	i      int
}

func (s *seriesSet) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *seriesSet) At() storage.Series                { return s.series[s.i] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

// samplesView adapts a series' samples to storage.NewListSeriesIterator
// without copying or boxing them.
type samplesView []sample

func (v samplesView) Get(i int) chunks.Sample { return &v[i] }
func (v samplesView) Len() int                { return len(v) }

// A *sample is a float chunks.Sample.
func (s *sample) T() int64                      { return s.t }
func (s *sample) ST() int64                     { return 0 }
func (s *sample) F() float64                    { return s.f }
func (s *sample) H() *histogram.Histogram       { return nil }
func (s *sample) FH() *histogram.FloatHistogram { return nil }
func (s *sample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s *sample) Copy() chunks.Sample           { c := *s; return &c }
