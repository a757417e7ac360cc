package result

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/headroom-dev/headroom/metrics"
)

// A run counts at most metrics.MaxNames request names; past them the
// writer files requests under metrics.OtherName. A result that holds more
// names (written by something else, or edited) is folded the same way on
// read, so that reading and comparing it take memory and time bounded by
// the cap, not by the file: in each table, the MaxNames names with the
// most requests are kept (ties: the first by name), and the others are
// added to OtherName's entry. Actions are capped the same way.

// fold folds every table of r that holds more than metrics.MaxNames
// names, and says so in FoldedNames and Notes.
func (r *Result) fold() {
	n := foldSummaries(&r.Requests) + foldSummaries(&r.Actions)
	if r.Step != nil {
		for i := range r.Step.Levels {
			l := &r.Step.Levels[i]
			n += foldSummaries(&l.Requests) + foldSummaries(&l.Actions)
		}
	}
	if n > 0 {
		r.FoldedNames = n
		r.Notes = append(r.Notes, fmt.Sprintf("the result holds more than %d request (or action) names: %d were folded under %q when it was read; that entry's percentiles are upper bounds, the histograms' merge is exact",
			metrics.MaxNames, n, metrics.OtherName))
	}
}

// foldSet says which of names to fold: all but OtherName and the
// metrics.MaxNames others with the highest counts, ties to the name
// first in order. counts[i] is names[i]'s.
func foldSet(names []string, counts []int64) []bool {
	fold := make([]bool, len(names))
	order := make([]int, 0, len(names))
	for i, n := range names {
		if n != metrics.OtherName {
			order = append(order, i)
		}
	}
	if len(order) <= metrics.MaxNames {
		return fold
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(names[a], names[b]))
	})
	for _, i := range order[metrics.MaxNames:] {
		fold[i] = true
	}
	return fold
}

// foldSummaries folds a table of summaries in place and returns how many
// names it folded.
func foldSummaries(list *[]metrics.Summary) int {
	if len(*list) <= metrics.MaxNames {
		return 0
	}
	names, counts := make([]string, len(*list)), make([]int64, len(*list))
	for i, s := range *list {
		names[i], counts[i] = s.Name, s.Count
	}
	fold := foldSet(names, counts)
	var kept []metrics.Summary
	other := metrics.Summary{Name: metrics.OtherName}
	n := 0
	for i, s := range *list {
		switch {
		case fold[i]:
			addSummary(&other, s)
			n++
		case s.Name == metrics.OtherName:
			addSummary(&other, s)
		default:
			kept = append(kept, s)
		}
	}
	if n == 0 {
		return 0
	}
	kept = append(kept, other)
	slices.SortStableFunc(kept, func(a, b metrics.Summary) int { return cmp.Compare(a.Name, b.Name) })
	*list = kept
	return n
}

// maxMessages is how many distinct error messages a summary keeps; the
// rest are counted under "other", as metrics does.
const maxMessages = 20

// addSummary adds s into into: counts, bytes and rates add up, the mean
// is weighted by the counts, and each percentile and the maximum is the
// larger of the two, an upper bound of the merged one (a mixture's
// quantile lies between its parts').
func addSummary(into *metrics.Summary, s metrics.Summary) {
	if total := add(into.Count, s.Count); total > 0 {
		into.MeanMs = (into.MeanMs*float64(into.Count) + s.MeanMs*float64(s.Count)) / float64(total)
	}
	into.Count = add(into.Count, s.Count)
	into.Errors = add(into.Errors, s.Errors)
	into.Timeouts = add(into.Timeouts, s.Timeouts)
	into.Canceled = add(into.Canceled, s.Canceled)
	into.BytesIn = add(into.BytesIn, s.BytesIn)
	into.BytesOut = add(into.BytesOut, s.BytesOut)
	into.BodyIn = add(into.BodyIn, s.BodyIn)
	into.HTTP2 = add(into.HTTP2, s.HTTP2)
	into.NoRequest = add(into.NoRequest, s.NoRequest)
	into.RPS += s.RPS
	into.P50Ms, into.P90Ms, into.P95Ms = max(into.P50Ms, s.P50Ms), max(into.P90Ms, s.P90Ms), max(into.P95Ms, s.P95Ms)
	into.P99Ms, into.MaxMs = max(into.P99Ms, s.P99Ms), max(into.MaxMs, s.MaxMs)
	for k, v := range s.Status {
		if into.Status == nil {
			into.Status = map[string]int64{}
		}
		into.Status[k] = add(into.Status[k], v)
	}
	for k, v := range s.Messages {
		if into.Messages == nil {
			into.Messages = map[string]int64{}
		}
		if _, ok := into.Messages[k]; !ok && len(into.Messages) >= maxMessages {
			k = "other"
		}
		into.Messages[k] = add(into.Messages[k], v)
	}
}

// add adds two counts (never negative: validate checked), stopping at the
// largest int64 rather than wrapping.
func add(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// decodeTable decodes a table of histograms.json into to, folding it as
// foldSummaries folds result.json's (by each histogram's count). Names are
// decoded in order, so an error names the same one every time.
func (d *histDecoder) decodeTable(from map[string]string, to map[string]*metrics.Stat) error {
	names := make([]string, 0, len(from))
	for name := range from {
		names = append(names, name)
	}
	slices.Sort(names)
	counts := make([]int64, len(names))
	ends := make([]int, len(names)) // names[i]'s buckets are buckets[ends[i-1]:ends[i]]
	var buckets []bucket
	for i, name := range names {
		var err error
		if buckets, counts[i], err = d.decode(from[name], buckets); err != nil {
			return fmt.Errorf("histogram %q: %w", name, err)
		}
		ends[i] = len(buckets)
	}
	fold := foldSet(names, counts)
	start := 0
	for i, name := range names {
		if fold[i] {
			name = metrics.OtherName
		}
		st := to[name]
		if st == nil {
			st = metrics.NewStat()
			to[name] = st
		}
		if err := addTo(st.Hist(), buckets[start:ends[i]]); err != nil {
			return fmt.Errorf("histogram %q: %w", names[i], err)
		}
		st.Count = st.Hist().TotalCount()
		start = ends[i]
	}
	return nil
}
