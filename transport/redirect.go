package transport

// Redirects, followed as browsers follow them: up to MaxRedirects, the
// method changed to GET on a 303 (and on a 301 or 302 after a POST), the
// user's default headers and cookies only where they belong (Do sends
// them to the target's origin alone), and the request's own credentials
// dropped when a redirect leaves its origin. The hops are folded into the
// one request the scenario made: one sample, its latency from the first
// hop's start to the last's end.

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// MaxRedirects is how many redirects a request follows (Go's net/http and
// k6 stop at 10 too).
const MaxRedirects = 10

func isRedirect(status int) bool {
	switch status {
	case 301, 302, 303, 307, 308:
		return true
	}
	return false
}

// follow follows resp's redirects, resp having answered req.
func (c *Client) follow(req *Request, resp *Response) {
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = c.opt.Timeout
	}
	from := c.absolute(req.URL)
	next := *req // the caller's request is left as it was
	for resp.Err == nil && isRedirect(resp.Status) {
		loc := location(resp.RawHeader)
		if loc == "" { // a 3xx without a Location is the response itself
			return
		}
		if resp.Redirects == MaxRedirects {
			resp.Status, resp.RawHeader, resp.Body = 0, nil, nil
			resp.Err = fmt.Errorf("stopped after %d redirects, the last to %s", MaxRedirects, clipBytes([]byte(loc), 200))
			return
		}
		base, err := url.Parse(from)
		var to *url.URL
		if err == nil {
			to, err = base.Parse(loc)
		}
		if err != nil || (to.Scheme != "http" && to.Scheme != "https") || to.Host == "" {
			resp.Status, resp.RawHeader, resp.Body = 0, nil, nil
			resp.Err = fmt.Errorf("a redirect to %q, not an http(s) URL", clipBytes([]byte(loc), 200))
			return
		}
		to.Fragment = ""
		switch {
		case resp.Status == 303 && next.Method != "HEAD", (resp.Status == 301 || resp.Status == 302) && next.Method == "POST":
			next.Method, next.Body = "GET", nil
			next.Header = without(next.Header, "Content-Type", "Content-Encoding", "Content-Language", "Content-Location")
		}
		if to.Scheme != base.Scheme || to.Host != base.Host {
			next.Header = without(next.Header, "Authorization", "Proxy-Authorization", "Cookie")
		}
		prev := *resp
		if left := timeout - prev.Latency; left > 0 {
			next.URL, next.Timeout = to.String(), left
			c.hop(&next, resp)
		} else { // the redirects took the whole timeout
			*resp = Response{Timeout: true}
		}
		resp.Latency += prev.Latency
		resp.Queued += prev.Queued
		resp.BytesIn += prev.BytesIn
		resp.BytesOut += prev.BytesOut
		resp.Phases.add(prev.Phases)
		resp.Redirects, resp.URL = prev.Redirects+1, to.String()
		if resp.Timeout { // said of the whole request
			resp.Err = fmt.Errorf("timeout after %v", resp.Latency.Round(time.Millisecond))
		}
		from = resp.URL
	}
}

// absolute is a request's URL with the target's scheme and host when it
// is a path.
func (c *Client) absolute(u string) string {
	if !strings.HasPrefix(u, "/") {
		return u
	}
	return c.opt.Target.Scheme + "://" + c.opt.Target.Host + c.basePath + u
}

// location is the Location header of a response head.
func location(head []byte) string {
	for _, h := range parseHeaders(head) {
		if strings.EqualFold(h.Key, "Location") {
			return h.Value
		}
	}
	return ""
}

// without is hs less the headers of these names: a copy when it drops any.
func without(hs []Header, names ...string) []Header {
	var out []Header
	for i, h := range hs {
		drop := false
		for _, n := range names {
			drop = drop || strings.EqualFold(h.Key, n)
		}
		switch {
		case drop && out == nil:
			out = append(make([]Header, 0, len(hs)), hs[:i]...)
		case !drop && out != nil:
			out = append(out, h)
		}
	}
	if out == nil {
		return hs
	}
	return out
}
