package wire

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
)

// mix says which kinds of samples randomSamples makes, and how varied.
type mix struct {
	names, types, kinds int     // request names, message types, error kinds per name
	failed, setup       float64 // shares of samples
	sockets             bool
}

var mixes = []mix{
	{names: 3, types: 2, kinds: 2, failed: 0.05, setup: 0.1, sockets: true},
	{names: 40, types: 8, kinds: 6, failed: 0.3, setup: 0.02, sockets: true},
	{names: 60, types: 1, kinds: 1, failed: 0.01},
	{names: 1, types: 20, kinds: 15, failed: 0.5, setup: 0.5, sockets: true},
}

// randomSamples returns n samples of every kind, with latencies from 0 to
// 2 s (log-uniform) and now and then past the histogram's range, statuses, failures with
// messages that carry durations, byte counts and ports, timeouts and
// cancels; arrivals started, dropped and canceled, and requests and
// actions of the open model (Sample.Intended).
func randomSamples(r *rand.Rand, m mix, n int) []metrics.Sample {
	out := make([]metrics.Sample, 0, n)
	latency := func() time.Duration {
		if r.IntN(500) == 0 { // past the histogram's range: its top bucket
			return time.Duration(r.Int64N(int64(3 * time.Hour)))
		}
		return time.Duration(math.Pow(10, 1+8.3*r.Float64())) // 10 ns to 2 s
	}
	message := func() string {
		switch k := r.IntN(m.kinds); k % 4 {
		case 0:
			return fmt.Sprintf("timeout after %v (kind %d)", time.Duration(r.Int64N(3e10)), k)
		case 1:
			return fmt.Sprintf("response body of %d bytes is too large (kind %d)", r.Int64N(1e9), k)
		case 2:
			return fmt.Sprintf("read tcp 127.0.0.1:%d->10.0.0.1:80: connection reset (kind %d)", 1024+r.IntN(60000), k)
		default:
			return "status 503 (kind " + strconv.Itoa(k) + ")"
		}
	}
	for len(out) < n {
		name := "GET /" + strconv.Itoa(r.IntN(m.names))
		x := metrics.Sample{Name: name, Latency: latency(), Status: []int{200, 200, 200, 201, 404, 0}[r.IntN(6)],
			BytesIn: r.Int64N(1e5), BytesOut: r.Int64N(1e3), BodyIn: r.Int64N(1e6), HTTP2: r.IntN(2) == 0, Setup: r.Float64() < m.setup}
		if r.Float64() < m.failed {
			x.Outcome = []metrics.Outcome{metrics.Failed, metrics.Failed, metrics.Timeout, metrics.Canceled}[r.IntN(4)]
			x.Message, x.Status = message(), []int{500, 503, 0}[r.IntN(3)]
		}
		switch k := metrics.Kind(r.IntN(int(metrics.Arrival) + 1)); {
		case k <= metrics.Action || k == metrics.Poll || k == metrics.Delivery:
			x.Kind = k
			if k == metrics.Action {
				x.Name, x.Requests = "act "+strconv.Itoa(r.IntN(5)), r.IntN(3)
			}
			if k <= metrics.Action && !x.Setup && r.IntN(3) == 0 {
				x.Intended, x.Service = true, time.Duration(r.Int64N(int64(x.Latency)+1))
			}
		case k == metrics.Arrival:
			x = metrics.Sample{Kind: metrics.Arrival, Name: "(arrivals)", Latency: latency()}
			switch r.IntN(10) {
			case 0, 1:
				x.Outcome = metrics.DroppedArrival
			case 2:
				x.Outcome = metrics.Canceled
			}
		case m.sockets:
			x = metrics.Sample{Kind: k, Name: "WS /" + strconv.Itoa(r.IntN(3)), Type: "t" + strconv.Itoa(r.IntN(m.types)),
				BytesIn: r.Int64N(1e4), BytesOut: r.Int64N(1e4), N: r.Int64N(5)}
			if k == metrics.Closed && r.IntN(2) == 0 {
				x.Outcome, x.Message = metrics.Failed, message()
			}
		default:
			x.Kind = metrics.Request
		}
		if x.Kind == metrics.Request && r.IntN(2) == 0 {
			x.Timed = uint8(r.IntN(1 << metrics.NumPhases))
			for p := range metrics.NumPhases {
				x.Phases[p] = time.Duration(r.Int64N(int64(x.Latency)/5 + 1))
			}
		}
		out = append(out, x)
	}
	return out
}

// randomSnapshot is a snapshot of samples of mix m, numbered and timed.
func randomSnapshot(r *rand.Rand, m mix, n int) *metrics.Snapshot {
	s := metrics.NewSnapshot()
	for _, x := range randomSamples(r, m, n) {
		s.Add(&x)
	}
	s.Seq = r.Uint64()
	s.Start = time.Unix(1_700_000_000+r.Int64N(1e6), r.Int64N(1e9))
	s.End = s.Start.Add(time.Duration(r.Int64N(2e9)))
	if r.IntN(4) > 0 { // starts over the window, some late
		rec := metrics.NewRecorder(1, nil, func() time.Time { return s.End })
		for range r.IntN(500) {
			at := s.Start.Add(time.Duration(r.Int64N(1e9)))
			rec.Shard(0).Wake(at.Add(-time.Duration(r.ExpFloat64()*float64(5*time.Millisecond))), at)
		}
		woke := metrics.NewSnapshot()
		rec.Drain(woke)
		s.Wakes = woke.Wakes
	}
	return s
}

// kinds are the kinds of the tables of Stats (tables), in their order.
var kinds = [...]metrics.Kind{metrics.Request, metrics.Action, metrics.Poll, metrics.Delivery, metrics.Arrival}

// snapshotDiff lists how a and b differ, in every field of every table; a
// name that counted nothing is as good as absent, as Merge has it.
func snapshotDiff(a, b *metrics.Snapshot) []string {
	var out []string
	if a.Seq != b.Seq || !a.Start.Equal(b.Start) || !a.End.Equal(b.End) {
		out = append(out, fmt.Sprintf("seq %d vs %d, window %v–%v vs %v–%v", a.Seq, b.Seq, a.Start, a.End, b.Start, b.End))
	}
	out = append(out, tablesDiff("", a, b)...)
	switch {
	case (a.Setup == nil) != (b.Setup == nil):
		out = append(out, fmt.Sprintf("setup %v vs %v", a.Setup != nil, b.Setup != nil))
	case a.Setup != nil:
		out = append(out, tablesDiff("setup: ", a.Setup, b.Setup)...)
		out = append(out, phasesDiff("setup ", a.Setup, b.Setup)...)
	}
	switch {
	case (a.Wakes == nil || !a.Wakes.Late.Counted()) != (b.Wakes == nil || !b.Wakes.Late.Counted()):
		out = append(out, fmt.Sprintf("wakes %v vs %v", a.Wakes != nil, b.Wakes != nil))
	case a.Wakes != nil && a.Wakes.Late.Counted():
		if d := statDiff(a.Wakes.Late, b.Wakes.Late); d != "" {
			out = append(out, "wakes: "+d)
		}
		if !maps.Equal(a.Wakes.Slots, b.Wakes.Slots) {
			out = append(out, fmt.Sprintf("wakes: %d slots vs %d", len(a.Wakes.Slots), len(b.Wakes.Slots)))
		}
	}
	switch {
	case (a.Service == nil) != (b.Service == nil):
		out = append(out, fmt.Sprintf("service %v vs %v", a.Service != nil, b.Service != nil))
	case a.Service != nil:
		out = append(out, tablesDiff("service: ", a.Service, b.Service)...)
	}
	return append(out, phasesDiff("", a, b)...)
}

// phasesDiff lists how a's and b's phases differ.
func phasesDiff(prefix string, a, b *metrics.Snapshot) []string {
	var out []string
	for p := range metrics.NumPhases {
		switch pa, pb := a.Phases[p], b.Phases[p]; {
		case (pa == nil) != (pb == nil):
			out = append(out, fmt.Sprintf("%sphase %s %v vs %v", prefix, metrics.PhaseNames[p], pa != nil, pb != nil))
		case pa != nil:
			out = append(out, tablesDiff(prefix+"phase "+metrics.PhaseNames[p]+": ", pa, pb)...)
		}
	}
	return out
}

func tablesDiff(prefix string, a, b *metrics.Snapshot) []string {
	var out []string
	ta, tb := tables(a), tables(b)
	for i, k := range kinds {
		ta, tb := ta[i], tb[i]
		for _, name := range union(ta, tb) {
			x, y := ta[name], tb[name]
			if x == nil {
				x = metrics.NewStat()
			}
			if y == nil {
				y = metrics.NewStat()
			}
			if d := statDiff(x, y); d != "" {
				out = append(out, fmt.Sprintf("%skind %d %q: %s", prefix, k, name, d))
			}
		}
	}
	for _, name := range union(a.Sockets, b.Sockets) {
		x, y := a.Sockets[name], b.Sockets[name]
		if x == nil {
			x = metrics.NewSocketStat()
		}
		if y == nil {
			y = metrics.NewSocketStat()
		}
		same := func(f, g *metrics.Flow) bool { return *f == *g }
		if x.Opened != y.Opened || x.Closed != y.Closed || x.Abnormal != y.Abnormal || x.Reconnects != y.Reconnects ||
			x.Gaps != y.Gaps || x.Missed != y.Missed || x.Dropped != y.Dropped ||
			!maps.EqualFunc(x.In, y.In, same) || !maps.EqualFunc(x.Out, y.Out, same) || !maps.Equal(x.Reasons, y.Reasons) {
			out = append(out, fmt.Sprintf("%ssocket %q: %+v vs %+v", prefix, name, x.Summarize(name, 0), y.Summarize(name, 0)))
		}
	}
	return out
}

func statDiff(x, y *metrics.Stat) string {
	fx := [...]int64{x.Count, x.Errors, x.Timeouts, x.Canceled, x.Dropped, x.BytesIn, x.BytesOut, x.BodyIn, x.HTTP2, x.NoRequest}
	fy := [...]int64{y.Count, y.Errors, y.Timeouts, y.Canceled, y.Dropped, y.BytesIn, y.BytesOut, y.BodyIn, y.HTTP2, y.NoRequest}
	switch {
	case fx != fy:
		return fmt.Sprintf("counts %v vs %v", fx, fy)
	case !maps.Equal(x.Status, y.Status):
		return fmt.Sprintf("statuses %v vs %v", x.Status, y.Status)
	case !maps.Equal(x.Messages, y.Messages):
		return fmt.Sprintf("error kinds %v vs %v", x.Messages, y.Messages)
	case !x.Hist().Equals(y.Hist()):
		return fmt.Sprintf("histograms differ: %d values, p50 %d, max %d vs %d, %d, %d", x.Hist().TotalCount(),
			x.Hist().ValueAtPercentile(50), x.Hist().Max(), y.Hist().TotalCount(), y.Hist().ValueAtPercentile(50), y.Hist().Max())
	}
	return ""
}

// union returns the names of a and b that counted something, sorted.
func union[S interface {
	*metrics.Stat | *metrics.SocketStat
}](a, b map[string]S) []string {
	var out []string
	for _, m := range []map[string]S{a, b} {
		for name, st := range m {
			if !counted(st) {
				continue
			}
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func counted[S interface {
	*metrics.Stat | *metrics.SocketStat
}](st S) bool {
	switch st := any(st).(type) {
	case *metrics.Stat:
		return st.Counted()
	case *metrics.SocketStat:
		return !st.Empty()
	}
	return false
}

func TestWireRoundTrip(t *testing.T) {
	for seed := range 5 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		s := randomSnapshot(r, mixes[seed%len(mixes)], 100+r.IntN(3000))
		if seed == 0 {
			s.Setup, s.Service = nil, nil
		}
		if seed == 1 {
			s.Start, s.End = time.Time{}, time.Time{}
		}
		b := AppendSnapshot([]byte("prefix"), s)
		if string(b[:6]) != "prefix" {
			t.Fatal("AppendSnapshot did not append")
		}
		got := metrics.NewSnapshot()
		seq, err := MergeEncoded(b[6:], got)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if seq != s.Seq {
			t.Errorf("seed %d: seq %d, want %d", seed, seq, s.Seq)
		}
		for _, d := range snapshotDiff(s, got) {
			t.Errorf("seed %d: %s", seed, d)
		}
		if !reflect.DeepEqual(s.Summaries(metrics.Request, time.Second), got.Summaries(metrics.Request, time.Second)) {
			t.Errorf("seed %d: request summaries differ", seed)
		}
	}
}

// TestMergeEncodedIsMerge: merging an encoding into a snapshot that holds
// figures already does what Merge does, the folding of error kinds, close
// reasons and message types past their bounds included.
func TestMergeEncodedIsMerge(t *testing.T) {
	for seed := range 4 {
		r := rand.New(rand.NewPCG(uint64(seed), 8))
		m := mixes[seed%len(mixes)]
		a, o := randomSnapshot(r, m, 2000), randomSnapshot(r, m, 2000)
		if seed%2 == 1 { // a is full: every kind, reason and type new to it goes to "other"
			for i := range metrics.MaxMessages {
				a.Add(&metrics.Sample{Name: "GET /0", Outcome: metrics.Failed, Message: "full " + strconv.Itoa(i)})
				a.Add(&metrics.Sample{Kind: metrics.Closed, Name: "WS /0", Outcome: metrics.Failed, Message: "full " + strconv.Itoa(i)})
			}
			for i := range metrics.MaxTypes {
				a.Add(&metrics.Sample{Kind: metrics.MessageIn, Name: "WS /0", Type: "full " + strconv.Itoa(i)})
			}
		}
		// Two copies of a that kept the same kinds: folding depends on
		// the order kinds come in, which a map's is not.
		want, got := metrics.NewSnapshot(), metrics.NewSnapshot()
		for _, c := range []*metrics.Snapshot{want, got} {
			if _, err := MergeEncoded(AppendSnapshot(nil, a), c); err != nil {
				t.Fatal(err)
			}
		}
		want.Merge(o)
		if _, err := MergeEncoded(AppendSnapshot(nil, o), got); err != nil {
			t.Fatal(err)
		}
		want.Seq = max(a.Seq, o.Seq) // Merge leaves Seq be
		for _, d := range snapshotDiff(want, got) {
			t.Errorf("seed %d: %s", seed, d)
		}
	}
}

// TestAgentsMergeAsOneRecorder is issue 13's property: samples recorded by
// N agents, each drained every second, encoded and merged at a
// coordinator, one by one or all at once, give the figures one recorder
// of them all gives.
func TestAgentsMergeAsOneRecorder(t *testing.T) {
	for seed := range 3 {
		for _, agents := range []int{1, 3, 8} {
			r := rand.New(rand.NewPCG(uint64(seed), uint64(agents)))
			m := mixes[(seed+agents)%len(mixes)]
			m.names = min(m.names, 6) // every name costs a histogram per shard: 184 KB, slow to free under -race
			clock := time.Unix(1_700_000_000, 0)
			now := func() time.Time { return clock }
			one := metrics.NewRecorder(2, nil, now)
			recs := make([]*metrics.Recorder, agents)
			for i := range recs {
				recs[i] = metrics.NewRecorder(1, nil, now)
			}
			each, all, alone, drained := metrics.NewSnapshot(), metrics.NewSnapshot(), metrics.NewSnapshot(), metrics.NewSnapshot()
			for range 1 + r.IntN(3) {
				for _, x := range randomSamples(r, m, 100+r.IntN(1500)) {
					recs[r.IntN(agents)].Shard(r.Int()).Record(x)
					one.Shard(r.Int()).Record(x)
				}
				clock = clock.Add(time.Second)
				encs := make([][]byte, agents)
				for i, rec := range recs {
					drained.Reset()
					rec.Drain(drained)
					encs[i] = AppendSnapshot(nil, drained)
					if _, err := MergeEncoded(encs[i], each); err != nil {
						t.Fatal(err)
					}
				}
				if _, errs := MergeEncodedAll(encs, all); errors.Join(errs...) != nil {
					t.Fatal(errs)
				}
				drained.Reset()
				one.Drain(drained)
				alone.Merge(drained)
			}
			for _, c := range []struct {
				how         string
				coordinator *metrics.Snapshot
			}{{"one by one", each}, {"all at once", all}} {
				c.coordinator.Seq = 0
				for _, d := range snapshotDiff(alone, c.coordinator) {
					t.Errorf("seed %d, %d agents merged %s: %s", seed, agents, c.how, d)
				}
				for _, k := range kinds {
					if x, y := alone.Summaries(k, time.Second), c.coordinator.Summaries(k, time.Second); !reflect.DeepEqual(x, y) {
						t.Errorf("seed %d, %d agents merged %s, kind %d: summaries (p50, p90, p99, max) differ:\n%+v\n%+v", seed, agents, c.how, k, x, y)
					}
				}
				if x, y := alone.SocketSummaries(time.Second), c.coordinator.SocketSummaries(time.Second); !reflect.DeepEqual(x, y) {
					t.Errorf("seed %d, %d agents merged %s: socket summaries differ:\n%+v\n%+v", seed, agents, c.how, x, y)
				}
			}
		}
	}
}

// TestMergeEncodedAllIsOneByOne: merging snapshots all at once is merging
// them one by one, the folding of error kinds into "other" included (it
// depends on their order), and a snapshot refused is left out whole.
func TestMergeEncodedAllIsOneByOne(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	m := mixes[3] // one name: many kinds of error on it
	m.kinds = 30  // past MaxMessages, so that some fold
	var encs [][]byte
	for i := range 6 {
		encs = append(encs, AppendSnapshot(nil, randomSnapshot(r, m, 800)))
		if i == 2 {
			bad := AppendSnapshot(nil, randomSnapshot(r, m, 800))
			encs = append(encs, bad[:len(bad)-1])
		}
	}
	want := metrics.NewSnapshot()
	var wantSeqs []uint64
	for _, e := range encs {
		seq, _ := MergeEncoded(e, want)
		wantSeqs = append(wantSeqs, seq)
	}
	got := metrics.NewSnapshot()
	seqs, errs := MergeEncodedAll(encs, got)
	for i, err := range errs {
		if (err != nil) != (i == 3) || seqs[i] != wantSeqs[i] {
			t.Errorf("snapshot %d: seq %d (want %d), error %v", i, seqs[i], wantSeqs[i], err)
		}
	}
	if len(want.Requests["GET /0"].Messages) != metrics.MaxMessages+1 {
		t.Fatalf("%d error kinds: none folded into other", len(want.Requests["GET /0"].Messages))
	}
	for _, d := range snapshotDiff(want, got) {
		t.Error(d)
	}
}

func TestAppendSnapshotCutsLongNames(t *testing.T) {
	long := strings.Repeat("é", maxString) // 2 bytes each: cut at a character
	s := metrics.NewSnapshot()
	for _, name := range []string{long + "a", long + "b", "short"} {
		s.Add(&metrics.Sample{Name: name, Status: 200, Latency: time.Millisecond, Outcome: metrics.Failed, Message: long + name})
		s.Add(&metrics.Sample{Kind: metrics.MessageIn, Name: name, Type: long + name})
	}
	got := metrics.NewSnapshot()
	if _, err := MergeEncoded(AppendSnapshot(nil, s), got); err != nil {
		t.Fatal(err)
	}
	cutName := long[:maxString]
	st := got.Requests[cutName]
	if len(got.Requests) != 2 || st == nil || st.Count != 2 || st.Hist().TotalCount() != 2 || st.Messages[cutName].Count != 2 {
		t.Errorf("names alike in their first %d bytes were not merged: %d names, %+v", maxString, len(got.Requests), st)
	}
	if f := got.Sockets[cutName]; f == nil || f.In[cutName] == nil || f.In[cutName].Messages != 2 {
		t.Errorf("connection names or types alike once cut were not merged")
	}
}
