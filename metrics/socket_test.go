package metrics

import (
	"fmt"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// connectedSamples is a mix of every connected-user kind.
func connectedSamples() []Sample {
	var out []Sample
	for i := range 3000 {
		name := []string{"WS /a", "WS /b"}[i/10%2]
		out = append(out,
			Sample{Kind: MessageIn, Name: name, Type: []string{"posted", "typing", "hello"}[i%3], BytesIn: int64(100 + i%7)},
			Sample{Kind: Delivery, Name: "posted", Latency: time.Duration(i%50+1) * time.Millisecond},
		)
		switch i % 10 {
		case 0:
			out = append(out, Sample{Kind: Opened, Name: name}, Sample{Kind: MessageOut, Name: name, Type: "user_typing", BytesOut: 40})
		case 1:
			out = append(out, Sample{Kind: Poll, Name: "GET /sync", Status: 200, Latency: 30 * time.Second})
		case 3:
			out = append(out, Sample{Kind: Closed, Name: name, Outcome: Failed, Message: "closed: unexpected EOF"}, Sample{Kind: Reconnect, Name: name})
		case 5:
			out = append(out, Sample{Kind: Closed, Name: name}, Sample{Kind: Gap, Name: name, N: 3}, Sample{Kind: Dropped, Name: name, N: 1})
		}
	}
	return out
}

func TestConnectedKindsMergeExactly(t *testing.T) {
	samples := connectedSamples()
	one := NewSnapshot()
	for i := range samples {
		one.Add(&samples[i])
	}
	now := time.Unix(0, 0)
	rec := NewRecorder(4, nil, func() time.Time { return now })
	total, interval := NewSnapshot(), NewSnapshot()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(samples); i += 8 {
				rec.Shard(w).Record(samples[i])
				if i%1000 == 0 && w == 0 {
					interval.Reset()
					rec.Drain(interval)
					total.Merge(interval)
				}
			}
		}()
	}
	wg.Wait()
	interval.Reset()
	rec.Drain(interval)
	total.Merge(interval)

	if a, b := one.SocketSummaries(time.Second), total.SocketSummaries(time.Second); !reflect.DeepEqual(a, b) {
		t.Errorf("sockets differ:\none %+v\nshards %+v", a, b)
	}
	for _, k := range []Kind{Poll, Delivery} {
		if a, b := one.Summaries(k, time.Second), total.Summaries(k, time.Second); !reflect.DeepEqual(a, b) {
			t.Errorf("kind %d differs:\none %+v\nshards %+v", k, a, b)
		}
	}
	if len(total.Requests) != 0 {
		t.Errorf("long polls or deliveries leaked into requests: %v", Names(total.Requests))
	}
	a := total.SocketSummaries(time.Second)[0]
	if a.Name != "WS /a" || a.Opened != 150 || a.Closed != 300 || a.Abnormal != 150 || a.Reconnects != 150 || a.Missed != 450 || a.Dropped != 150 || a.MessagesIn != 1500 || a.MessagesOut != 150 {
		t.Errorf("WS /a: %+v", a)
	}
	if a.Reasons["closed: unexpected EOF"] != 150 {
		t.Errorf("reasons %v, want 150 unexpected EOF", a.Reasons)
	}
	if n := total.OpenSockets(); n != 300-600 {
		t.Errorf("open %d, want opened - closed = -300", n)
	}
	p := PointOf(interval, time.Unix(0, 0), 0, 0, NewStat())
	if p.Deliveries == 0 || p.DeliveryP99Ms <= 0 || p.MessagesIn == 0 {
		t.Errorf("the last interval's point %+v has no connected figures", p)
	}
}

func TestMessageTypesAreBounded(t *testing.T) {
	s := NewSnapshot()
	for i := range MaxTypes + 20 {
		s.Add(&Sample{Kind: MessageIn, Name: "ws", Type: fmt.Sprint("id-", i), BytesIn: 1})
	}
	in := s.Sockets["ws"].In
	if len(in) != MaxTypes+1 || in[OtherType] == nil || in[OtherType].Messages != 20 {
		t.Errorf("%d types, other %+v; want %d and 20 under %q", len(in), in[OtherType], MaxTypes+1, OtherType)
	}
}

func TestPromExposesConnectedUsers(t *testing.T) {
	p := NewProm()
	for _, x := range connectedSamples() {
		p.Observe(x)
	}
	p.Observe(Sample{Kind: Poll, Name: "GET /sync", Outcome: Failed, Status: 502, Latency: time.Second})
	rr := httptest.NewRecorder()
	p.Handler().ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	body := rr.Body.String()
	posted := 0
	for i := range 3000 {
		if i/10%2 == 0 && i%3 == 0 {
			posted++
		}
	}
	for _, want := range []string{
		"loadtest_websocket_connections -300", // 300 opened, 600 closed: the samples are not a real life
		`loadtest_websocket_closes_total{name="WS /a",outcome="abnormal"} 150`,
		`loadtest_websocket_closes_total{name="WS /a",outcome="normal"} 150`,
		`loadtest_websocket_reconnects_total{name="WS /b"} 150`,
		fmt.Sprintf(`loadtest_websocket_messages_total{direction="in",name="WS /a",type="posted"} %d`, posted),
		`loadtest_websocket_messages_total{direction="out",name="WS /a",type="user_typing"} 150`,
		`loadtest_websocket_missed_total{name="WS /a"} 450`,
		`loadtest_websocket_dropped_total{name="WS /b"} 150`,
		`loadtest_delivery_time_count{name="posted"} 3000`,
		`loadtest_http_poll_time_count{name="GET /sync"} 301`,
		`loadtest_http_errors_total{name="GET /sync",status_code="502"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, `loadtest_http_request_time_count{name="GET /sync"}`) {
		t.Error("a long poll's wait is in loadtest_http_request_time")
	}
}

// BenchmarkPromObserveMessage is the exposition's cost of one WebSocket message received: on the hot
// path of a connected run (tens of thousands a second).
func BenchmarkPromObserveMessage(b *testing.B) {
	p := NewProm()
	x := Sample{Kind: MessageIn, Name: "WS /api/v4/websocket", Type: "posted", BytesIn: 440}
	b.ReportAllocs()
	for b.Loop() {
		p.Observe(x)
	}
}
