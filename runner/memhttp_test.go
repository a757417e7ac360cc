package runner

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/headroom-dev/headroom/scenario"
	"github.com/headroom-dev/headroom/testbed"
	"github.com/headroom-dev/headroom/transport"
)

// inMemory is Common.HTTP for a test in virtual time (testing/synctest):
// each user's requests are served by h, called in this process, with no
// socket in between (a goroutine blocked on a socket would stop the
// bubble's clock). What h sleeps, the bubble's clock counts.
func inMemory(h http.Handler) func(transport.Options) scenario.HTTPClient {
	return func(o transport.Options) scenario.HTTPClient {
		ctx, cancel := context.WithCancel(context.Background())
		return &memClient{h: h, target: o.Target, timeout: o.Timeout, ctx: ctx, cancel: cancel}
	}
}

// scrapeInMemory is Common.ScrapeClient for a test in virtual time: h
// serves the scrape's requests in this process.
func scrapeInMemory(h http.Handler) *http.Client {
	return &http.Client{Transport: handlerTransport{h}}
}

type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	t.h.ServeHTTP(w, r)
	return w.Result(), nil
}

// testbedInMemory is the testbed with a capacity model, served in memory:
// the target to give Common, and its HTTP. Call it in a synctest bubble.
func testbedInMemory(cfg testbed.Config) (*testbed.Server, *url.URL, func(transport.Options) scenario.HTTPClient) {
	srv := testbed.New(cfg)
	return srv, &url.URL{Scheme: "http", Host: "testbed.invalid"}, inMemory(srv.Handler())
}

// memClient is one user's client of an in-memory handler.
type memClient struct {
	h       http.Handler
	target  *url.URL
	timeout time.Duration
	ctx     context.Context
	cancel  context.CancelFunc
	once    sync.Once
}

func (c *memClient) Do(req *transport.Request, resp *transport.Response) {
	start := time.Now()
	u := req.URL
	if strings.HasPrefix(u, "/") {
		u = c.target.Scheme + "://" + c.target.Host + u
	}
	ctx, timeout := c.ctx, req.Timeout
	if timeout <= 0 {
		timeout = c.timeout
	}
	if timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, timeout)
		defer stop()
	}
	r := httptest.NewRequestWithContext(ctx, req.Method, u, bytes.NewReader(req.Body))
	for _, h := range req.Defaults {
		r.Header.Set(h.Key, h.Value)
	}
	for _, h := range req.Header {
		r.Header.Set(h.Key, h.Value)
	}
	w := httptest.NewRecorder()
	c.h.ServeHTTP(w, r)
	*resp = transport.Response{Latency: time.Since(start)}
	if err := ctx.Err(); err != nil {
		resp.Err = err
		resp.Timeout = c.ctx.Err() == nil
		resp.Canceled = !resp.Timeout
		if resp.Canceled {
			resp.Err = transport.ErrCanceled
		}
		return
	}
	var head bytes.Buffer
	fmt.Fprintf(&head, "HTTP/1.1 %d %s\r\n", w.Code, http.StatusText(w.Code))
	_ = w.Header().Write(&head)
	head.WriteString("\r\n")
	resp.Status, resp.RawHeader, resp.Body = w.Code, head.Bytes(), w.Body.Bytes()
	resp.BytesIn, resp.BytesOut = int64(head.Len()+w.Body.Len()), int64(len(req.Body))
}

func (c *memClient) Cookies() map[string]string { return nil }
func (c *memClient) Cancel()                    { c.once.Do(c.cancel) }
func (c *memClient) Close()                     { c.Cancel() }
