package testbed

import (
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestWithDefaults(t *testing.T) {
	got := Config{}.WithDefaults()
	want := Config{Workers: 8, Queue: 1000, Scale: 1, Channels: 20, Seed: 1, EventCost: 100 * time.Microsecond, ConnCost: 100 * time.Microsecond}
	if got != want {
		t.Errorf("Config{}.WithDefaults() = %+v, want %+v", got, want)
	}
	set := Config{Workers: 3, Queue: -1, Scale: 0.5, Channels: 2, Seed: 9, EventCost: -1, ConnCost: time.Millisecond}
	if got := set.WithDefaults(); got != set {
		t.Errorf("WithDefaults changed a set config: %+v", got)
	}
	if got := New(Config{Workers: 3}).Config(); got.Workers != 3 || got.Queue != 1000 {
		t.Errorf("New(...).Config() = %+v", got)
	}
}

func TestRoutes(t *testing.T) {
	names := Routes()
	if len(names) != 18 || !slices.IsSorted(names) {
		t.Fatalf("Routes() = %v, want 18 names, sorted", names)
	}
	s := New(Config{Scale: 2})
	if got := s.ServiceTime("CreatePost"); got != 12*time.Millisecond {
		t.Errorf("ServiceTime(CreatePost) at Scale 2 = %v, want 12ms", got)
	}
	if got := s.ServiceTime("NoSuchRoute"); got != 0 {
		t.Errorf("ServiceTime(NoSuchRoute) = %v, want 0", got)
	}
	for _, name := range names {
		if s.ServiceTime(name) <= 0 {
			t.Errorf("ServiceTime(%s) = %v", name, s.ServiceTime(name))
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestCapacityAndCeiling(t *testing.T) {
	// The worked example of docs/TESTBED.md: S = (6·4 + 2·3 + 1·6 + 1·2)/10 ms = 3.8 ms before Scale.
	mix := map[string]float64{"GetChannelPosts": 6, "ViewChannel": 2, "CreatePost": 1, "GetChannelUnread": 1}
	for _, tc := range []struct {
		cfg           Config
		think         time.Duration
		capacity, max float64
	}{
		{Config{}, time.Second, 8 / 0.0038, 8 * 1.0038 / 0.0038},
		{Config{Scale: 10}, time.Second, 8 / 0.038, 8 * 1.038 / 0.038},
		{Config{Workers: 2, Scale: 10}, 0, 2 / 0.038, 2},
	} {
		s := New(tc.cfg)
		if got := s.Capacity(mix); !near(got, tc.capacity) {
			t.Errorf("%+v: Capacity = %v, want %v", tc.cfg, got, tc.capacity)
		}
		if got := s.Ceiling(mix, tc.think); !near(got, tc.max) {
			t.Errorf("%+v: Ceiling(Z=%v) = %v, want %v", tc.cfg, tc.think, got, tc.max)
		}
	}
	s := New(Config{})
	if got := s.Capacity(map[string]float64{"GetMe": 1}); !near(got, 8000) {
		t.Errorf("Capacity(GetMe only) = %v, want 8000", got)
	}
	ignored := map[string]float64{"GetMe": 1, "Nope": 5, "SearchPosts": -1, "Login": 0}
	if got := s.Capacity(ignored); !near(got, 8000) {
		t.Errorf("Capacity ignoring unknown and non-positive weights = %v, want 8000", got)
	}
	if got, got2 := s.Capacity(nil), s.Ceiling(map[string]float64{"Nope": 1}, time.Second); got != 0 || got2 != 0 {
		t.Errorf("Capacity and Ceiling of an empty mix = %v, %v; want 0", got, got2)
	}
}

// TestDocsTable keeps the service-time table of docs/TESTBED.md equal to routeTable.
func TestDocsTable(t *testing.T) {
	doc, err := os.ReadFile("../docs/TESTBED.md")
	if err != nil {
		t.Fatal(err)
	}
	parseMS := func(s string) time.Duration {
		v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "ms")), 64)
		if err != nil {
			t.Fatalf("docs/TESTBED.md: %q is not a number of ms", s)
		}
		return time.Duration(v * float64(time.Millisecond))
	}
	rows := map[string][]string{}
	for line := range strings.Lines(string(doc)) {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) != 7 || !strings.HasPrefix(strings.TrimSpace(cells[2]), "`POST ") &&
			!strings.HasPrefix(strings.TrimSpace(cells[2]), "`GET ") &&
			!strings.HasPrefix(strings.TrimSpace(cells[2]), "`PUT ") &&
			!strings.HasPrefix(strings.TrimSpace(cells[2]), "`DELETE ") {
			continue
		}
		for i := range cells {
			cells[i] = strings.Trim(strings.TrimSpace(cells[i]), "`")
		}
		rows[cells[1]] = cells[2:6]
	}
	for _, r := range routeTable() {
		row, ok := rows[r.name]
		if !ok {
			t.Errorf("docs/TESTBED.md: no row for %s", r.name)
			continue
		}
		if row[0] != r.method+" "+r.path {
			t.Errorf("docs/TESTBED.md: %s is %q, code says %q", r.name, row[0], r.method+" "+r.path)
		}
		if got := parseMS(row[1]); got != r.total() {
			t.Errorf("docs/TESTBED.md: %s takes %v, code says %v", r.name, got, r.total())
		}
		var calls []storeCall
		for _, part := range strings.Split(row[2], ",") {
			method, ms, _ := strings.Cut(strings.TrimSpace(part), " ")
			calls = append(calls, storeCall{strings.Trim(method, "`"), parseMS(ms)})
		}
		if !slices.Equal(calls, r.store) {
			t.Errorf("docs/TESTBED.md: %s store calls %v, code says %v", r.name, calls, r.store)
		}
		if got := parseMS(row[3]); got != r.app {
			t.Errorf("docs/TESTBED.md: %s app time %v, code says %v", r.name, got, r.app)
		}
	}
	if len(rows) != len(routeTable()) {
		t.Errorf("docs/TESTBED.md has %d route rows, code has %d routes", len(rows), len(routeTable()))
	}
}

func TestConnectedCeiling(t *testing.T) {
	// Without connections' costs it is the HTTP-only ceiling.
	mix := map[string]float64{"GetChannelPosts": 6, "ViewChannel": 2, "CreatePost": 1, "GetChannelUnread": 1}
	s := New(Config{Scale: 10, EventCost: -1, ConnCost: -1})
	S := time.Duration(0.038 * float64(time.Second))
	if got, want := s.ConnectedCeiling(mix, time.Second, S, nil), s.Ceiling(mix, time.Second); math.Abs(got-want) > 1e-6*want {
		t.Errorf("no costs: %v, want Ceiling's %v", got, want)
	}
	// The runner's test: 4 workers at Scale 10 (posts 60 ms), every action a post that reaches all N
	// connections at 1 ms each, 1 ms of upkeep per connection a second, Z = 1 s, rt = 0.2 s:
	// N·(0.06 + 0.001·N) = 1.2·(4 − 0.001·N), so 0.001·N² + 0.0612·N − 4.8 = 0: 45.1 users (where
	// S(N) is 105 ms, below rt), against 80 over HTTP alone.
	s = New(Config{Workers: 4, Scale: 10})
	reach := func(route string, n float64) float64 {
		if route == "CreatePost" {
			return n
		}
		return 0
	}
	want := (-0.0612 + math.Sqrt(0.0612*0.0612+4*0.001*4.8)) / (2 * 0.001)
	got := s.ConnectedCeiling(map[string]float64{"CreatePost": 1}, time.Second, 200*time.Millisecond, reach)
	if math.Abs(got-want) > 1e-6*want {
		t.Errorf("with connections: %v, want %v", got, want)
	}
	if http := 4 * 1.2 / 0.06; got > 0.6*http {
		t.Errorf("connections cost nothing: %v users, HTTP alone %v", got, http)
	}
	// With rt = 0.1 s, S(N) reaches rt first, at 40 users, before the queue does.
	if got := s.ConnectedCeiling(map[string]float64{"CreatePost": 1}, time.Second, 100*time.Millisecond, reach); math.Abs(got-40) > 1e-6 {
		t.Errorf("rt = 0.1 s: %v users, want 40, where S(N) = rt", got)
	}
}
