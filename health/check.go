// Package health evaluates health checks: PromQL queries with a threshold,
// the way the reference coordinator decides whether a system is healthy.
//
// The same query text runs on any [Evaluator]: package prom's embedded
// engine over what headroom scraped, or a real Prometheus server. A check
// that cannot be evaluated counts as fired: a controller never adds users
// on a health it could not measure.
package health

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/headroom-dev/headroom/prom"
	"github.com/prometheus/prometheus/promql/parser"
)

// Check is one health check: it fires when its query's value crosses Threshold.
type Check struct {
	Name      string // e.g. "client p99 latency (s)"
	Query     string // PromQL; must evaluate to a scalar or a single-sample vector
	Threshold float64
	Below     bool // false (default): fires when value > Threshold; true: fires when value < Threshold
	// Requires names metrics the check needs (a server's or a node's),
	// any one of which will do. Until some target exposes one of them the
	// check is inactive: not evaluated, never firing. Empty means always
	// active.
	Requires []string
}

// Active reports whether the check can be evaluated: it requires nothing,
// has is nil, or has reports one of the metrics it requires.
func (c Check) Active(has func(metric string) bool) bool {
	if len(c.Requires) == 0 || has == nil {
		return true
	}
	for _, m := range c.Requires {
		if has(m) {
			return true
		}
	}
	return false
}

// promql is the parser every check is validated with: the same options as the
// embedded engine, so a query that validates also runs there.

// Validate parses the query and returns an error naming the check and the
// position in the query (line:column, e.g.
// `check "p99": 1:14: parse error: unclosed left parenthesis`), and rejects
// NaN or infinite thresholds, queries that yield a range vector or a string,
// and subqueries of more than MaxPoints points per series. Every evaluator
// refuses the same queries, so a check that validates also runs.
func (c Check) Validate() error {
	if math.IsNaN(c.Threshold) || math.IsInf(c.Threshold, 0) {
		return fmt.Errorf("check %q: threshold is %v, want a finite number", c.Name, c.Threshold)
	}
	expr, err := prom.ParseChecked(c.Query)
	if err != nil {
		return fmt.Errorf("check %q: %w", c.Name, err)
	}
	switch t := expr.Type(); t {
	case parser.ValueTypeScalar, parser.ValueTypeVector:
		return nil
	default:
		return fmt.Errorf("check %q: query yields a %s, want a scalar or an instant vector (wrap a range in rate() or *_over_time())", c.Name, t)
	}
}

// Window returns the longest range in the query (30s for rate(x[30s])), 0 if
// there is none or the query does not parse. A subquery counts its range
// (5m for max_over_time(rate(x[30s])[5m:])).
func (c Check) Window() time.Duration {
	expr, err := prom.Parse(c.Query)
	if err != nil {
		return 0
	}
	var longest time.Duration
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		var r time.Duration
		switch n := node.(type) {
		case *parser.MatrixSelector:
			r = n.Range
		case *parser.SubqueryExpr:
			r = n.Range
		}
		longest = max(longest, r)
		return nil
	})
	return longest
}

// fires reports whether v crosses the threshold. NaN never crosses.
func (c Check) fires(v float64) bool {
	if c.Below {
		return v < c.Threshold
	}
	return v > c.Threshold
}

// Result of evaluating one check at one time.
type Result struct {
	Name      string  `json:"name"`
	Value     float64 `json:"value"` // NaN when there is none; NaN and ±Inf are written as null in JSON
	Threshold float64 `json:"threshold"`
	Fired     bool    `json:"fired"`           // crossed the threshold, or could not be evaluated (fail closed)
	Err       string  `json:"error,omitempty"` // why it could not be evaluated: "no data", "query error: ...", "3 series, want 1"
	// Inactive: the check was not evaluated, as no target exposes a metric
	// it requires (Check.Requires); it does not fire, Value is NaN and Err
	// says what it waits for.
	Inactive bool `json:"inactive,omitempty"`
	// Unknown: the check could not be evaluated for a reason that says
	// nothing of the target's health (the run says which: a scrape of the
	// target that failed); it neither fires nor passes.
	Unknown bool `json:"unknown,omitempty"`
}

// resultJSON is Result with a nullable value: JSON has no NaN.
type resultJSON struct {
	Name      string   `json:"name"`
	Value     *float64 `json:"value"`
	Threshold float64  `json:"threshold"`
	Fired     bool     `json:"fired"`
	Err       string   `json:"error,omitempty"`
	Inactive  bool     `json:"inactive,omitempty"`
	Unknown   bool     `json:"unknown,omitempty"`
}

// MarshalJSON writes a NaN or infinite value as null, so the JSON stays valid.
func (r Result) MarshalJSON() ([]byte, error) {
	j := resultJSON{Name: r.Name, Threshold: r.Threshold, Fired: r.Fired, Err: r.Err, Inactive: r.Inactive, Unknown: r.Unknown}
	if !math.IsNaN(r.Value) && !math.IsInf(r.Value, 0) {
		j.Value = &r.Value
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads a null value back as NaN.
func (r *Result) UnmarshalJSON(b []byte) error {
	var j resultJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Result{Name: j.Name, Value: math.NaN(), Threshold: j.Threshold, Fired: j.Fired, Err: j.Err, Inactive: j.Inactive, Unknown: j.Unknown}
	if j.Value != nil {
		r.Value = *j.Value
	}
	return nil
}

// Evaluator runs instant queries. Implementations are safe for concurrent use.
type Evaluator interface {
	// Query evaluates an instant PromQL query at t and returns its single value.
	// No data (empty vector) is an error wrapping prom.ErrNoData; more than one series is an error.
	Query(ctx context.Context, query string, t time.Time) (float64, error)
}

// maxParallel caps the queries one Evaluate call runs at once.
const maxParallel = 8

// Evaluate evaluates every check at t, up to 8 at a time, and returns one
// result per check in the checks' order. A check whose query fails, returns
// nothing or returns NaN (0/0: nothing happened in the window) has Fired = true
// and Err set: it fails closed.
func Evaluate(ctx context.Context, ev Evaluator, checks []Check, t time.Time) []Result {
	results := make([]Result, len(checks))
	sem := make(chan struct{}, maxParallel)
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			results[i] = evaluate(ctx, ev, c, t)
		}()
	}
	wg.Wait()
	return results
}

// EvaluateActive is Evaluate for the checks that are Active under has;
// the others get an inactive result (not fired, Value NaN, Err naming what
// they wait for), so the results still line up with checks.
func EvaluateActive(ctx context.Context, ev Evaluator, checks []Check, has func(metric string) bool, t time.Time) []Result {
	active := make([]Check, 0, len(checks))
	is := make([]bool, len(checks)) // asked once: has may ask a Prometheus server
	for i, c := range checks {
		if is[i] = c.Active(has); is[i] {
			active = append(active, c)
		}
	}
	got := Evaluate(ctx, ev, active, t)
	out := make([]Result, len(checks))
	j := 0
	for i, c := range checks {
		if is[i] {
			out[i] = got[j]
			j++
			continue
		}
		out[i] = Result{Name: c.Name, Value: math.NaN(), Threshold: c.Threshold, Inactive: true,
			Err: "inactive: no target exposes " + strings.Join(c.Requires, " or ")}
	}
	return out
}

func evaluate(ctx context.Context, ev Evaluator, c Check, t time.Time) Result {
	r := Result{Name: c.Name, Value: math.NaN(), Threshold: c.Threshold}
	v, err := ev.Query(ctx, c.Query, t)
	switch {
	case err != nil:
		r.Fired, r.Err = true, err.Error()
	case math.IsNaN(v):
		r.Fired, r.Err = true, "value is NaN (0/0: nothing counted in the window?)"
	default:
		r.Value, r.Fired = v, c.fires(v)
	}
	return r
}
