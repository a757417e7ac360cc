package result

import (
	"fmt"
	"slices"

	"github.com/headroom-dev/headroom/metrics"
)

// decodeTable decodes a table of histograms.json into to. Names are
// decoded in order, so an error names the same one every time.
func (d *histDecoder) decodeTable(from map[string]string, to map[string]*metrics.Stat) error {
	names := make([]string, 0, len(from))
	for name := range from {
		names = append(names, name)
	}
	slices.Sort(names)
	var buckets []bucket
	for _, name := range names {
		var err error
		if buckets, _, err = d.decode(from[name], buckets[:0]); err != nil {
			return fmt.Errorf("histogram %q: %w", name, err)
		}
		st := metrics.NewStat()
		if err := addTo(st.Hist, buckets); err != nil {
			return fmt.Errorf("histogram %q: %w", name, err)
		}
		st.Count = st.Hist.TotalCount()
		to[name] = st
	}
	return nil
}
