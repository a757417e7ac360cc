package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/compare"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// The fixtures in testdata/runs are real results: bounded runs of
// testdata/scenario/posts.star against two testbeds, the new one with its
// capacity lowered by 10% (base-N, new-N), a step run and two ceiling
// searches. They were made by the commands in testdata/runs/README.md.

func fixture(t *testing.T, name string) *result.Result {
	t.Helper()
	r, err := result.Read(filepath.Join("testdata", "runs", name))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func fixtureSide(t *testing.T, label string, names ...string) *compare.Side {
	t.Helper()
	var dirs []string
	for _, n := range names {
		dirs = append(dirs, filepath.Join("testdata", "runs", n))
	}
	s, err := compare.Load(label, dirs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func fixtureComparison(t *testing.T) *Doc {
	t.Helper()
	c, err := compare.Compare(fixtureSide(t, "v1", "base-1", "base-2", "base-3"), fixtureSide(t, "v2", "new-1", "new-2", "new-3"), compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ForComparison(c)
}

func golden(t *testing.T, name string, d *Doc) string {
	t.Helper()
	got := Markdown(d)
	path := filepath.Join("testdata", name+".md.golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./report -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the %s report differs from %s (go test ./report -update rewrites it after a deliberate change)\ngot:\n%s", name, path, got)
	}
	return string(got)
}

// mustContain checks what the golden file must say whatever it looks
// like, so a careless -update cannot bless a wrong report.
func mustContain(t *testing.T, md string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(md, w) {
			t.Errorf("report lacks %q", w)
		}
	}
}

func TestBoundedReportGolden(t *testing.T) {
	md := golden(t, "run", ForResult(fixture(t, "base-1")))
	mustContain(t, md, "# headroom run: posts.star", "## Setup", "| GetChannelPosts", "| ViewChannel", "![Requests per second](rps.png)",
		"Store time by method (mattermost_db_store_time)", "| PostStore.GetPosts")
}

func TestCeilingReportGolden(t *testing.T) {
	md := golden(t, "ceiling", ForResult(fixture(t, "ceil-1")))
	mustContain(t, md, `Supported users: 16 (in \[16, 17)`, "Bottleneck: client mean latency (s)", "## Health checks", "Levels the search held", "(check1.png)",
		"| CPU utilisation (%)     |        85 | inactive |", "Inactive, never evaluated")
	if strings.Contains(md, "check6.png") {
		t.Error("a chart of a check that was never evaluated")
	}
}

// A check inactive for part of the run counts its firings over the
// evaluations it had; one inactive throughout says what it waited for;
// a summary family has no p99; the memory says what it measures.
func TestInactiveChecksAndServerFigures(t *testing.T) {
	r := fixture(t, "ceil-1")
	ci := r.Ceiling
	ci.Checks[4].Requires = []string{"mattermost_api_time_count", "synapse_http_server_response_time_seconds_count"}
	ci.Bottleneck[4].Inactive = ci.Bottleneck[4].Evaluations
	ci.Bottleneck[0].Inactive = 2
	tg := &r.Server.Targets[0]
	tg.Memory = "process_resident_memory_bytes"
	tg.Window.Timings = append(tg.Window.Timings, result.TimingGroup{Metric: "http_server_requests_seconds", Label: "uri", Title: "HTTP server requests by URI",
		Type: "summary", Items: []result.Timing{{Name: "/owners", Count: 10, RPS: 5, MeanMs: 20}}})
	md := string(Markdown(ForResult(r)))
	mustContain(t, md, "| 11 of 20 (inactive in 2 more) |", "| server 5xx errors (%)   |     0.025 |                      inactive |",
		"server 5xx errors (%) (mattermost_api_time_count or synapse_http_server_response_time_seconds_count)",
		"6.99 max (process_resident_memory_bytes)", "HTTP server requests by URI (http_server_requests_seconds, a summary: no p99):", "| /owners |    10 |     5 |        20 |                 – |")
	if strings.Contains(md, "check5.png") {
		t.Error("a chart of a check that was never evaluated")
	}
}

func TestStepReportGolden(t *testing.T) {
	md := golden(t, "step", ForResult(fixture(t, "step-1")))
	mustContain(t, md, "knee at 10 users", "## Levels", "Per level and request", "(step-throughput.png)", "### Per level and action", "|    40 | Posts  |   39.7 |         561 |")
}

func TestComparisonReportGolden(t *testing.T) {
	md := golden(t, "compare", fixtureComparison(t))
	// The fixtures' new side has 10% less capacity, saturated: fewer
	// requests per second and every store call 11% longer.
	mustContain(t, md, "# headroom compare: v2 vs v1 (bounded runs)", "| requests/s", "**regression**",
		"Store time by method, mean (common mix)", "The common mix weighs each request")
}

func TestCeilingComparisonGolden(t *testing.T) {
	c, err := compare.Compare(fixtureSide(t, "v1", "ceil-1", "ceil-2"), fixtureSide(t, "v2", "ceil-2", "ceil-1"), compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	md := golden(t, "compare-ceiling", ForComparison(c))
	mustContain(t, md, "| supported users ", "| requests/s at the supported users", "(ceiling runs)")
}

func TestStepComparisonGolden(t *testing.T) {
	c, err := compare.Compare(fixtureSide(t, "v1", "step-1"), fixtureSide(t, "v2", "step-1"), compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	md := golden(t, "compare-step", ForComparison(c))
	mustContain(t, md, "## Levels", "|     5 | 20.7 → 20.7 (+0.0%)", "no verdict: one run per side", "| knee ")
}

func TestMatrixReportGolden(t *testing.T) {
	g := Group{Name: "posts", Dirs: []string{"ceil-1", "ceil-2"}, Results: []*result.Result{fixture(t, "ceil-1"), fixture(t, "ceil-2")}}
	md := golden(t, "matrix", ForMatrix([]Group{g}))
	mustContain(t, md, "| posts         | http://127.0.0.1:18065 |    2 |                     16 | 16, 16 ", "client mean latency (s) (2 of 2)")
}

// TestReportFilesWritten writes a real comparison both ways: every chart
// the Markdown links exists as a PNG beside it, and the HTML embeds them.
func TestReportFilesWritten(t *testing.T) {
	d := fixtureComparison(t)
	dir := t.TempDir()
	md, err := WriteMarkdown(dir, d)
	if err != nil {
		t.Fatal(err)
	}
	html, err := WriteHTML(dir, d)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range d.Blocks {
		if c, ok := b.(*Chart); ok {
			n++
			if _, err := os.Stat(filepath.Join(dir, c.Name+".png")); err != nil {
				t.Errorf("chart %s: %v", c.Name, err)
			}
		}
	}
	if n < 8 {
		t.Errorf("%d charts, want the client's five and the server's three", n)
	}
	page, _ := os.ReadFile(html)
	if got := strings.Count(string(page), "data:image/png;base64,"); got != n {
		t.Errorf("%d images embedded in %s, want %d", got, html, n)
	}
	text, _ := os.ReadFile(md)
	if got := strings.Count(string(text), ".png)"); got != n {
		t.Errorf("%d images linked from %s, want %d", got, md, n)
	}
}

// TestWireText: the report says when responses came over HTTP/2 and what
// compression saved, and nothing for plain HTTP/1.1.
func TestWireText(t *testing.T) {
	for _, tc := range []struct {
		s    metrics.Summary
		want string
	}{
		{metrics.Summary{Count: 10, BytesIn: 1000, BodyIn: 500}, ""},
		{metrics.Summary{Count: 10, HTTP2: 10, BytesIn: 1000, BodyIn: 500}, "Every response came over HTTP/2."},
		{metrics.Summary{Count: 10, HTTP2: 4, BytesIn: 1000, BodyIn: 500}, "4 of the 10 responses came over HTTP/2, the rest over HTTP/1.1."},
		{metrics.Summary{Count: 10, BytesIn: 1 << 20, BodyIn: 30 << 20}, "Bodies came compressed: 1 MiB on the wire, heads included, held 30 MiB decoded (30 times as much)."},
	} {
		if got := wireText(tc.s); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.s, got, tc.want)
		}
	}
}

// TestPhaseBlocks: one row per request name and one for all, the
// connections' phases as a mean and a count (only those any request went
// through), the wait and receive at p50 and p99; no table without phases.
func TestPhaseBlocks(t *testing.T) {
	if b := phaseBlocks(nil, false); b != nil {
		t.Errorf("no phases: %v", b)
	}
	ps := result.Phases{
		"connect": {Totals: metrics.Summary{Count: 3, MeanMs: 0.5}, Requests: []metrics.Summary{{Name: "GET /a", Count: 3, MeanMs: 0.5}}},
		"wait": {Totals: metrics.Summary{Count: 30, P50Ms: 2, P99Ms: 9}, Requests: []metrics.Summary{
			{Name: "GET /a", Count: 10, P50Ms: 1, P99Ms: 3}, {Name: "GET /b", Count: 20, P50Ms: 2, P99Ms: 9}}},
	}
	if b := phaseBlocks(ps, true); b[0].(*Heading).Text != "Where the setups' time went" {
		t.Errorf("a setup's heading: %q", b[0].(*Heading).Text)
	}
	tab := phaseBlocks(ps, false)[2].(*Table)
	if h := fmt.Sprint(tab.Header); h != "[request connect (ms) wait p50 (ms) wait p99 (ms) receive p50 (ms) receive p99 (ms)]" {
		t.Errorf("header %s", h)
	}
	want := [][]string{{"GET /a", "0.5 (3)", "1", "3", "", ""}, {"GET /b", "", "2", "9", "", ""}, {"all requests", "0.5 (3)", "2", "9", "", ""}}
	if fmt.Sprint(tab.Rows) != fmt.Sprint(want) {
		t.Errorf("rows\n%v\nwant\n%v", tab.Rows, want)
	}
}

// A database exporter's endpoint reads as its work and its work a
// request: over a bounded run's window, and at each step level in two
// columns of their own (the step's window spans the levels' setups, so
// its figure there is not divided).
func TestDatabaseFigures(t *testing.T) {
	r := fixture(t, "ceil-1")
	db := result.ServerTarget{URL: "http://127.0.0.1:9104/metrics", Instance: "127.0.0.1:9104", Kind: "database",
		Window: result.ServerWindow{Seconds: 10, Database: &result.DatabaseWork{System: "mysql", Queries: 3 * float64(r.Totals.Count), RowsRead: 25 * float64(r.Totals.Count)}}}
	r.Server.Targets = append(r.Server.Targets, db)
	mustContain(t, string(Markdown(ForResult(r))), "http://127.0.0.1:9104/metrics (a mysql database's exporter), over the measured window: ",
		" queries (3 a request), ", " rows read (25 a request).")

	s := fixture(t, "step-1")
	s.Server = &result.Server{Targets: []result.ServerTarget{{URL: db.URL, Instance: db.Instance, Kind: "database",
		Window: result.ServerWindow{Database: &result.DatabaseWork{System: "postgresql", Transactions: 1e6, RowsRead: 2e6}}}}}
	for i := range s.Step.Levels {
		l := &s.Step.Levels[i]
		l.Server = []result.ServerWindow{{Database: &result.DatabaseWork{System: "postgresql", Transactions: 4 * float64(l.Totals.Count), RowsRead: 9 * float64(l.Totals.Count)}}}
	}
	md := string(Markdown(ForResult(s)))
	mustContain(t, md, "transactions a request 127.0.0.1:9104", "rows read a request 127.0.0.1:9104", "1,000,000 transactions, 2,000,000 rows read.")
	if strings.Contains(md, "transactions (") {
		t.Error("a step's window-wide database figure divided by the held windows' requests")
	}
	if n := len(regexp.MustCompile(`(?m)\|\s+4 \|\s+9 \|$`).FindAllString(md, -1)); n != len(s.Step.Levels) {
		levels := md[strings.Index(md, "transactions a request"):]
		t.Errorf("the step table's levels do not give 4 transactions and 9 rows a request:\n%.1500s", levels)
	}
}
