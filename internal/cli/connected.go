package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// printConnected prints what long polls, deliveries and WebSockets did;
// nothing for a scenario with none.
func printConnected(w io.Writer, c result.Connected) {
	if len(c.Polls) > 0 {
		fmt.Fprintln(w, "\nlong polls (latency is time waited for news: in no request figure or latency check above)")
		table(w, "LONG POLL", c.Polls)
	}
	if len(c.Deliveries) > 0 {
		fmt.Fprintln(w, "\ndeliveries (from delivery.stamp() at the sender to delivery.record() at each receiver)")
		table(w, "DELIVERY", c.Deliveries)
	}
	if len(c.WebSockets) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "WEBSOCKET\topened\tclosed\tabnormal\treconnects\tin/s\tout/s\tKB in\tKB out\tmissed\tdropped\t")
	for _, s := range c.WebSockets {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%.0f\t%.0f\t%d\t%d\t\n", s.Name, s.Opened, s.Closed, s.Abnormal, s.Reconnects,
			s.InPerS, s.OutPerS, float64(s.BytesIn)/1024, float64(s.BytesOut)/1024, s.Missed, s.Dropped)
	}
	tw.Flush()
	for _, s := range c.WebSockets {
		if t := typeCounts(s.Types); t != "" {
			fmt.Fprintf(w, "  %s messages: %s\n", s.Name, t)
		}
		for _, r := range reasons(s.Reasons) {
			fmt.Fprintf(w, "  %s abnormal close: %6d  %s\n", s.Name, s.Reasons[r], r)
		}
	}
}

// typeCounts is "in: posted 1200, typing 30; out: user_typing 30", most first.
func typeCounts(types []metrics.TypeSummary) string {
	var parts []string
	for _, dir := range []string{"in", "out"} {
		n := func(t metrics.TypeSummary) int64 {
			if dir == "in" {
				return t.In
			}
			return t.Out
		}
		ts := append([]metrics.TypeSummary(nil), types...)
		sort.SliceStable(ts, func(i, j int) bool { return n(ts[i]) > n(ts[j]) })
		var each []string
		for _, t := range ts {
			if n(t) > 0 {
				each = append(each, fmt.Sprintf("%s %d", t.Type, n(t)))
			}
		}
		if len(each) > 0 {
			parts = append(parts, dir+": "+strings.Join(each, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

// reasons returns the keys of m, most frequent first.
func reasons(m map[string]int64) []string {
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

// connectedLine is the live line's part for connected users: "" when none.
func connectedLine(p metrics.Point) string {
	if p.Connections == 0 && p.MessagesIn == 0 && p.Polls == 0 {
		return ""
	}
	s := fmt.Sprintf("  ws %d  msgs in/s %d", p.Connections, p.MessagesIn)
	if p.Deliveries > 0 {
		s += "  delivery p99 " + ms(p.DeliveryP99Ms)
	}
	if p.Reconnects > 0 || p.AbnormalCloses > 0 {
		s += fmt.Sprintf("  reconnects %d  abnormal closes %d", p.Reconnects, p.AbnormalCloses)
	}
	return s
}
