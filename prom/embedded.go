package prom

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// Embedded evaluates PromQL on a Store with the Prometheus engine, as a
// library: no server, no disk. Safe for concurrent use.
type Embedded struct {
	// Lookback is how far back an instant selector looks for a sample, like
	// Prometheus' --query.lookback-delta. 0 means 5m, Prometheus' default.
	// Set it before the first query.
	Lookback time.Duration
	// Timeout bounds each query when positive and shorter than
	// QueryTimeout, which bounds it otherwise. Set it before the first
	// query.
	Timeout time.Duration

	store  *Store
	engine *promql.Engine
}

// NewEmbedded returns an evaluator over s with a query timeout of
// QueryTimeout (10 s), at most 50 million samples loaded per query, and
// subqueries of at most MaxPoints points per series (DefaultSubqueryStep
// when a subquery gives no step).
func NewEmbedded(s *Store) *Embedded {
	return &Embedded{
		store: s,
		engine: promql.NewEngine(promql.EngineOpts{
			Timeout:                  QueryTimeout,
			MaxSamples:               maxSamples,
			LookbackDelta:            5 * time.Minute,
			NoStepSubqueryIntervalFn: func(int64) int64 { return DefaultSubqueryStep.Milliseconds() },
			EnableAtModifier:         true,
			EnableNegativeOffset:     true,
			Parser:                   queryParser,
		}),
	}
}

// Query evaluates an instant query at t and returns its single value: the
// scalar, or the value of the single sample of the vector. An empty vector is
// ErrNoData; more series, a range vector or a string are errors. A query
// over the limits (MaxPoints) is refused before it runs, with the reason.
func (e *Embedded) Query(ctx context.Context, query string, t time.Time) (float64, error) {
	if _, err := ParseChecked(query); err != nil {
		return 0, fmt.Errorf("query error: %w", err)
	}
	if e.Timeout > 0 && e.Timeout < QueryTimeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.Timeout)
		defer cancel()
	}
	opts := promql.NewPrometheusQueryOpts(false, e.Lookback) // 0: the engine's 5m
	q, err := e.engine.NewInstantQuery(ctx, e.store.Queryable(), opts, query, t)
	if err != nil {
		return 0, fmt.Errorf("query error: %w", err)
	}
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		// The engine says "timed out" when its own checks see the deadline,
		// but a deadline met while the store expands series comes back as
		// the context's bare error: both are the same timeout to a user.
		var timeout promql.ErrQueryTimeout
		if errors.As(res.Err, &timeout) || errors.Is(res.Err, context.DeadlineExceeded) {
			return 0, fmt.Errorf("query timed out (%w)", res.Err)
		}
		return 0, fmt.Errorf("query error: %w", res.Err)
	}
	switch v := res.Value.(type) {
	case promql.Scalar:
		return v.V, nil
	case promql.Vector:
		if len(v) == 0 {
			return 0, ErrNoData
		}
		if len(v) > 1 {
			return 0, fmt.Errorf("%d series, want 1", len(v))
		}
		if v[0].H != nil {
			return 0, fmt.Errorf("native histogram sample, want a float")
		}
		return v[0].F, nil
	default:
		return 0, fmt.Errorf("query yields a %s, want a scalar or an instant vector", typeOf(res.Value))
	}
}

func typeOf(v parser.Value) parser.ValueType {
	if v == nil {
		return "nothing"
	}
	return v.Type()
}
