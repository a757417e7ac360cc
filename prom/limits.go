package prom

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
)

// MaxPoints bounds the points per series one subquery may evaluate:
// Prometheus's own limit on the points of a range query (11,000). The
// engine sizes its per-step bookkeeping for a subquery before it evaluates
// anything, so count_over_time(vector(1)[100d:1ms]) (8.64e9 steps) would
// exhaust memory before MaxSamples or the timeout could stop it; such a
// query is refused before it runs.
const MaxPoints = 11_000

// DefaultSubqueryStep is the step of a subquery written without one
// (x[5m:]): Prometheus's default evaluation interval, so both engines give
// the same answer to the same text.
const DefaultSubqueryStep = time.Minute

// maxSamples bounds the samples one query may hold in memory at once, in
// the embedded engine (Prometheus's default, --query.max-samples).
const maxSamples = 50_000_000

// checkCost refuses a query whose subqueries evaluate more than MaxPoints
// points per series. A subquery is evaluated over its own range plus the
// ranges of the subqueries around it (the engine evaluates an inner
// subquery once over the outer one's whole span), at its step.
func checkCost(expr parser.Expr) error {
	var err error
	parser.Inspect(expr, func(node parser.Node, path []parser.Node) error {
		sq, ok := node.(*parser.SubqueryExpr)
		if !ok || err != nil {
			return nil
		}
		span := float64(sq.Range)
		for _, p := range path {
			if outer, ok := p.(*parser.SubqueryExpr); ok {
				span += float64(outer.Range)
			}
		}
		step := sq.Step
		if step <= 0 {
			step = DefaultSubqueryStep
		}
		if points := span / float64(step); points > MaxPoints {
			within := ""
			if span != float64(sq.Range) {
				within = fmt.Sprintf(", over %s with the subqueries around it", model.Duration(time.Duration(span)))
			}
			err = fmt.Errorf("subquery [%s:%s] evaluates %.0f points per series%s, more than %d (Prometheus's limit on the points of a range query): shorten its range or lengthen its step",
				model.Duration(sq.Range), model.Duration(step), points, within, MaxPoints)
		}
		return nil
	})
	return err
}

// ErrNoData is returned (possibly wrapped) by Embedded.Query and
// Remote.Query when the query yields an empty vector: the metric does not
// exist (yet), or has no sample within the lookback delta.
var ErrNoData = errors.New("no data")

// queryParser is the PromQL parser both engines' queries go through.
var queryParser = parser.NewParser(parser.Options{})

// Parse parses a PromQL query as both engines do.
func Parse(query string) (parser.Expr, error) { return queryParser.ParseExpr(query) }

// ParseChecked parses query and applies checkCost: what every evaluator
// does before a query runs, so a query that validates also runs.
func ParseChecked(query string) (parser.Expr, error) {
	expr, err := queryParser.ParseExpr(query)
	if err != nil {
		return nil, err
	}
	if err := checkCost(expr); err != nil {
		return nil, err
	}
	return expr, nil
}
