// Package remotewrite sends a run's series to a Prometheus remote-write
// receiver while the run goes (--out-remote-write): what headroom serves at
// /metrics, gathered every interval, stamped, labelled with the run, and
// written as Prometheus remote write 1.0 (a snappy-compressed protobuf
// WriteRequest), so that a short run, a run in CI or one behind NAT is in
// the team's Prometheus without a scrape. What the receiver cannot take now
// is kept and sent again, within a bound; the last gather is sent when the
// run ends. It knows nothing of runs but the labels it is given.
package remotewrite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/snappy"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/prompb"
)

// Defaults and bounds.
const (
	// DefaultInterval is how often the series are gathered and sent.
	DefaultInterval = time.Second
	// MaxPending bounds the samples held for a receiver that does not take
	// them (down, slow, refusing): past it the oldest are dropped, and
	// counted. ~100 bytes each: ~20 MB.
	MaxPending = 200_000
	// maxBatch is the most series one request carries.
	maxBatch = 5_000
	// requestTimeout bounds one request; flushTimeout the last sends, at
	// the run's end.
	requestTimeout = 10 * time.Second
	flushTimeout   = 10 * time.Second
)

// Writer gathers and sends; Run drives it.
type Writer struct {
	URL      *url.URL // the receiver, e.g. http://127.0.0.1:9090/api/v1/write; user:password@ in it is basic auth
	Gather   func() ([]*dto.MetricFamily, error)
	Labels   map[string]string // added to every series: job, instance, run
	Interval time.Duration     // 0: DefaultInterval
	Client   *http.Client      // nil: a plain one
	Warn     func(string)      // told once per reason; may be nil
	Now      func() time.Time  // nil: time.Now

	mu      sync.Mutex
	pending []prompb.TimeSeries // one sample each, oldest first
	stats   Stats
	warned  map[string]bool
}

// Stats is what a Writer did.
type Stats struct {
	Sent, Dropped int64 // samples
	Requests      int64 // requests the receiver took
	Pending       int   // samples not sent yet
	LastErr       string
}

// Run gathers and sends every Interval until ctx ends, then gathers once
// more and sends what it holds, for up to flushTimeout.
func (w *Writer) Run(ctx context.Context) {
	every := w.Interval
	if every <= 0 {
		every = DefaultInterval
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			w.final()
			return
		case <-tick.C:
		}
		w.Collect()
		w.Flush(context.WithoutCancel(ctx))
	}
}

// final gathers once more and sends what is held, trying again a few
// times within flushTimeout.
func (w *Writer) final() {
	w.Collect()
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		if w.Flush(ctx) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Stats says what has been sent, dropped and is held.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Pending = len(w.pending)
	return s
}

// Collect gathers the series now and holds them to be sent, dropping the
// oldest held past MaxPending.
func (w *Writer) Collect() {
	fams, err := w.Gather()
	if err != nil {
		w.warn("gather", fmt.Sprintf("remote write: gathering headroom's series: %v", err))
		return
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	series := Series(fams, w.Labels, now().UnixMilli())
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = append(w.pending, series...)
	if over := len(w.pending) - MaxPending; over > 0 {
		w.pending = slices.Delete(w.pending, 0, over)
		w.stats.Dropped += int64(over)
	}
}

// Flush sends what is held, oldest first, in batches of maxBatch; it
// stops at a batch the receiver could not take now (kept, to be sent
// again) and says whether everything held was sent. A batch the receiver
// refuses for good (a 4xx but 429) is dropped, and counted.
func (w *Writer) Flush(ctx context.Context) bool {
	for {
		w.mu.Lock()
		n := min(len(w.pending), maxBatch)
		batch := slices.Clone(w.pending[:n])
		w.mu.Unlock()
		if n == 0 {
			return true
		}
		err := w.send(ctx, batch)
		var refused refusal
		switch {
		case err == nil:
			w.took(n, false)
		case errors.As(err, &refused):
			w.took(n, true)
			w.warn("refused "+strconv.Itoa(refused.status), "remote write: "+err.Error()+"; those samples are dropped")
		default:
			w.mu.Lock()
			w.stats.LastErr = err.Error()
			w.mu.Unlock()
			w.warn("down", "remote write: "+err.Error()+"; the samples are kept and sent again")
			return false
		}
	}
}

// took removes the n oldest held samples, sent or dropped.
func (w *Writer) took(n int, dropped bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = slices.Delete(w.pending, 0, min(n, len(w.pending)))
	if dropped {
		w.stats.Dropped += int64(n)
		return
	}
	w.stats.Sent += int64(n)
	w.stats.Requests++
}

// refusal is a receiver's answer that sending again will not change.
type refusal struct {
	where  string
	status int
	body   string
}

func (r refusal) Error() string {
	return fmt.Sprintf("%s refused them: %d %s", r.where, r.status, r.body)
}

// send writes one WriteRequest.
func (w *Writer) send(ctx context.Context, ts []prompb.TimeSeries) error {
	raw, err := (&prompb.WriteRequest{Timeseries: ts}).Marshal()
	if err != nil {
		return err
	}
	u := *w.URL
	u.User = nil
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(snappy.Encode(nil, raw)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	req.Header.Set("User-Agent", "headroom")
	if p := w.URL.User; p != nil {
		pw, _ := p.Password()
		req.SetBasicAuth(p.Username(), pw)
	}
	cl := w.Client
	if cl == nil {
		cl = http.DefaultClient
	}
	resp, err := cl.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %v", u.Redacted(), unwrapURL(err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be kept
	switch code := resp.StatusCode; {
	case code/100 == 2:
		return nil
	case code == http.StatusTooManyRequests || code/100 == 5:
		return fmt.Errorf("%s: %d %s", u.Redacted(), code, clean(body))
	default:
		return refusal{u.Redacted(), code, clean(body)}
	}
}

// unwrapURL is err without url.Error's repeat of the method and URL.
func unwrapURL(err error) error {
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// clean is a receiver's answer as one line of printable text.
func clean(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

func (w *Writer) warn(key, msg string) {
	w.mu.Lock()
	first := !w.warned[key]
	if w.warned == nil {
		w.warned = map[string]bool{}
	}
	w.warned[key] = true
	w.mu.Unlock()
	if first && w.Warn != nil {
		w.Warn(msg)
	}
}

// Series is fams as remote write's series, one sample each at ms, extra
// labels added (a family's own label of the same name wins): a counter or
// gauge its value; a histogram its cumulative _bucket{le} series (+Inf
// among them), _sum and _count, as a scrape of its exposition gives them;
// a summary its quantiles, _sum and _count. Labels are sorted by name, as
// the receiver wants them.
func Series(fams []*dto.MetricFamily, extra map[string]string, ms int64) []prompb.TimeSeries {
	var out []prompb.TimeSeries
	for _, f := range fams {
		name := f.GetName()
		for _, m := range f.GetMetric() {
			base := labelsOf(m, extra)
			add := func(suffix string, v float64, more ...prompb.Label) {
				ls := append(slices.Clone(base), prompb.Label{Name: "__name__", Value: name + suffix})
				ls = append(ls, more...)
				slices.SortFunc(ls, func(a, b prompb.Label) int { return strings.Compare(a.Name, b.Name) })
				out = append(out, prompb.TimeSeries{Labels: ls, Samples: []prompb.Sample{{Value: v, Timestamp: ms}}})
			}
			switch {
			case m.Counter != nil:
				add("", m.Counter.GetValue())
			case m.Gauge != nil:
				add("", m.Gauge.GetValue())
			case m.Untyped != nil:
				add("", m.Untyped.GetValue())
			case m.Histogram != nil:
				h := m.Histogram
				for _, b := range h.GetBucket() {
					if !math.IsInf(b.GetUpperBound(), 1) {
						add("_bucket", float64(b.GetCumulativeCount()), prompb.Label{Name: "le", Value: formatFloat(b.GetUpperBound())})
					}
				}
				add("_bucket", float64(h.GetSampleCount()), prompb.Label{Name: "le", Value: "+Inf"})
				add("_sum", h.GetSampleSum())
				add("_count", float64(h.GetSampleCount()))
			case m.Summary != nil:
				s := m.Summary
				for _, q := range s.GetQuantile() {
					add("", q.GetValue(), prompb.Label{Name: "quantile", Value: formatFloat(q.GetQuantile())})
				}
				add("_sum", s.GetSampleSum())
				add("_count", float64(s.GetSampleCount()))
			}
		}
	}
	return out
}

// labelsOf is m's labels and those of extra it does not have.
func labelsOf(m *dto.Metric, extra map[string]string) []prompb.Label {
	var ls []prompb.Label
	own := map[string]bool{}
	for _, lp := range m.GetLabel() {
		ls = append(ls, prompb.Label{Name: lp.GetName(), Value: lp.GetValue()})
		own[lp.GetName()] = true
	}
	for k, v := range extra {
		if !own[k] {
			ls = append(ls, prompb.Label{Name: k, Value: v})
		}
	}
	return ls
}

// formatFloat writes a bound as Prometheus's exposition does.
func formatFloat(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
