package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// connectedBlocks are the tables of what long polls, deliveries and
// WebSockets did; none for a scenario with none.
// open says how many WebSocket connections were open during the window
// ("" when unknown): opened counts only those opened in it, and a chat
// user's connection is opened in its setup, before the window.
func connectedBlocks(c result.Connected, open string) []Block {
	if len(c.Polls) == 0 && len(c.Deliveries) == 0 && len(c.WebSockets) == 0 {
		return nil
	}
	out := []Block{&Heading{Level: 2, Text: "Connected users"}}
	if len(c.WebSockets) > 0 {
		t := &Table{Header: []string{"connection", "opened", "closed", "abnormal closes", "reconnects", "in/s", "out/s", "KB in", "KB out", "missed", "dropped"},
			Right: []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}
		var notes []string
		for _, s := range c.WebSockets {
			t.Rows = append(t.Rows, []string{s.Name, count(s.Opened), count(s.Closed), count(s.Abnormal), count(s.Reconnects),
				num(s.InPerS), num(s.OutPerS), num(float64(s.BytesIn) / 1024), num(float64(s.BytesOut) / 1024), count(s.Missed), count(s.Dropped)})
			if ty := TypeCounts(s.Types); ty != "" {
				notes = append(notes, s.Name+" messages by type: "+ty)
			}
			for _, r := range ByCount(s.Reasons) {
				notes = append(notes, fmt.Sprintf("%s abnormal closes: %s × %s", s.Name, count(s.Reasons[r]), r))
			}
		}
		out = append(out, &Para{Text: open + "WebSocket connections over the window: opened and closed count those opened and closed in it; closes are abnormal without a close frame 1000 or 1001; " +
			"missed messages are jumps in the sequence field; dropped ones found their user's inbox full (its handlers fell behind)."}, t)
		if len(notes) > 0 {
			out = append(out, &List{Items: notes})
		}
	}
	if len(c.Deliveries) > 0 {
		out = append(out, &Heading{Level: 3, Text: "Deliveries"},
			&Para{Text: "From delivery.stamp() at the sender to the stamped message's arrival at each receiver: the fan-out latency."},
			summaryTable("delivery", c.Deliveries))
	}
	if len(c.Polls) > 0 {
		out = append(out, &Heading{Level: 3, Text: "Long polls"},
			&Para{Text: "Their latency is time waited for news, so it is in no request figure or latency check; their errors count."},
			summaryTable("long poll", c.Polls))
	}
	return out
}

// openDuring says how many WebSocket connections were open during r's
// window, from its timeline (every connection of every name): "" when no
// second of the timeline lies in the window or none was open.
func openDuring(r *result.Result) string {
	lo, hi, n := int64(-1), int64(0), 0
	for _, p := range r.Timeline {
		if p.T <= r.Window.Start || p.T > r.Window.End+1e-9 {
			continue
		}
		if lo < 0 || p.Connections < lo {
			lo = p.Connections
		}
		hi, n = max(hi, p.Connections), n+1
	}
	switch {
	case n == 0 || hi == 0:
		return ""
	case lo == hi:
		return fmt.Sprintf("Open during the window: %s connections, every second. ", count(hi))
	}
	return fmt.Sprintf("Open during the window: %s to %s connections (by the second). ", count(lo), count(hi))
}

// TypeCounts is how a connection's messages by type read: "in: posted 1,200, typing 30; out: user_typing 30", most first.
func TypeCounts(types []metrics.TypeSummary) string {
	var parts []string
	for _, in := range []bool{true, false} {
		n := func(t metrics.TypeSummary) int64 {
			if in {
				return t.In
			}
			return t.Out
		}
		ts := append([]metrics.TypeSummary(nil), types...)
		sort.SliceStable(ts, func(i, j int) bool { return n(ts[i]) > n(ts[j]) })
		var each []string
		for _, t := range ts {
			if n(t) > 0 {
				each = append(each, t.Type+" "+count(n(t)))
			}
		}
		if len(each) > 0 {
			parts = append(parts, map[bool]string{true: "in: ", false: "out: "}[in]+strings.Join(each, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

// byCount returns the keys of m, most frequent first.
func ByCount(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if m[out[i]] != m[out[j]] {
			return m[out[i]] > m[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

// connectedCharts are the timeline charts of connected users, when a run
// had any: connections open, messages per second, delivery p99.
func connectedCharts(prefix string, runs []namedRun) []Block {
	var conns, deliveries bool
	for _, r := range runs {
		for _, p := range r.res.Timeline {
			conns = conns || p.Connections > 0 || p.MessagesIn > 0
			deliveries = deliveries || p.Deliveries > 0
		}
	}
	var out []Block
	add := func(name, title, y string, f func(metrics.Point) float64) {
		c := &Chart{Name: prefix + name, Title: title, XLabel: "time since start (s)", YLabel: y}
		for _, r := range runs {
			c.Series = append(c.Series, series(r.name, r.res.Timeline, f, r.dashed))
		}
		out = append(out, c)
	}
	if conns {
		add("connected", "Connected users (WebSocket connections open)", "connections", func(p metrics.Point) float64 { return float64(p.Connections) })
		add("messages", "WebSocket messages received per second", "messages/s", func(p metrics.Point) float64 { return float64(p.MessagesIn) })
	}
	if deliveries {
		add("delivery", "Delivery p99", "p99 (ms)", func(p metrics.Point) float64 {
			if p.Deliveries == 0 {
				return nanNone
			}
			return p.DeliveryP99Ms
		})
	}
	return out
}
