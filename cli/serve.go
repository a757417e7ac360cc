package cli

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// serveUntil serves h on ln until ctx ends (Ctrl-C), then shuts the
// server down, giving requests in flight grace to finish: the life of a
// command that is a server (testbed, profiler). It returns the exit code.
func serveUntil(ctx context.Context, env Env, name string, ln net.Listener, h http.Handler, grace time.Duration) int {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		_ = hs.Shutdown(sctx)
		_ = hs.Close() // what the grace did not see finish is cut
		return ExitOK
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return ExitOK
		}
		return fail(env, ExitError, "%s: %v", name, err)
	}
}
