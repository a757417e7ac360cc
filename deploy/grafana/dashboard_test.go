package grafana

import (
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/headroom-dev/headroom/health"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/prom"
)

type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos *struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID        string `json:"refId"`
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Thresholds struct {
				Steps []struct {
					Value *float64 `json:"value"`
				} `json:"steps"`
			} `json:"thresholds"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Panels []panel `json:"panels"` // a collapsed row's
}

type variable struct {
	Type       string `json:"type"`
	Name       string `json:"name"`
	Multi      bool   `json:"multi"`
	IncludeAll bool   `json:"includeAll"`
	AllValue   string `json:"allValue"`
	Query      any    `json:"query"` // a string, or {"query": "..."}
}

func load(t *testing.T) (dashboard, []byte) {
	t.Helper()
	b, err := os.ReadFile("headroom.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("headroom.json: %v", err)
	}
	return d, b
}

// exposed is what headroom's exposition has, by sample name as a query
// names it (x_bucket, x_sum, x_count for a histogram x): the label names
// of its series, those Prometheus adds (job, instance) and an agent's
// (agent) included. It gathers a Prom that observed one sample of every
// kind, each outcome, a setup request and the user counts.
func exposed(t *testing.T) map[string]map[string]bool {
	t.Helper()
	p := metrics.NewProm()
	for k := metrics.Request; k <= metrics.Dropped; k++ {
		for _, o := range []metrics.Outcome{metrics.OK, metrics.Failed, metrics.Timeout} {
			p.Observe(metrics.Sample{Kind: k, Name: "n", Outcome: o, Status: 500, Latency: time.Millisecond,
				Type: "posted", N: 1, BytesIn: 10, BytesOut: 10, Requests: 1})
		}
	}
	p.Observe(metrics.Sample{Kind: metrics.Request, Name: "login", Setup: true})
	p.SetUsers(2)
	p.SetReady(1)
	mfs, err := metrics.Labelled(p.Gather, "agent", "agent-0")()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	add := func(name string, m *dto.Metric, extra ...string) {
		ls := map[string]bool{"__name__": true, "job": true, "instance": true}
		for _, l := range m.GetLabel() {
			ls[l.GetName()] = true
		}
		for _, e := range extra {
			ls[e] = true
		}
		if out[name] == nil {
			out[name] = ls
		}
		maps.Copy(out[name], ls)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetType() == dto.MetricType_HISTOGRAM {
				add(mf.GetName()+"_bucket", m, "le")
				add(mf.GetName()+"_sum", m)
				add(mf.GetName()+"_count", m)
				continue
			}
			add(mf.GetName(), m)
		}
	}
	return out
}

// variables stands plausible values in for the dashboard's variables and
// Grafana's, so an expression parses as Prometheus will get it.
var variables = strings.NewReplacer(
	"${__rate_interval}", "1m", "$__rate_interval", "1m",
	"${__interval}", "15s", "$__interval", "15s",
	"${__range}", "1h", "$__range", "1h",
	"${window}", "10s", "$window", "10s",
	"${job}", "headroom|headroom-agents", "$job", "headroom|headroom-agents",
	"${agent}", "(agent-0|agent-1)", "$agent", "(agent-0|agent-1)",
)

var queryParser = parser.NewParser(parser.Options{})

// selectors returns the sample names and label names an expression uses:
// its selectors' names and matchers.
func selectors(expr parser.Node) (names []string, labels map[string]bool) {
	labels = map[string]bool{}
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			names = append(names, metricName(vs))
			for _, m := range vs.LabelMatchers {
				labels[m.Name] = true
			}
		}
		return nil
	})
	return names, labels
}

func metricName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == "__name__" {
			return m.Value
		}
	}
	return ""
}

// checkExpr parses e and reports each metric, matcher label, grouping
// label or legend label that headroom's exposition does not have.
func checkExpr(t *testing.T, where, e, legend string, have map[string]map[string]bool, used map[string]bool) {
	t.Helper()
	expr, err := queryParser.ParseExpr(variables.Replace(e))
	if err != nil {
		t.Errorf("%s: %v\n  %s", where, err, e)
		return
	}
	if strings.Contains(variables.Replace(e), "$") {
		t.Errorf("%s: a variable the test does not know: %s", where, e)
	}
	names, _ := selectors(expr)
	for _, n := range names {
		used[n] = true
	}
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			name := metricName(n)
			ls, ok := have[name]
			if !ok {
				t.Errorf("%s: headroom exposes no %q (renamed? see metrics/prom.go)\n  %s", where, name, e)
				return nil
			}
			for _, m := range n.LabelMatchers {
				if !ls[m.Name] {
					t.Errorf("%s: %s has no label %q\n  %s", where, name, m.Name, e)
				}
			}
		case *parser.AggregateExpr:
			inner, _ := selectors(n.Expr)
			for _, g := range n.Grouping {
				if !anyHas(have, inner, g) {
					t.Errorf("%s: by (%s): none of %v has that label\n  %s", where, g, inner, e)
				}
			}
		}
		return nil
	})
	for _, m := range regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`).FindAllStringSubmatch(legend, -1) {
		if !anyHas(have, names, m[1]) {
			t.Errorf("%s: legend %q: none of %v has the label %q", where, legend, names, m[1])
		}
	}
}

func anyHas(have map[string]map[string]bool, names []string, label string) bool {
	for _, n := range names {
		if have[n][label] {
			return true
		}
	}
	return false
}

// TestDashboardQueries parses every panel's query with the PromQL parser
// headroom embeds and checks each metric, label matcher, "by" label and
// legend label against what metrics.Prom exposes, and that every family it
// exposes has a panel: the dashboard cannot drift from the exposition.
func TestDashboardQueries(t *testing.T) {
	d, raw := load(t)
	have := exposed(t)
	used := map[string]bool{}
	ids := map[int]string{}
	var all []panel
	for _, p := range d.Panels {
		all = append(all, p)
		all = append(all, p.Panels...)
	}
	for _, p := range all {
		where := "panel " + p.Title
		if prev, ok := ids[p.ID]; ok || p.ID == 0 {
			t.Errorf("%s: id %d, also %q's (or 0)", where, p.ID, prev)
		}
		ids[p.ID] = p.Title
		if p.GridPos == nil || p.GridPos.W < 1 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("%s: gridPos %+v, want one within 24 columns", where, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || p.Datasource.Type != "prometheus" {
			t.Errorf("%s: datasource %+v, want the $datasource variable", where, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no query", where)
		}
		for _, tg := range p.Targets {
			checkExpr(t, where+" "+tg.RefID, tg.Expr, tg.LegendFormat, have, used)
		}
	}
	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
		if q, ok := v.Query.(map[string]any); ok && v.Type == "query" {
			m := regexp.MustCompile(`^label_values\((.+), (\w+)\)$`).FindStringSubmatch(q["query"].(string))
			if m == nil {
				t.Errorf("variable %s: query %v, want label_values(selector, label)", v.Name, q["query"])
				continue
			}
			checkExpr(t, "variable "+v.Name, m[1], "{{"+m[2]+"}}", have, map[string]bool{})
		}
	}
	if v := vars["datasource"]; v.Type != "datasource" {
		t.Errorf("no $datasource variable of type datasource: %+v", v)
	}
	if v := vars["agent"]; !v.Multi || !v.IncludeAll || v.AllValue != ".*" {
		t.Errorf("$agent: %+v, want a multi-select with All as .* (a single process's series have no agent label)", v)
	}
	for _, name := range []string{"job", "window"} {
		if _, ok := vars[name]; !ok {
			t.Errorf("no $%s variable", name)
		}
	}
	for name := range have {
		family := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if !used[name] && !used[family+"_bucket"] && !used[family+"_count"] {
			t.Errorf("no panel shows %s: add one (metrics/prom.go exposes it)", name)
		}
	}
	for _, s := range []string{"http://", "https://", "//cdn", "<script"} {
		if strings.Contains(string(raw), s) {
			t.Errorf("headroom.json contains %q: no external links or resources", s)
		}
	}
}

// TestDashboardShowsTheChecks: the four client checks (those on headroom's
// own metrics) each have a panel of their name with their query, $window
// standing for --window, and their threshold.
func TestDashboardShowsTheChecks(t *testing.T) {
	d, _ := load(t)
	byTitle := map[string]panel{}
	for _, p := range d.Panels {
		byTitle[p.Title] = p
	}
	const w = 20 * time.Second
	n := 0
	for _, c := range health.Defaults(w, nil) {
		if len(c.Requires) > 0 {
			continue // a target's or a node's metric: not headroom's
		}
		n++
		p, ok := byTitle[c.Name]
		if !ok {
			t.Errorf("no panel titled %q", c.Name)
			continue
		}
		if len(p.Targets) == 0 || health.ExpandWindow(p.Targets[0].Expr, w) != c.Query {
			t.Errorf("panel %q: query\n  %v\nwant the check's, with $window for --window:\n  %s", c.Name, p.Targets, c.Query)
		}
		if !slices.ContainsFunc(p.FieldConfig.Defaults.Thresholds.Steps, func(s struct {
			Value *float64 `json:"value"`
		}) bool {
			return s.Value != nil && *s.Value == c.Threshold
		}) {
			t.Errorf("panel %q: no threshold step at the check's %v", c.Name, c.Threshold)
		}
	}
	if n != 4 {
		t.Errorf("%d client checks, want 4", n)
	}
}

// TestDashboardQueriesHaveData runs every panel's query on the PromQL engine
// headroom embeds, over two agents' labelled series (job headroom-agents,
// agent-0 and agent-1) that saw every kind of sample and outcome for 30
// seconds, and wants each to give at least one series: a label value
// misspelled (outcome="okay") parses, but shows nothing.
func TestDashboardQueriesHaveData(t *testing.T) {
	d, _ := load(t)
	store := prom.NewStore(time.Hour)
	t0 := time.Unix(1_700_000_000, 0)
	agents := []*metrics.Prom{metrics.NewProm(), metrics.NewProm()}
	for sec := range 30 {
		for i, p := range agents {
			for k := metrics.Request; k <= metrics.Dropped; k++ {
				for j, o := range []metrics.Outcome{metrics.OK, metrics.OK, metrics.Failed, metrics.Timeout} {
					p.Observe(metrics.Sample{Kind: k, Name: "n", Outcome: o, Status: []int{200, 200, 503, 0}[j],
						Latency: time.Duration(1+j+sec) * time.Millisecond, Type: "posted", N: 1, BytesIn: 10, BytesOut: 10, Requests: 1})
				}
			}
			p.Observe(metrics.Sample{Kind: metrics.Request, Name: "login", Setup: true})
			p.SetUsers(10 + sec)
			p.SetReady(sec)
			mfs, err := metrics.Labelled(p.Gather, "agent", []string{"agent-0", "agent-1"}[i])()
			if err != nil {
				t.Fatal(err)
			}
			store.AppendGathered(mfs, t0.Add(time.Duration(sec)*time.Second),
				labels.FromStrings("job", "headroom-agents", "instance", []string{"10.0.0.1:9465", "10.0.0.2:9465"}[i]))
		}
	}
	engine := promql.NewEngine(promql.EngineOpts{Timeout: 10 * time.Second, MaxSamples: 1e6, LookbackDelta: 5 * time.Minute})
	at := t0.Add(29 * time.Second)
	replace := strings.NewReplacer("$__rate_interval", "10s", "$window", "10s", "$job", "headroom|headroom-agents", "$agent", "(agent-0|agent-1)")
	ctx := t.Context()
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			q, err := engine.NewInstantQuery(ctx, store.Queryable(), nil, replace.Replace(tg.Expr), at)
			if err != nil {
				t.Errorf("panel %s %s: %v", p.Title, tg.RefID, err)
				continue
			}
			res := q.Exec(ctx)
			switch v := res.Value.(type) {
			case promql.Vector:
				if len(v) == 0 {
					t.Errorf("panel %s %s: no series\n  %s", p.Title, tg.RefID, tg.Expr)
				}
			default:
				t.Errorf("panel %s %s: %v %v, want an instant vector", p.Title, tg.RefID, res.Err, res.Value)
			}
			q.Close()
		}
	}
}
