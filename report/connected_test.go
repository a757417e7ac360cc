package report

import (
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// Connected users get a section and charts when a run had them, and none otherwise.
func TestConnectedUsersAreShown(t *testing.T) {
	r := fixture(t, "base-1")
	if md := string(Markdown(ForResult(r))); strings.Contains(md, "Connected users") {
		t.Error("a run without WebSockets shows a connected-users section")
	}
	r.Connected = result.Connected{
		Deliveries: []metrics.Summary{{Name: "posted", Count: 1200, P50Ms: 3.5, P99Ms: 41}},
		Polls:      []metrics.Summary{{Name: "GET /sync", Count: 30, MeanMs: 29000}},
		WebSockets: []metrics.SocketSummary{{Name: "WS /api/v4/websocket", Opened: 110, Closed: 12, Abnormal: 2, Reconnects: 12,
			InPerS: 20.5, BytesIn: 4096, Types: []metrics.TypeSummary{{Type: "posted", In: 1200}, {Type: "typing", In: 30}, {Type: "user_typing", Out: 30}},
			Reasons: map[string]int64{"closed: websocket: close 1006 (abnormal closure): unexpected EOF": 2}}},
	}
	for i := range r.Timeline {
		r.Timeline[i].Connections, r.Timeline[i].MessagesIn = 100, 20
		r.Timeline[i].Deliveries, r.Timeline[i].DeliveryP99Ms = 20, 41
	}
	doc := ForResult(r)
	md := string(Markdown(doc))
	mustContain(t, md, "## Connected users")
	// Opened counts only those opened in the window; how many were open
	// comes from the timeline.
	mustContain(t, md, "Open during the window: 100 connections, every second.")
	mustContain(t, md, "WS /api/v4/websocket messages by type: in: posted 1,200, typing 30; out: user_typing 30")
	mustContain(t, md, "abnormal closes: 2 × closed: websocket: close 1006")
	rows := rowsByFirstCell(md)
	if got := strings.Join(rows["WS /api/v4/websocket"], "|"); !strings.HasPrefix(got, "WS /api/v4/websocket|110|12|2|12|") {
		t.Errorf("the WebSocket row: %s", got)
	}
	if rows["posted"] == nil || rows["GET /sync"] == nil {
		t.Errorf("no delivery or long-poll row:\n%s", md)
	}
	charts := map[string]bool{}
	for _, b := range doc.Blocks {
		if c, ok := b.(*Chart); ok {
			charts[c.Name] = true
		}
	}
	if !charts["connected"] || !charts["messages"] || !charts["delivery"] {
		t.Errorf("charts %v: want connected, messages and delivery", charts)
	}
}
