package metrics

import (
	"fmt"
	"maps"
	"testing"
	"time"
)

func TestMessageKinds(t *testing.T) {
	// Each case: messages recorded into one Stat, and the lines (text and
	// count) it must show.
	for _, tc := range []struct {
		name string
		msgs []string
		want map[string]int64
	}{
		{"timeouts are one line with their spread",
			[]string{"timeout after 10.102s", "timeout after 10.413s", "timeout after 10.25s"},
			map[string]int64{"timeout after 10.1s–10.4s": 3}},
		{"one timeout keeps its value",
			[]string{"timeout after 10.102s", "timeout after 10.104s"},
			map[string]int64{"timeout after 10.1s": 2}},
		{"an action's timeout, prefixed by its request",
			[]string{"GET /x: timeout after 250.4ms", "GET /x: timeout after 1m2.5s", "GET /y: timeout after 3s"},
			map[string]int64{"GET /x: timeout after 250ms–1m2.5s": 2, "GET /y: timeout after 3s": 1}},
		{"the local port of a connection does not matter",
			[]string{"read tcp 127.0.0.1:53422->127.0.0.1:8008: read: connection reset by peer",
				"read tcp 127.0.0.1:40001->127.0.0.1:8008: read: connection reset by peer",
				"read tcp [::1]:40001->[::1]:8008: read: connection reset by peer"},
			map[string]int64{"read tcp 127.0.0.1:*->127.0.0.1:8008: read: connection reset by peer": 2,
				"read tcp [::1]:*->[::1]:8008: read: connection reset by peer": 1}},
		{"byte counts are a range",
			[]string{"response body of 70000000 bytes is larger than the limit of 67108864",
				"response body of 90000001 bytes is larger than the limit of 67108864"},
			map[string]int64{"response body of 70000000–90000001 bytes is larger than the limit of 67108864": 2}},
		{"places in a body or header are a range",
			[]string{`response.json: JSON nested too deep (more than 1000 levels, at byte 1004)`,
				`response.json: JSON nested too deep (more than 1000 levels, at byte 1200)`,
				`chat.star:14: http.post: header "X-Token" (from user.http.headers) value holds a CR (at byte 5): strip it`,
				`chat.star:14: http.post: header "X-Token" (from user.http.headers) value holds a CR (at byte 9): strip it`,
				`response.json: status 502 body is not JSON (at offset 0, unexpected character '<'): <html>`,
				`response.json: status 502 body is not JSON (at offset 3, unexpected character '<'): <html>`},
			map[string]int64{`response.json: JSON nested too deep (more than 1000 levels, at byte 1004–1200)`: 2,
				`chat.star:14: http.post: header "X-Token" (from user.http.headers) value holds a CR (at byte 5–9): strip it`: 2,
				`response.json: status 502 body is not JSON (at offset 0–3, unexpected character '<'): <html>`:                2}},
		{"statuses, lines and the target's port stay apart",
			[]string{"status 503", "status 502", "status 503", "chat.star:42: key \"id\" not in dict", "chat.star:43: key \"id\" not in dict",
				"dial tcp 127.0.0.1:8080: connect: connection refused", "dial tcp 127.0.0.1:8081: connect: connection refused"},
			map[string]int64{"status 503": 2, "status 502": 1, "chat.star:42: key \"id\" not in dict": 1, "chat.star:43: key \"id\" not in dict": 1,
				"dial tcp 127.0.0.1:8080: connect: connection refused": 1, "dial tcp 127.0.0.1:8081: connect: connection refused": 1}},
		{"a server's request ids and UUIDs are one kind",
			[]string{`status 400: {"id":"app.user.save.username_exists.app_error","message":"An account with that username already exists.","request_id":"8xk3qz1m7jg5tpy4w6nrd9ab2e","status_code":400}`,
				`status 400: {"id":"app.user.save.username_exists.app_error","message":"An account with that username already exists.","request_id":"q7c1rd4n8hs2kfy5u3zmx6tw9e","status_code":400}`,
				"GET /api/v4/users/123e4567-e89b-12d3-a456-426614174000: status 404",
				"GET /api/v4/users/9b2f5c1e-0a3d-4e6f-8c7b-1d2e3f4a5b6c: status 404",
				"username_exists_error_code_long stays", "0123456789012345678 stays"},
			map[string]int64{`status 400: {"id":"app.user.save.username_exists.app_error","message":"An account with that username already exists.","request_id":"<id>","status_code":400}`: 2,
				"GET /api/v4/users/<id>: status 404": 2, "username_exists_error_code_long stays": 1, "0123456789012345678 stays": 1}},
		{"numbers that are no duration stay",
			[]string{"user3s failed", "took 5min", "version 1.5.3s", "x 10 s"},
			map[string]int64{"user3s failed": 1, "took 5min": 1, "version 1.5.3s": 1, "x 10 s": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := NewStat()
			for _, m := range tc.msgs {
				st.Add(&Sample{Outcome: Failed, Message: m})
			}
			if got := st.MessageCounts(); !maps.Equal(got, tc.want) {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
			if got := st.Summarize("x", time.Second).Messages; !maps.Equal(got, tc.want) {
				t.Errorf("summary: got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMessageKindsMergeExactly(t *testing.T) {
	// Timeouts spread over shards and drains: the merged kind has every
	// count and the spread of all of them, as one Stat would.
	one := NewStat()
	rec := NewRecorder(3, nil, time.Now)
	for i := range 300 {
		s := Sample{Kind: Request, Name: "r", Outcome: Timeout, Latency: time.Second,
			Message: fmt.Sprintf("timeout after %v", 10*time.Second+time.Duration(i)*time.Millisecond)}
		if i%7 == 0 {
			s.Outcome, s.Message = Failed, "status 503"
		}
		one.Add(&s)
		rec.Shard(i).Record(s)
	}
	total := NewSnapshot()
	for range 2 {
		snap := NewSnapshot()
		rec.Drain(snap)
		total.Merge(snap)
	}
	got := total.Requests["r"].MessageCounts()
	if !maps.Equal(got, one.MessageCounts()) {
		t.Errorf("merged %v, one stat %v", got, one.MessageCounts())
	}
	want := map[string]int64{"status 503": 43, "timeout after 10s–10.3s": 257}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestMessageKindsAreBoundedWithTheirCounts(t *testing.T) {
	// Past MaxMessages kinds the rest go to "other"; a merge of two such
	// Stats keeps every count.
	a, b := NewStat(), NewStat()
	for i := range 30 {
		a.Add(&Sample{Outcome: Failed, Message: fmt.Sprintf("status %d", 500+i)})
		b.Add(&Sample{Outcome: Timeout, Message: fmt.Sprintf("e%d after %dms", i, 100+i)})
	}
	a.Merge(b)
	total := int64(0)
	for _, n := range a.MessageCounts() {
		total += n
	}
	if total != 60 || len(a.Messages) != MaxMessages+1 {
		t.Errorf("%d kinds holding %d messages, want %d kinds holding 60", len(a.Messages), total, MaxMessages+1)
	}
}

func TestActionsWithoutRequestsAreCounted(t *testing.T) {
	st := NewStat()
	st.Add(&Sample{Kind: Action, Requests: 2})
	st.Add(&Sample{Kind: Action})
	st.Add(&Sample{Kind: Action, Outcome: Failed, Message: "x"})
	st.Add(&Sample{Kind: Action, Outcome: Canceled}) // in nothing but canceled
	o := NewStat()
	o.Add(&Sample{Kind: Action, Outcome: Timeout})
	st.Merge(o)
	if s := st.Summarize("EditPost", time.Second); s.NoRequest != 3 || s.Count != 4 {
		t.Errorf("no_request %d of %d, want 3 of 4", s.NoRequest, s.Count)
	}
	req := NewStat()
	req.Add(&Sample{Kind: Request})
	if req.NoRequest != 0 {
		t.Error("a request counted as an action without requests")
	}
	st.Reset()
	if st.NoRequest != 0 {
		t.Error("Reset kept no_request")
	}
}
