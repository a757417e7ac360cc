package prom

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
)

// TestEmbeddedTimeout: a legal query that takes longer than the timeout
// is cut, saying so; with the default timeout it completes.
func TestEmbeddedTimeout(t *testing.T) {
	s := NewStore(time.Hour)
	now := time.Now()
	for i := range 1000 {
		for j := range 60 {
			s.appendSample(labels.FromStrings("__name__", "x", "i", strconv.Itoa(i)), now.Add(time.Duration(j-60)*time.Second), float64(j))
		}
	}
	e := NewEmbedded(s)
	// 3,600 steps, each summing 1,000 series: 0.1 to 0.2 s on a busy
	// machine, 10 times the timeout below or more however fast the
	// machine, and under -race the whole test took 1.6 s, far under
	// QueryTimeout (10 s). 10,800 steps, 0.6 s without -race, would take
	// some 5 s with it: within reach of QueryTimeout beside busy loops.
	const slow = `max_over_time(sum(x)[1h:1s])`
	e.Timeout = 5 * time.Millisecond
	if _, err := e.Query(context.Background(), slow, now); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("err = %v, want the query timed out", err)
	}
	e.Timeout = 0 // QueryTimeout: the same query is legal, and completes
	if v, err := e.Query(context.Background(), slow, now); err != nil || v != 1000*59 {
		t.Errorf("with the default timeout: %v, %v; want %d", v, err, 1000*59)
	}
}
