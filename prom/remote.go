package prom

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

const (
	// PingTimeout bounds Remote.Ping.
	PingTimeout = 3 * time.Second
	// QueryTimeout bounds one query, on the server as in the embedded engine.
	QueryTimeout = 10 * time.Second
)

// Remote evaluates queries on a real Prometheus server through its HTTP API.
// Safe for concurrent use.
type Remote struct {
	address string
	api     v1.API
}

// NewRemote returns an evaluator on the Prometheus server at address, an http
// or https URL such as http://127.0.0.1:9090.
func NewRemote(address string) (*Remote, error) {
	u, err := url.Parse(address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("prometheus address %q: want an http or https URL such as http://127.0.0.1:9090", address)
	}
	client, err := api.NewClient(api.Config{Address: strings.TrimSuffix(address, "/")})
	if err != nil {
		return nil, fmt.Errorf("prometheus address %q: %w", address, err)
	}
	return &Remote{address: address, api: v1.NewAPI(client)}, nil
}

// Ping checks within PingTimeout that the server answers a query.
func (r *Remote) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	if _, _, _, err := r.api.Query(ctx, "1", time.Now()); err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // it would repeat the URL
		}
		return fmt.Errorf("prometheus at %s does not answer a query (%v): start it, or give --prometheus the address of its web UI", r.address, err)
	}
	return nil
}

// Query evaluates an instant query at t on the server and returns its single
// value: the scalar, or the value of the single sample of the vector. An empty
// vector is ErrNoData; more series, a range vector or a string are errors.
// Warnings from the server are ignored. The query has QueryTimeout at most.
// A query over the limits (MaxPoints) is refused before it is sent, as the
// embedded engine refuses it.
func (r *Remote) Query(ctx context.Context, query string, t time.Time) (float64, error) {
	if _, err := ParseChecked(query); err != nil {
		return 0, fmt.Errorf("query error: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	val, _, _, err := r.api.Query(ctx, query, t)
	if err != nil {
		return 0, fmt.Errorf("query error: %w", err)
	}
	switch v := val.(type) {
	case *model.Scalar:
		return float64(v.Value), nil
	case model.Vector:
		if len(v) == 0 {
			return 0, ErrNoData
		}
		if len(v) > 1 {
			return 0, fmt.Errorf("%d series, want 1", len(v))
		}
		if v[0].Histogram != nil {
			return 0, fmt.Errorf("native histogram sample, want a float")
		}
		return float64(v[0].Value), nil
	case nil:
		return 0, fmt.Errorf("query error: empty response")
	default:
		return 0, fmt.Errorf("query yields a %s, want a scalar or an instant vector", val.Type())
	}
}
