// Package live is the live view (--ui): a run as a page people watch
// while it goes. The run's goroutine hands it each tick (Tick); when a
// browser watches, it builds the page's content as the run's report
// builds its own (report.Live, report.Fragment) and sends it to every
// browser over server-sent events; the charts are drawn by the page's own
// script. When the run ends, the page becomes the run's HTML report
// (Finish). Nothing the page does reaches the run: it is read-only, and a
// slow or gone browser loses updates, never slows a tick.
package live

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headroom-dev/headroom/internal/rusage"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/report"
	"github.com/headroom-dev/headroom/runner"
)

// Window is the seconds the page's tables cover at least: the last 5 to
// 10 (see View.cur).
const Window = 5

// keptEvents is how many of the terminal's own lines the page lists.
const keptEvents = 8

// maxPoints is the most points a chart's series sends: a longer timeline
// is sent as that many buckets, each its largest value (a spike stays).
const maxPoints = 200

// View is a run's live view. Tick is called on the run's goroutine;
// Status and Event from wherever progress is printed; all are safe
// together.
type View struct {
	hub *hub

	// The tables' span is the seconds since the last turn (cur, up to
	// Window of them) and the Window before it (prev): 1 to 2 Windows.
	// A second is merged into cur and span; at a turn span starts again
	// from prev. About two merges a tick where a ring of the last Window
	// seconds took Window + 1 (measured: 4 ms of a 7.5 ms tick at 200
	// request names).
	cur, prev, span              *metrics.Snapshot
	curTotal, prevTotal, spanAll *metrics.Stat // all requests, likewise
	n                            int           // seconds in cur

	mu     sync.Mutex
	status string
	events []string

	cpu   time.Duration // this process's CPU at the last tick
	cpuAt time.Time

	// spent is the time (ns) spent on the page: building updates, and
	// writing them to viewers; updates counts those built.
	spent, updates atomic.Int64
}

// Cost is what the page cost this process so far: the updates built, and
// the time spent building them and writing them to viewers (on a thread
// each, so about their CPU).
func (v *View) Cost() (updates int64, spent time.Duration) {
	return v.updates.Load(), time.Duration(v.spent.Load())
}

// New returns a view with no browser yet.
func New() *View {
	return &View{hub: newHub(), cur: metrics.NewSnapshot(), prev: metrics.NewSnapshot(), span: metrics.NewSnapshot(),
		curTotal: metrics.NewStat(), prevTotal: metrics.NewStat(), spanAll: metrics.NewStat(), cpu: rusage.CPU(), cpuAt: time.Now()}
}

// Status sets the status line the page shows: the terminal's own.
func (v *View) Status(line string) {
	v.mu.Lock()
	v.status = line
	v.mu.Unlock()
}

// Event adds a line the terminal printed on its own (a decision, a level
// done, a warning).
func (v *View) Event(line string) {
	v.mu.Lock()
	v.events = append(v.events, line)
	if len(v.events) > keptEvents {
		v.events = v.events[len(v.events)-keptEvents:]
	}
	v.mu.Unlock()
}

// Tick takes one second of the run (runner.Common.OnTick) and, if a
// browser watches, sends the page's new content. A tick that holds no
// second (a run stopping) changes nothing.
//
// Unwatched, it keeps nothing: the seconds are kept from a browser's
// arrival on, so the first tables it sees cover fewer seconds.
func (v *View) Tick(t runner.Tick) {
	if t.Interval == nil {
		return
	}
	now := time.Now()
	cpu := rusage.CPU()
	cpuPct := 100 * (cpu - v.cpu).Seconds() / max(now.Sub(v.cpuAt).Seconds(), 1e-9)
	v.cpu, v.cpuAt = cpu, now
	if !v.hub.watched() {
		v.n = Window // a browser's first second is a turn: nothing from before it
		v.cur.Reset()
		v.curTotal.Reset()
		return
	}
	defer func(t0 time.Time) { v.spent.Add(int64(time.Since(t0))) }(time.Now())
	v.updates.Add(1)
	if v.n == Window { // a turn: cur becomes prev, the span is it and what comes
		v.prev, v.cur, v.prevTotal, v.curTotal = v.cur, v.prev, v.curTotal, v.prevTotal
		v.cur.Reset()
		v.curTotal.Reset()
		v.span.Reset()
		v.spanAll.Reset()
		v.span.Merge(v.prev)
		v.spanAll.Merge(v.prevTotal)
		v.n = 0
	}
	v.cur.Merge(t.Interval)
	v.span.Merge(t.Interval)
	if t.Total != nil {
		v.curTotal.Merge(t.Total)
		v.spanAll.Merge(t.Total)
	}
	v.n++
	total := v.spanAll
	if t.Total == nil {
		total = nil
	}
	v.mu.Lock()
	st := report.LiveState{Status: v.status, Events: append([]string(nil), v.events...), Last: v.span, Total: total, Agents: t.Agents,
		Generator: generator(cpuPct, t), Dropped: v.hub.droppedFrames()}
	v.mu.Unlock()
	d := report.Live(t.Res, st)
	f, err := encode(d)
	if err != nil {
		f = event(head{}, []byte("<p>"+html.EscapeString(err.Error())+"</p>"))
	}
	v.hub.publish(f)
}

// generator is this process's own line: its CPU over the last second, and
// how late and bunched its schedule was in it.
func generator(cpuPct float64, t runner.Tick) string {
	s := fmt.Sprintf("headroom: CPU %.0f%% of a core (%d cores)", cpuPct, runtime.GOMAXPROCS(0))
	if p := t.Last; p.LateP99Ms > 0 || p.Max10ms > 0 {
		s += fmt.Sprintf("; its starts in the last second: p99 %.2f ms late, at most %d in 10 ms (%d meant)", p.LateP99Ms, p.Max10ms, p.Meant10ms)
	}
	return s + "."
}

// Finish sends the run's report page (report.HTML) to every browser, which
// shows it in place of the live page, and keeps it for any that comes
// later while the server still runs.
func (v *View) Finish(page []byte) {
	f := event(head{Report: true}, page)
	v.hub.finish(f)
}

// An update is one server-sent event: its first line a JSON head (the
// charts' points, or {"report":true}), the rest the HTML to show (the
// body's fragment, or the report's page). The HTML is sent as it is, not
// as a JSON string: escaping 60 KB again cost a third of an update.
type head struct {
	Charts []chart `json:"charts,omitempty"`
	Report bool    `json:"report,omitempty"`
}

type chart struct {
	Name   string   `json:"name"`
	Title  string   `json:"title"`
	XLabel string   `json:"x"`
	YLabel string   `json:"y"`
	Series []series `json:"series"`
}

type series struct {
	Name   string `json:"name"`
	Dashed bool   `json:"dashed,omitempty"`
	Points points `json:"points"`
}

// points are x, y pairs, flat; NaN (no value) is null. Written by hand:
// json re-reads what a MarshalJSON returns.
type points []float64

func (p points) append(b []byte) []byte {
	b = append(b, '[')
	for i, f := range p {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			b = append(b, "null"...)
		} else {
			b = strconv.AppendFloat(b, f, 'g', 6, 64)
		}
	}
	return append(b, ']')
}

// appendJSON is h as JSON: the texts through encoding/json, the points
// by hand.
func (h head) appendJSON(b []byte) []byte {
	str := func(s string) {
		q, _ := json.Marshal(s)
		b = append(b, q...)
	}
	if h.Report {
		return append(b, `{"report":true}`...)
	}
	b = append(b, `{"charts":[`...)
	for i, c := range h.Charts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		str(c.Name)
		b = append(b, `,"title":`...)
		str(c.Title)
		b = append(b, `,"x":`...)
		str(c.XLabel)
		b = append(b, `,"y":`...)
		str(c.YLabel)
		b = append(b, `,"series":[`...)
		for j, s := range c.Series {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":`...)
			str(s.Name)
			b = strconv.AppendBool(append(b, `,"dashed":`...), s.Dashed)
			b = s.Points.append(append(b, `,"points":`...))
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	return append(b, "]}"...)
}

// event is h and body as one server-sent event: every line "data: "; a
// carriage return in body (which would end a line) becomes a space.
func event(h head, body []byte) []byte {
	b := make([]byte, 0, len(body)+len(body)/40+4096)
	b = h.appendJSON(append(b, "data: "...))
	b = append(b, '\n')
	for line := range bytes.Lines(body) {
		b = append(b, "data: "...)
		line = bytes.TrimRight(line, "\n")
		start := len(b)
		b = append(b, line...)
		for i := start; i < len(b); i++ {
			if b[i] == '\r' {
				b[i] = ' '
			}
		}
		b = append(b, '\n')
	}
	return append(b, '\n')
}

// encode is d as an update: its charts' points, its HTML fragment.
func encode(d *report.Doc) ([]byte, error) {
	body, err := report.Fragment(d)
	if err != nil {
		return nil, err
	}
	var h head
	for _, b := range d.Blocks {
		c, ok := b.(*report.Chart)
		if !ok {
			continue
		}
		ch := chart{Name: c.Name, Title: c.Title, XLabel: c.XLabel, YLabel: c.YLabel}
		for _, s := range c.Series {
			ch.Series = append(ch.Series, series{Name: s.Name, Dashed: s.Dashed, Points: bucket(s.X, s.Y, maxPoints)})
		}
		h.Charts = append(h.Charts, ch)
	}
	return event(h, body), nil
}

// bucket is x, y as at most n points: consecutive ones grouped, each group
// its last x and its largest y (NaN when it has none).
func bucket(x, y []float64, n int) points {
	k := (len(x) + n - 1) / max(n, 1)
	k = max(k, 1)
	out := make(points, 0, 2*(len(x)/k+1))
	for i := 0; i < len(x); i += k {
		j := min(i+k, len(x))
		top := math.NaN()
		for _, v := range y[i:j] {
			if !math.IsNaN(v) && (math.IsNaN(top) || v > top) {
				top = v
			}
		}
		out = append(out, x[j-1], top)
	}
	return out
}
