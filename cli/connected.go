package cli

import (
	"fmt"

	"github.com/headroom-dev/headroom/metrics"
)

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
