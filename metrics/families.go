package metrics

import (
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// The exposition of a run on agents: each agent's Prom observes its own
// samples exactly as one process's does, the agent sends its families to
// the coordinator once a second (wire.EncodeFamilies), and the
// coordinator's Prom serves and checks their sum (SumFamilies) beside its
// own: counters and histograms add up, so the sum is what one process
// would expose.

// SumFamilies adds up sets of families: the values of metrics of the same
// family and labels are summed (counters, gauges, untyped values, and a
// histogram's count, sum and buckets of the same bounds). A family whose
// type differs from the first set's is left out; summaries are not summed
// (headroom exposes none). The sets are not modified.
func SumFamilies(sets ...[]*dto.MetricFamily) []*dto.MetricFamily {
	byName := map[string]*dto.MetricFamily{}
	metrics := map[string]*dto.Metric{} // family name + labels
	var names []string
	for _, set := range sets {
		for _, mf := range set {
			sum := byName[mf.GetName()]
			if sum == nil {
				sum = &dto.MetricFamily{Name: mf.Name, Help: mf.Help, Type: mf.Type}
				byName[mf.GetName()] = sum
				names = append(names, mf.GetName())
			}
			if sum.GetType() != mf.GetType() || mf.GetType() == dto.MetricType_SUMMARY {
				continue
			}
			for _, m := range mf.Metric {
				key := mf.GetName() + "\xff" + labelKey(m.Label)
				if into := metrics[key]; into != nil {
					addMetric(into, m)
					continue
				}
				c := proto.Clone(m).(*dto.Metric)
				c.TimestampMs = nil
				metrics[key] = c
				sum.Metric = append(sum.Metric, c)
			}
		}
	}
	slices.Sort(names)
	out := make([]*dto.MetricFamily, 0, len(names))
	for _, n := range names {
		if mf := byName[n]; len(mf.Metric) > 0 {
			out = append(out, mf)
		}
	}
	return out
}

func labelKey(ls []*dto.LabelPair) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.GetName())
		b.WriteByte(0)
		b.WriteString(l.GetValue())
		b.WriteByte(0)
	}
	return b.String()
}

// addMetric adds m's value into into, of the same type.
func addMetric(into, m *dto.Metric) {
	switch {
	case into.Counter != nil && m.Counter != nil:
		into.Counter.Value = proto.Float64(into.Counter.GetValue() + m.Counter.GetValue())
	case into.Gauge != nil && m.Gauge != nil:
		into.Gauge.Value = proto.Float64(into.Gauge.GetValue() + m.Gauge.GetValue())
	case into.Untyped != nil && m.Untyped != nil:
		into.Untyped.Value = proto.Float64(into.Untyped.GetValue() + m.Untyped.GetValue())
	case into.Histogram != nil && m.Histogram != nil:
		h, o := into.Histogram, m.Histogram
		h.SampleCount = proto.Uint64(h.GetSampleCount() + o.GetSampleCount())
		h.SampleSum = proto.Float64(h.GetSampleSum() + o.GetSampleSum())
		for i, b := range h.Bucket {
			if i < len(o.Bucket) && o.Bucket[i].GetUpperBound() == b.GetUpperBound() {
				b.CumulativeCount = proto.Uint64(b.GetCumulativeCount() + o.Bucket[i].GetCumulativeCount())
			}
		}
	}
}

// Labelled is gather with the label name=value added to every metric: an
// agent's exposition, told apart from the other agents' (agent="pod-3").
func Labelled(gather func() ([]*dto.MetricFamily, error), name, value string) func() ([]*dto.MetricFamily, error) {
	return func() ([]*dto.MetricFamily, error) {
		mfs, err := gather()
		for _, mf := range mfs {
			for _, m := range mf.Metric {
				m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(name), Value: proto.String(value)})
				slices.SortFunc(m.Label, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
			}
		}
		return mfs, err
	}
}
