package har

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/html"
)

// Correlation: a value that a response gave and a later request sent was
// made by the server for this session (a token, an id, a CSRF value); a
// scenario that sends the recorded value again sends a stale one. So each
// such value is taken from the response as the scenario runs: a source
// (the response, and where in it) and the requests that use it.

// source is where a value came from: a response's JSON field or header.
type source struct {
	entry  int    // the response's entry, in the kept order
	path   string // r.json's path; "" for a header or a page's element
	header string // lower-case header name; "" for a JSON field
	tag    string // a page's element, "input" or "meta", whose name is field
	field  string // the element's name
	number bool   // a JSON number: kept one in a JSON body
	used   []string
	name   string // the scenario's variable, once used
}

// where says what a source is, for the scenario's comments.
func (s *source) where() string {
	if s.header != "" {
		return "header " + s.header
	}
	if s.tag != "" {
		return fmt.Sprintf("html <%s name=%q>", s.tag, s.field)
	}
	return "json " + strconv.Quote(s.path)
}

// index maps values to the first response that gave them, before the
// request being converted.
type index struct {
	by    map[string]*source
	all   []*source       // every source, in the order learnt
	known map[string]bool // values a request sent before any response gave them: the client's own
}

func newIndex() *index { return &index{by: map[string]*source{}, known: map[string]bool{}} }

// candidate says whether v could be a value the server made for the
// session, rather than a word, a flag or a small number that recurs by
// chance.
func candidate(v string) bool {
	if strings.ContainsAny(v, " \t\n") {
		return false
	}
	if allDigits(v) {
		return len(v) >= 4
	}
	return len(v) >= 8
}

func allDigits(v string) bool {
	if v == "" {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// skipHeaders are response headers whose values are the protocol's, not
// the session's.
var skipHeaders = map[string]bool{"date": true, "content-type": true, "content-length": true, "content-encoding": true,
	"cache-control": true, "etag": true, "last-modified": true, "server": true, "vary": true, "expires": true,
	"connection": true, "keep-alive": true, "set-cookie": true, "age": true, "via": true, "strict-transport-security": true,
	"x-content-type-options": true, "x-frame-options": true, "content-security-policy": true, "referrer-policy": true,
	"transfer-encoding": true, "accept-ranges": true, "location": true}

// learn adds what entry i's response gave.
func (x *index) learn(i int, r Response) {
	for _, h := range r.Headers {
		name := strings.ToLower(h.Name)
		if !skipHeaders[name] && !strings.HasPrefix(name, "access-control-") && candidate(h.Value) && !x.known[h.Value] {
			x.add(h.Value, &source{entry: i, header: name})
		}
	}
	if strings.Contains(strings.ToLower(r.Content.MimeType), "html") {
		x.learnHTML(i, r.body())
		return
	}
	if !strings.Contains(strings.ToLower(r.Content.MimeType), "json") {
		return
	}
	var v any
	d := json.NewDecoder(strings.NewReader(r.body()))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return
	}
	x.walk(i, "", v, 0, false)
}

// learnHTML adds what a page gave in its inputs' values and its meta
// tags' content, each known by the element's name: where a server puts a
// session's CSRF token for a form to send back (Django's hidden
// csrfmiddlewaretoken, Rails' <meta name="csrf-token">). At most
// maxElements elements are read.
func (x *index) learnHTML(i int, page string) {
	z := html.NewTokenizer(strings.NewReader(page))
	for n := 0; n < maxElements; {
		tt := z.Next()
		if tt == html.ErrorToken {
			return
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		n++
		name, more := z.TagName()
		tag := string(name)
		if tag != "input" && tag != "meta" {
			continue
		}
		attrs := map[string]string{}
		for more {
			var k, v []byte
			k, v, more = z.TagAttr()
			attrs[string(k)] = string(v)
		}
		v := attrs[htmlAttr(tag)]
		if f := attrs["name"]; f != "" && !strings.ContainsAny(f, `"'<>`) && candidate(v) && !x.known[v] {
			x.add(v, &source{entry: i, tag: tag, field: f})
		}
	}
}

// maxElements bounds the elements of a page learnHTML reads.
const maxElements = 50_000

// htmlAttr is the attribute an element's value is in.
func htmlAttr(tag string) string {
	if tag == "meta" {
		return "content"
	}
	return "value"
}

// maxValues bounds the values a session's responses are searched for in
// later requests: each request's strings are compared with each.
const maxValues = 20_000

// add makes src the source of v, unless an earlier response gave it: an
// echo of a value (an item's page repeating its id) is not where it came
// from.
func (x *index) add(v string, src *source) {
	if x.by[v] != nil || len(x.by) >= maxValues {
		return
	}
	x.by[v] = src
	x.all = append(x.all, src)
}

// walk adds the leaves of a JSON value under path; listed once the path
// has gone through a list.
func (x *index) walk(i int, path string, v any, depth int, listed bool) {
	if depth > 32 {
		return
	}
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if k != "" && !strings.ContainsAny(k, ".#") && !allDigits(k) {
				x.walk(i, join(k), v[k], depth+1, listed)
			}
		}
	case []any:
		for n, e := range v {
			if n >= 100 {
				break
			}
			x.walk(i, join(strconv.Itoa(n)), e, depth+1, true)
		}
	case string:
		if candidate(v) && !x.known[v] && (!listed || madeInList(v)) {
			x.add(v, &source{entry: i, path: path})
		}
	case json.Number:
		if s := v.String(); allDigits(s) && candidate(s) && !x.known[s] {
			x.add(s, &source{entry: i, path: path, number: true})
		}
	}
}

// piece is a literal or a variable's value in a converted string.
type piece struct {
	lit string
	src *source
}

// find splits s into literals and the values the index knows, marking
// each source used by use; it says whether one was found.
func (x *index) find(s, use string) ([]piece, bool) {
	if src := x.by[s]; src != nil {
		src.used = append(src.used, use)
		return []piece{{src: src}}, true
	}
	// a known value inside s ("Bearer TOKEN", "a/b?id=ID"): the longest first
	var best string
	for v := range x.by {
		if len(v) >= 8 && len(v) > len(best) && strings.Contains(s, v) {
			best = v
		}
	}
	if best == "" {
		return nil, false
	}
	src := x.by[best]
	src.used = append(src.used, use)
	before, after, _ := strings.Cut(s, best)
	var out []piece
	if before != "" {
		out = append(out, piece{lit: before})
	}
	out = append(out, piece{src: src})
	if after != "" {
		rest, ok := x.find(after, use)
		if !ok {
			rest = []piece{{lit: after}}
		}
		out = append(out, rest...)
	}
	return out, true
}

// remember notes a value a request sent that no response gave: the
// client's own (a name it typed, an id it made), never correlated later.
func (x *index) remember(s string) {
	if candidate(s) && x.by[s] == nil {
		x.known[s] = true
	}
}

// madeInList says whether a string a response listed is worth taking
// from its place in the list: an id the server made (it has digits: a
// number, a token, a UUID), which a fresh server makes anew. A name (a
// metric's, a label's, a title: no digits) stays as recorded: a fresh
// server's list may hold more or fewer names, and the one at the recorded
// place would be another, where the name itself still answers.
func madeInList(v string) bool { return strings.ContainsAny(v, "0123456789") }

// dynamic matches values that look made for the session (a UUID, a long
// token, a timestamp in ms): sent by a request but given by no response,
// they are listed for the user to look at.
var dynamic = regexp.MustCompile(`^(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|[A-Za-z0-9_\-]{20,}|1[0-9]{12})$`)

// looksDynamic is dynamic, for a value holding letters and digits both
// (a long word is not a token) or a UUID or timestamp.
func looksDynamic(v string) bool {
	if !dynamic.MatchString(v) {
		return false
	}
	letters, digits := false, false
	for _, c := range v {
		switch {
		case c >= '0' && c <= '9':
			digits = true
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			letters = true
		}
	}
	return digits && (letters || len(v) == 13)
}

// knows says whether a response gave v.
func (x *index) knows(v string) bool { return x.by[v] != nil }
