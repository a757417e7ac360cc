package har

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Options say what a conversion keeps.
type Options struct {
	Source string // the HAR file's name, for the scenario's header
	Static bool   // keep the pages' assets (scripts, styles, images, fonts)
	Origin string // the application's origin (scheme://host:port); "": the one most requests went to
}

// Scenario is a conversion's outcome: the scenario, and what it did.
type Scenario struct {
	Source       []byte
	Origin       string
	Kept         int      // requests in the scenario
	Assets       int      // static assets left out
	Elsewhere    []string // origins left out, with their requests' count
	Correlations []string // "v1: GET /login json \"token\" -> POST /items header authorization", …
	Uncorrelated []string // values that look made for the session that no response gave
}

// request is one kept entry, its parts split where values were found.
type request struct {
	e        Entry
	url      []piece
	name     string
	headers  []header
	json     any     // a JSON body, strings as []piece, correlated numbers as *source
	body     []piece // any other body
	status   int
	redirect bool // a 3xx kept as it came: the next entry asks for where it leads
	sources  []*source
}

type header struct {
	name string
	val  []piece
}

// Convert makes a scenario of the session.
func Convert(l *Log, opt Options) (*Scenario, error) {
	sc := &Scenario{}
	kept := keep(l, opt, sc)
	if len(kept) == 0 {
		return nil, fmt.Errorf("no request to %s to convert (%d static assets left out: --static keeps them)", or(sc.Origin, "any origin"), sc.Assets)
	}
	x := newIndex()
	reqs := make([]*request, len(kept))
	for i, e := range kept {
		reqs[i] = convertRequest(e, sc.Origin, x, &sc.Uncorrelated)
		x.learn(i, e.Response)
	}
	// The sources used, numbered in order, each extracted after its request.
	n := 0
	for _, s := range x.all {
		if len(s.used) == 0 {
			continue
		}
		n++
		s.name = "v" + strconv.Itoa(n)
		r := reqs[s.entry]
		r.sources = append(r.sources, s)
		sc.Correlations = append(sc.Correlations, fmt.Sprintf("%s: %s %s -> %s", s.name, r.name, s.where(), strings.Join(uniq(s.used), ", ")))
	}
	sc.Kept = len(reqs)
	sc.Source = write(l, kept, reqs, opt, sc)
	return sc, nil
}

// keep picks the entries to convert, in the order they started: those to
// the application's origin, assets left out unless asked.
func keep(l *Log, opt Options, sc *Scenario) []Entry {
	count := map[string]int{}
	for _, e := range l.Entries {
		if !static(e) {
			count[origin(e.Request.URL)]++
		}
	}
	sc.Origin = opt.Origin
	if sc.Origin == "" {
		for o, n := range count {
			if n > count[sc.Origin] || n == count[sc.Origin] && o < sc.Origin {
				sc.Origin = o
			}
		}
	}
	var kept []Entry
	elsewhere := map[string]int{}
	for _, e := range l.Entries {
		switch o := origin(e.Request.URL); {
		case o != sc.Origin:
			elsewhere[o]++
		case static(e) && !opt.Static:
			sc.Assets++
		default:
			kept = append(kept, e)
		}
	}
	for o, n := range elsewhere {
		sc.Elsewhere = append(sc.Elsewhere, fmt.Sprintf("%s (%d)", o, n))
	}
	sort.Strings(sc.Elsewhere)
	slices.SortStableFunc(kept, func(a, b Entry) int { return a.Started.Compare(b.Started) })
	return kept
}

func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// dropHeaders are request headers the user's client makes itself (or that
// name the recording's host, cache or browser).
var dropHeaders = map[string]bool{"host": true, "content-length": true, "cookie": true, "accept-encoding": true, "connection": true,
	"user-agent": true, "origin": true, "referer": true, "upgrade-insecure-requests": true, "pragma": true, "cache-control": true,
	"if-none-match": true, "if-modified-since": true, "accept-language": true, "priority": true, "te": true, "dnt": true}

// convertRequest splits e's request where the index knows its values,
// and lists those that look made for the session but that it does not.
func convertRequest(e Entry, origin string, x *index, uncorrelated *[]string) *request {
	u, _ := url.Parse(e.Request.URL)
	r := &request{e: e, status: e.Response.Status}
	segs := strings.Split(u.EscapedPath(), "/")
	nameSegs := make([]string, len(segs))
	for i, seg := range segs {
		nameSegs[i] = seg
		if seg != "" && (x.knows(seg) || idLike(seg)) {
			nameSegs[i] = "{id}"
		}
	}
	r.name = e.Request.Method + " " + strings.Join(nameSegs, "/")
	label := r.name
	part := func(s, where string) []piece {
		if ps, ok := x.find(s, label+" "+where); ok {
			return ps
		}
		if looksDynamic(s) {
			*uncorrelated = append(*uncorrelated, fmt.Sprintf("%s: %s = %q", label, where, s))
		}
		x.remember(s)
		return []piece{{lit: s}}
	}
	// the path, a segment at a time, then the query, a value at a time
	for i, seg := range segs {
		if i > 0 {
			r.url = append(r.url, piece{lit: "/"})
		}
		if seg != "" {
			r.url = append(r.url, part(seg, "path")...)
		}
	}
	if u.RawQuery != "" {
		for i, kv := range strings.Split(u.RawQuery, "&") {
			sep := "&"
			if i == 0 {
				sep = "?"
			}
			k, v, _ := strings.Cut(kv, "=")
			r.url = append(r.url, piece{lit: sep + k + "="})
			if v != "" {
				r.url = append(r.url, part(v, "query "+k)...)
			}
		}
	}
	for _, h := range e.Request.Headers {
		name := strings.ToLower(h.Name)
		if dropHeaders[name] || strings.HasPrefix(name, ":") || strings.HasPrefix(name, "sec-") {
			continue
		}
		r.headers = append(r.headers, header{name: name, val: part(h.Value, "header "+name)})
	}
	if pd := e.Request.PostData; pd != nil && pd.Text != "" {
		var v any
		d := json.NewDecoder(strings.NewReader(pd.Text))
		d.UseNumber()
		if strings.Contains(strings.ToLower(pd.MimeType), "json") && d.Decode(&v) == nil {
			r.json = convertJSON(v, "json", part, x, label)
			r.headers = slices.DeleteFunc(r.headers, func(h header) bool { return h.name == "content-type" })
		} else {
			r.body = part(pd.Text, "body")
		}
	}
	if r.status >= 300 && r.status < 400 && headerValue(e.Response.Headers, "location") != "" {
		r.redirect = true
	}
	return r
}

// idLike says whether a path segment is an id (a number, a UUID, a long
// hex or token), named {id} so that every one is counted under one name.
func idLike(seg string) bool {
	return allDigits(seg) || looksDynamic(seg) || len(seg) >= 16 && strings.Trim(strings.ToLower(seg), "0123456789abcdef") == ""
}

// convertJSON is v with each string split where values were found, and
// each number the index gave kept as its source.
func convertJSON(v any, path string, part func(s, where string) []piece, x *index, label string) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			out[k] = convertJSON(e, path+"."+k, part, x, label)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = convertJSON(e, path+"."+strconv.Itoa(i), part, x, label)
		}
		return out
	case string:
		return part(v, strconv.Quote(strings.TrimPrefix(path, "json."))+" in the body")
	case json.Number:
		if s := x.by[v.String()]; s != nil && s.number {
			s.used = append(s.used, label+" "+strconv.Quote(strings.TrimPrefix(path, "json."))+" in the body")
			return s
		}
		x.remember(v.String())
		return v
	}
	return v
}

func uniq(ss []string) []string {
	out := slices.Clone(ss)
	slices.Sort(out)
	return slices.Compact(out)
}

func or(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// pauses are the recording's pauses between its pages: from a page's last
// response to the next page's first request, each within [0, 60 s].
func pauses(l *Log, kept []Entry) []time.Duration {
	var out []time.Duration
	var end time.Time
	page := "\x00"
	for _, e := range kept {
		if e.PageRef != page && !end.IsZero() {
			out = append(out, min(max(e.Started.Sub(end), 0), time.Minute))
		}
		page = e.PageRef
		if t := e.Started.Add(time.Duration(e.TimeMs * float64(time.Millisecond))); t.After(end) {
			end = t
		}
	}
	return out
}

// quote is s as a Starlark string literal.
func quote(s string) string { return strconv.Quote(s) }

// expr is pieces as a Starlark expression of a string.
func expr(ps []piece) string {
	var parts []string
	for _, p := range ps {
		switch {
		case p.src == nil:
			if n := len(parts); n > 0 && strings.HasSuffix(parts[n-1], `"`) && !strings.HasPrefix(parts[n-1], "str(") {
				prev, _ := strconv.Unquote(parts[n-1])
				parts[n-1] = quote(prev + p.lit)
				continue
			}
			parts = append(parts, quote(p.lit))
		case p.src.number:
			parts = append(parts, fmt.Sprintf("str(user.state[%q])", p.src.name))
		default:
			parts = append(parts, fmt.Sprintf("user.state[%q]", p.src.name))
		}
	}
	if len(parts) == 0 {
		return `""`
	}
	return strings.Join(parts, " + ")
}

// value is a converted JSON value as a Starlark expression.
func value(v any, b *bytes.Buffer) {
	switch v := v.(type) {
	case map[string]any:
		b.WriteString("{")
		for i, k := range slices.Sorted(maps.Keys(v)) {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quote(k) + ": ")
			value(v[k], b)
		}
		b.WriteString("}")
	case []any:
		b.WriteString("[")
		for i, e := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			value(e, b)
		}
		b.WriteString("]")
	case []piece:
		b.WriteString(expr(v))
	case *source:
		fmt.Fprintf(b, "user.state[%q]", v.name)
	case json.Number:
		b.WriteString(v.String())
	case bool:
		b.WriteString(map[bool]string{true: "True", false: "False"}[v])
	case nil:
		b.WriteString("None")
	}
}
