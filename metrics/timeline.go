package metrics

import "time"

// Point is one window of the timeline (normally one second). Latencies in
// milliseconds; rates per second; T in seconds since the run started.
type Point struct {
	T            float64 `json:"t"`
	Users        int     `json:"users"`
	Requests     int64   `json:"requests"`
	RPS          float64 `json:"rps"`
	Errors       int64   `json:"errors"`
	Timeouts     int64   `json:"timeouts"`
	MeanMs       float64 `json:"mean_ms"`
	P50Ms        float64 `json:"p50_ms"`
	P95Ms        float64 `json:"p95_ms"`
	P99Ms        float64 `json:"p99_ms"`
	Actions      int64   `json:"actions"`
	ActionErrors int64   `json:"action_errors"`
	// Users past setup at the end of the window (Users counts those
	// still setting up too), and the setup requests that ended in it,
	// which the figures above leave out.
	Ready int `json:"ready"`
	// Degraded: a run on agents lost one in this second, or had not yet
	// set its users up again elsewhere; the second's figures are kept out
	// of the window's, the levels' and the ceiling's (result.Agents).
	Degraded      bool  `json:"degraded,omitempty"`
	SetupRequests int64 `json:"setup_requests,omitempty"`
	SetupErrors   int64 `json:"setup_errors,omitempty"`
	// Connected users: WebSocket connections open at the end of the
	// window (set by whoever keeps the cumulative snapshot: see
	// Snapshot.OpenSockets), messages in and out, reconnect attempts and
	// abnormal closes in it; delivery latencies and long polls ended in it.
	Connections    int64   `json:"connections,omitempty"`
	MessagesIn     int64   `json:"messages_in,omitempty"`
	MessagesOut    int64   `json:"messages_out,omitempty"`
	Reconnects     int64   `json:"reconnects,omitempty"`
	AbnormalCloses int64   `json:"abnormal_closes,omitempty"`
	Deliveries     int64   `json:"deliveries,omitempty"`
	DeliveryP99Ms  float64 `json:"delivery_p99_ms,omitempty"`
	Polls          int64   `json:"polls,omitempty"`
	// The open model: arrivals started and dropped in the window, and
	// how many of those started were late (past LateArrival).
	Arrivals int64 `json:"arrivals,omitempty"`
	Dropped  int64 `json:"dropped,omitempty"`
	Late     int64 `json:"late,omitempty"`
	// The generator's own schedule in the window (Snapshot.Wakes, sealed):
	// the 99th percentile of how late its starts fired, and the most that
	// started in any 10 ms and 100 ms, as they did and as meant.
	LateP99Ms float64 `json:"late_p99_ms,omitempty"`
	Max10ms   int64   `json:"max_starts_10ms,omitempty"`
	Max100ms  int64   `json:"max_starts_100ms,omitempty"`
	Meant10ms int64   `json:"meant_starts_10ms,omitempty"`
	Meant100  int64   `json:"meant_starts_100ms,omitempty"`
}

// PointOf reduces an interval snapshot to a timeline point. scratch is
// reused to merge all request names; it is reset first.
func PointOf(s *Snapshot, since time.Time, users, ready int, scratch *Stat) Point {
	window := s.End.Sub(s.Start)
	req := s.Total(Request, scratch).Summarize("", window)
	p := Point{
		T:     s.End.Sub(since).Seconds(),
		Users: users, Requests: req.Count, RPS: req.RPS, Errors: req.Errors, Timeouts: req.Timeouts,
		MeanMs: req.MeanMs, P50Ms: req.P50Ms, P95Ms: req.P95Ms, P99Ms: req.P99Ms, Ready: ready,
	}
	if s.Setup != nil {
		for _, st := range s.Setup.Requests {
			p.SetupRequests += st.Count
			p.SetupErrors += st.Errors + st.Timeouts
		}
	}
	for _, st := range s.Actions {
		p.Actions += st.Count
		p.ActionErrors += st.Errors + st.Timeouts
	}
	for _, st := range s.Sockets {
		p.MessagesIn += Totals(st.In).Messages
		p.MessagesOut += Totals(st.Out).Messages
		p.Reconnects += st.Reconnects
		p.AbnormalCloses += st.Abnormal
	}
	for _, st := range s.Polls {
		p.Polls += st.Count
	}
	for _, st := range s.Arrivals {
		p.Arrivals += st.Count
		p.Dropped += st.Dropped
		p.Late += st.Above(LateArrival)
	}
	if len(s.Deliveries) > 0 {
		d := s.Total(Delivery, scratch)
		p.Deliveries = d.Count
		if d.Count > 0 {
			p.DeliveryP99Ms = float64(d.Percentile(99)) / 1000
		}
	}
	if w := s.Wakes; w != nil && w.Late.Count > 0 {
		p.LateP99Ms = float64(w.Late.Percentile(99)) / 1000
		p.Max10ms, p.Max100ms, p.Meant10ms, p.Meant100 = w.Peak.Max10, w.Peak.Max100, w.Peak.Meant10, w.Peak.Meant100
	}
	return p
}
