package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/report"
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
		if t := report.TypeCounts(s.Types); t != "" {
			fmt.Fprintf(w, "  %s messages: %s\n", s.Name, t)
		}
		for _, r := range report.ByCount(s.Reasons) {
			fmt.Fprintf(w, "  %s abnormal close: %6d  %s\n", s.Name, s.Reasons[r], r)
		}
	}
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
