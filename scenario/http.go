package scenario

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"
	"unsafe"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/starjson"
	"github.com/headroom-dev/headroom/transport"
	"go.starlark.net/starlark"
)

// httpValue is user.http: request methods and the user's default headers.
type httpValue struct {
	u       *User
	headers *starlark.Dict                      // sent with every request; the scenario may change it
	bound   [len(methodNames)]*starlark.Builtin // methods bound to this value, made on first use
	req     transport.Request                   // reused by each request: Do does not keep it
}

var _ starlark.HasAttrs = (*httpValue)(nil)

func (h *httpValue) String() string        { return "<user.http>" }
func (h *httpValue) Type() string          { return "http" }
func (h *httpValue) Freeze()               {}
func (h *httpValue) Truth() starlark.Bool  { return true }
func (h *httpValue) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: http") }
func (h *httpValue) AttrNames() []string {
	return []string{"cookies", "delete", "get", "head", "headers", "patch", "post", "put", "request"}
}

func (h *httpValue) Attr(name string) (starlark.Value, error) {
	switch name {
	case "headers":
		return h.headers, nil
	case "cookies":
		d := starlark.NewDict(len(h.u.env.HTTP.Cookies()))
		for k, v := range h.u.env.HTTP.Cookies() {
			_ = d.SetKey(starlark.String(k), starlark.String(v))
		}
		return d, nil
	}
	for i, m := range methodNames {
		if m == name {
			if h.bound[i] == nil {
				h.bound[i] = httpMethods[m].BindReceiver(h)
			}
			return h.bound[i], nil
		}
	}
	return nil, nil
}

// methodNames are the keys of httpMethods, in a fixed order.
var methodNames = [...]string{"get", "post", "put", "delete", "patch", "head", "request"}

// httpMethods are user.http's methods; each user binds those it uses to its
// own value once. Immutable.
var httpMethods = map[string]*starlark.Builtin{
	"get":    starlark.NewBuiltin("http.get", method("GET")),
	"head":   starlark.NewBuiltin("http.head", method("HEAD")),
	"post":   starlark.NewBuiltin("http.post", method("POST")),
	"put":    starlark.NewBuiltin("http.put", method("PUT")),
	"patch":  starlark.NewBuiltin("http.patch", method("PATCH")),
	"delete": starlark.NewBuiltin("http.delete", method("DELETE")),
	"request": starlark.NewBuiltin("http.request", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		if len(args) == 0 {
			return nil, fmt.Errorf("http.request: missing method")
		}
		m, ok := starlark.AsString(args[0])
		if !ok {
			return nil, fmt.Errorf("http.request: method is a %s, want a string", args[0].Type())
		}
		return b.Receiver().(*httpValue).do(th, strings.ToUpper(m), b, args[1:], kw)
	}),
}

func method(m string) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		return b.Receiver().(*httpValue).do(th, m, b, args, kw)
	}
}

// requestArgs are a request call's arguments.
type requestArgs struct {
	url                         string
	params, headers             *starlark.Dict
	json, body, expect, timeout starlark.Value
	name                        string
	longPoll                    bool // long_poll=True: the sample is a metrics.Poll
	noRedirect                  bool // redirect=False
}

// unpackRequest reads url, params=, headers=, json=, body=, name=,
// expect=, timeout=, long_poll=, redirect= (url may also be given by keyword). It does what
// starlark.UnpackArgs would, without its per-call allocations: this runs
// for every request.
func unpackRequest(fn string, args starlark.Tuple, kw []starlark.Tuple) (a requestArgs, err error) {
	var urlV starlark.Value
	switch len(args) {
	case 0:
	case 1:
		urlV = args[0]
	default:
		return a, fmt.Errorf("%s: got %d positional arguments, want 1 (the URL); the rest are keywords: params=, headers=, json=, body=, name=, expect=, timeout=, long_poll=, redirect=", fn, len(args))
	}
	dict := func(k string, v starlark.Value) (*starlark.Dict, error) {
		if v == starlark.None {
			return nil, nil
		}
		d, ok := v.(*starlark.Dict)
		if !ok {
			return nil, fmt.Errorf("%s: %s= is a %s, want a dict", fn, k, v.Type())
		}
		return d, nil
	}
	for _, p := range kw {
		k := string(p[0].(starlark.String))
		v := p[1]
		switch k {
		case "url":
			if urlV != nil {
				return a, fmt.Errorf("%s: got the URL twice", fn)
			}
			urlV = v
		case "params":
			a.params, err = dict(k, v)
		case "headers":
			a.headers, err = dict(k, v)
		case "json":
			a.json = v
		case "body":
			a.body = v
		case "expect":
			a.expect = v
		case "timeout":
			a.timeout = v
		case "name":
			n, ok := starlark.AsString(v)
			if !ok {
				return a, fmt.Errorf("%s: name= is a %s, want a string", fn, v.Type())
			}
			a.name = n
		case "long_poll", "redirect":
			b, ok := v.(starlark.Bool)
			if !ok {
				return a, fmt.Errorf("%s: %s= is a %s, want True or False", fn, k, v.Type())
			}
			if k == "redirect" {
				a.noRedirect = !bool(b)
			} else {
				a.longPoll = bool(b)
			}
		default:
			return a, fmt.Errorf("%s: unexpected keyword argument %s=", fn, k)
		}
		if err != nil {
			return a, err
		}
	}
	if urlV == nil {
		return a, fmt.Errorf("%s: missing the URL", fn)
	}
	u, ok := starlark.AsString(urlV)
	if !ok {
		return a, fmt.Errorf("%s: URL is a %s, want a string", fn, urlV.Type())
	}
	a.url = u
	return a, nil
}

// do sends one request: url, params=, headers=, json=, body=, name=, expect=, timeout=, long_poll=.
//
// Its frame is on the stack under the whole request (a dial included), so
// building the request is left to build, whose larger frame is gone by
// then: a user's goroutine stack then stays within 8 KB (see
// docs/BENCHMARKS.md, memory per idle user).
func (h *httpValue) do(th *starlark.Thread, method string, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	name, expect, kind, err := h.build(th, method, b, args, kw)
	if err != nil {
		return nil, err
	}
	return h.u.send(name, &h.req, expect, kind), nil
}

// build fills h.req from a request call's arguments and returns the
// request's name, expected statuses and sample kind (metrics.Poll for
// long_poll=True, else metrics.Request).
//
//go:noinline
func (h *httpValue) build(th *starlark.Thread, method string, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (string, []int, metrics.Kind, error) {
	a, err := unpackRequest(b.Name(), args, kw)
	if err != nil {
		return "", nil, 0, err
	}
	kind := metrics.Request
	if a.longPoll {
		kind = metrics.Poll
	}
	rawURL, params, headers, jsonV, bodyV, name, expectV, timeoutV := a.url, a.params, a.headers, a.json, a.body, a.name, a.expect, a.timeout
	if err := checkMethod(b.Name(), method); err != nil {
		return "", nil, 0, err
	}
	if err := checkURL(b.Name(), rawURL); err != nil {
		return "", nil, 0, err
	}
	req := &h.req
	*req = transport.Request{Method: method, URL: rawURL, Header: req.Header[:0], Defaults: req.Defaults[:0], NoRedirect: a.noRedirect}
	if params != nil && params.Len() > 0 {
		q := url.Values{}
		for _, it := range params.Items() {
			q.Add(plain(it[0]), plain(it[1]))
		}
		sep := "?"
		if strings.Contains(rawURL, "?") {
			sep = "&"
		}
		req.URL += sep + q.Encode()
	}
	if h.headers.Len() > 0 { // the transport sends them to the target's origin only
		for _, it := range h.headers.Items() {
			k, v := plain(it[0]), plain(it[1])
			if err := checkHeader(b.Name(), " (from user.http.headers)", k, v); err != nil {
				return "", nil, 0, err
			}
			req.Defaults = append(req.Defaults, transport.Header{Key: k, Value: v})
		}
	}
	if headers != nil {
		for _, it := range headers.Items() {
			k, v := plain(it[0]), plain(it[1])
			if err := checkHeader(b.Name(), "", k, v); err != nil {
				return "", nil, 0, err
			}
			req.Header = append(req.Header, transport.Header{Key: k, Value: v})
		}
	}
	if err := setBody(th, b.Name(), req, jsonV, bodyV); err != nil {
		return "", nil, 0, err
	}
	expect, err := expectSet(expectV)
	if err != nil {
		return "", nil, 0, fmt.Errorf("%s: %w", b.Name(), err)
	}
	if timeoutV != nil {
		d, err := Duration(timeoutV)
		if err != nil {
			return "", nil, 0, fmt.Errorf("%s: timeout=: %w", b.Name(), err)
		}
		if d <= 0 { // the transport would take it for "the default"
			return "", nil, 0, fmt.Errorf("%s: timeout= must be more than 0, got %v; leave it out for the run's --timeout", b.Name(), d)
		}
		req.Timeout = d
	}
	if name == "" {
		name = defaultName(method, rawURL)
	}
	return name, expect, kind, nil
}

// setBody gives req the body of json= (encoded, with its Content-Type)
// or body=, if either.
func setBody(th *starlark.Thread, fn string, req *transport.Request, jsonV, bodyV starlark.Value) error {
	switch {
	case jsonV != nil && bodyV != nil:
		return fmt.Errorf("%s: give json= or body=, not both", fn)
	case jsonV != nil:
		enc, err := starlark.Call(th, jsonModule.Members["encode"], starlark.Tuple{jsonV}, nil)
		if err != nil {
			return fmt.Errorf("%s: json=: %w", fn, err)
		}
		req.Body = []byte(enc.(starlark.String))
		req.Header = append(req.Header, transport.Header{Key: "Content-Type", Value: "application/json"})
	case bodyV != nil:
		switch x := bodyV.(type) {
		case starlark.String:
			req.Body = []byte(x)
		case starlark.Bytes:
			req.Body = []byte(x)
		default:
			return fmt.Errorf("%s: body= is a %s, want a string or bytes", fn, bodyV.Type())
		}
	}
	return nil
}

// defaultName is METHOD plus the path without its query: the request name
// when the scenario gives none. Paths with ids should be named explicitly.
func defaultName(method, raw string) string {
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		raw = raw[:i]
	}
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		raw = u.Path
	}
	return method + " " + raw
}

// expectSet reads expect=: a status, or a list or tuple of statuses, each
// in [100, 999]. nil means the default, any status below 400.
func expectSet(v starlark.Value) ([]int, error) {
	if v == nil || v == starlark.None {
		return nil, nil
	}
	if i, ok := v.(starlark.Int); ok {
		n, err := status(i)
		if err != nil {
			return nil, err
		}
		return []int{n}, nil
	}
	it, ok := v.(starlark.Iterable)
	if !ok {
		return nil, fmt.Errorf("expect= is a %s, want a status or a list of statuses", v.Type())
	}
	var out []int
	iter := it.Iterate()
	defer iter.Done()
	var x starlark.Value
	for iter.Next(&x) {
		i, ok := x.(starlark.Int)
		if !ok {
			return nil, fmt.Errorf("expect= holds a %s, want statuses such as 200", x.Type())
		}
		n, err := status(i)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("expect= is empty, so no response could succeed; give statuses such as [200, 204], or leave it out for any status below 400")
	}
	return out, nil
}

// status reads one status of expect=: a response's status has three digits.
func status(i starlark.Int) (int, error) {
	n, ok := i.Int64()
	if !ok || n < 100 || n > 999 {
		return 0, fmt.Errorf("expect= holds %v, which no response has: statuses are 100 to 999", i)
	}
	return int(n), nil
}

func plain(v starlark.Value) string {
	if s, ok := starlark.AsString(v); ok {
		return s
	}
	return v.String()
}

// send does the request, records it as a sample of kind (metrics.Request
// or metrics.Poll), and notes failures for the action.
func (u *User) send(name string, req *transport.Request, expect []int, kind metrics.Kind) *responseValue {
	rv := &responseValue{url: req.URL}
	resp := &rv.r
	u.env.HTTP.Do(req, resp)
	s := metrics.Sample{Kind: kind, Name: name, Status: resp.Status, Latency: resp.Latency,
		BytesIn: resp.BytesIn, BytesOut: resp.BytesOut, BodyIn: int64(len(resp.Body)), HTTP2: resp.HTTP2, Setup: u.setup}
	switch {
	case resp.Canceled:
		s.Outcome = metrics.Canceled
	case resp.Timeout:
		s.Outcome, s.Message = metrics.Timeout, resp.Err.Error()
	case resp.Err != nil:
		s.Outcome, s.Message = metrics.Failed, resp.Err.Error()
	case !expected(resp.Status, expect):
		s.Outcome, s.Message = metrics.Failed, fmt.Sprintf("status %d", resp.Status)
	}
	timePhases(&s, &resp.Phases, resp.Status > 0)
	if resp.Held > 0 && resp.Status > 0 {
		s.Phases[metrics.PhaseUnread], s.Timed = resp.Held, s.Timed|1<<metrics.PhaseUnread
	}
	u.fromIntended(&s)
	if s.Intended { // a wait for a shared connection is not the target's time, nor a response waiting for headroom to read it
		s.Service = max(s.Service-resp.Queued-resp.Held, 0)
	}
	u.generators += resp.Queued + resp.Held // nor the action's
	u.env.Record.Record(s)
	u.noteRequest(name, &s)
	return rv
}

// timePhases puts the phases a request went through into its sample: the
// connection's when it made one (DNS and TLS when they took time: a name
// resolved, https), the wait and receive when a response came.
func timePhases(s *metrics.Sample, ph *transport.Phases, responded bool) {
	if ph.Dialed {
		s.Phases[metrics.PhaseConnect], s.Timed = ph.Connect, 1<<metrics.PhaseConnect
		if ph.DNS > 0 {
			s.Phases[metrics.PhaseDNS], s.Timed = ph.DNS, s.Timed|1<<metrics.PhaseDNS
		}
		if ph.TLS > 0 {
			s.Phases[metrics.PhaseTLS], s.Timed = ph.TLS, s.Timed|1<<metrics.PhaseTLS
		}
	}
	if responded {
		s.Phases[metrics.PhaseWait], s.Phases[metrics.PhaseReceive] = ph.Wait, ph.Receive
		s.Timed |= 1<<metrics.PhaseWait | 1<<metrics.PhaseReceive
	}
}

func expected(status int, expect []int) bool {
	if expect == nil {
		return status >= 100 && status < 400
	}
	for _, e := range expect {
		if e == status {
			return true
		}
	}
	return false
}

// responseValue is what user.http.*() returns.
type responseValue struct {
	r   transport.Response
	url string
}

var _ starlark.HasAttrs = (*responseValue)(nil)

func (r *responseValue) String() string {
	return fmt.Sprintf("<response %d %s>", r.r.Status, r.url)
}
func (r *responseValue) Type() string { return "response" }
func (r *responseValue) Freeze()      {}
func (r *responseValue) Truth() starlark.Bool {
	return starlark.Bool(r.r.Err == nil && r.r.Status < 400)
}
func (r *responseValue) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: response") }
func (r *responseValue) AttrNames() []string {
	return []string{"error", "headers", "json", "ms", "ok", "protocol", "redirects", "status", "text", "url"}
}

func (r *responseValue) Attr(name string) (starlark.Value, error) {
	switch name {
	case "status":
		return starlark.MakeInt(r.r.Status), nil
	case "ok":
		return r.Truth(), nil
	case "redirects":
		return starlark.MakeInt(r.r.Redirects), nil
	case "protocol": // as nginx logs it
		switch {
		case r.r.Status == 0:
			return starlark.None, nil
		case r.r.HTTP2:
			return starlark.String("HTTP/2.0"), nil
		}
		return starlark.String("HTTP/1.1"), nil
	case "url": // where the response came from: the last redirect's, or the URL asked for
		if r.r.URL != "" {
			return starlark.String(r.r.URL), nil
		}
		return starlark.String(r.url), nil
	case "text":
		return r.body(), nil
	case "ms":
		return starlark.Float(float64(r.r.Latency) / float64(time.Millisecond)), nil
	case "error":
		if r.r.Err == nil {
			return starlark.None, nil
		}
		return starlark.String(r.r.Err.Error()), nil
	case "headers":
		hs := r.r.Headers()
		d := starlark.NewDict(len(hs))
		keys := make([]string, 0, len(hs))
		vals := map[string]string{}
		for _, h := range hs {
			k := strings.ToLower(h.Key)
			if _, ok := vals[k]; !ok {
				keys = append(keys, k)
				vals[k] = h.Value
			} else {
				vals[k] += ", " + h.Value
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			_ = d.SetKey(starlark.String(k), starlark.String(vals[k]))
		}
		return d, nil
	case "json":
		return jsonMethod("response.json", func() (string, error) {
			if r.r.Err != nil {
				return "", fmt.Errorf("response.json: no response (%v)", r.r.Err)
			}
			return string(r.body()), nil
		}, func(err error) error {
			if lim := (*starjson.LimitError)(nil); errors.As(err, &lim) {
				return fmt.Errorf("response.json: %w", err)
			}
			return fmt.Errorf("response.json: status %d body is not JSON (%v): %s", r.r.Status, err, clip(string(r.r.Body), 80))
		}), nil
	}
	return nil, nil
}

// body is the response body as a Starlark string without copying it: the
// transport hands each response a slice of its own that nothing writes
// to afterwards, so r.text and r.json() of a 60 MB body cost no second
// 60 MB.
func (r *responseValue) body() starlark.String {
	b := r.r.Body
	if len(b) == 0 {
		return ""
	}
	return starlark.String(unsafe.String(unsafe.SliceData(b), len(b)))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
