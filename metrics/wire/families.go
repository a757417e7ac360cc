package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// The exposition of a run on agents: each agent's Prom observes its own
// samples exactly as one process's does, the agent sends its families to
// the coordinator once a second (EncodeFamilies), and the coordinator's
// Prom serves and checks their sum (SumFamilies) beside its own: counters
// and histograms add up, so the sum is what one process would expose.

// EncodeFamilies is families in Prometheus's length-delimited protobuf
// format, leaving out those named in skip.
func EncodeFamilies(families []*dto.MetricFamily, skip ...string) ([]byte, error) {
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeProtoDelim))
	for _, mf := range families {
		if slices.Contains(skip, mf.GetName()) {
			continue
		}
		if err := enc.Encode(mf); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// maxFamilies bounds what DecodeFamilies reads: MaxNames names of each of
// about twenty families, and some room.
const maxFamilies = 256

// DecodeFamilies reads what EncodeFamilies wrote.
func DecodeFamilies(b []byte) ([]*dto.MetricFamily, error) {
	dec := expfmt.NewDecoder(bytes.NewReader(b), expfmt.NewFormat(expfmt.TypeProtoDelim))
	var out []*dto.MetricFamily
	for {
		mf := &dto.MetricFamily{}
		err := dec.Decode(mf)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(out) == maxFamilies {
			return nil, fmt.Errorf("more than %d metric families", maxFamilies)
		}
		out = append(out, mf)
	}
}
