package runner

import (
	"context"
	"net"
	"net/url"
	"testing"

	"github.com/headroom-dev/headroom/internal/testing/memhttp"
	"github.com/headroom-dev/headroom/testbed"
)

// testbedInMemory is the testbed with a capacity model, served in memory
// (memhttp.Dial): the target to give Common, and its Dial. Call it in a
// synctest bubble.
func testbedInMemory(t *testing.T, cfg testbed.Config) (*testbed.Server, *url.URL, func(context.Context, string, string) (net.Conn, error)) {
	srv := testbed.New(cfg)
	return srv, &url.URL{Scheme: "http", Host: "testbed.invalid"}, memhttp.Dial(t, srv.Handler())
}
