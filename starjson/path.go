package starjson

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.starlark.net/starlark"
)

// This file reads parts of a JSON text without decoding the rest: the value at a path (r.json(path)),
// and a top-level field of a WebSocket message (TopField).

// Path is a path into a JSON text, as r.json("posts.0.id") gives it: object keys, list
// indexes and "#" (every element of a list), dot-separated, as k6's res.json(selector) reads
// the simplest of its selectors (GJSON's). A Path is parsed once and never changed: any
// number of goroutines may look it up at once.
type Path struct {
	keys    []string
	index   []int  // keys[i] as a list index, or -1
	each    []bool // keys[i] is "#"
	hasEach bool
}

// lookup is one read of a Path: what it has found so far.
type lookup struct {
	*Path
	all [][]starlark.Value // for a "#" step, what the rest of the path found in each element so far; nil without one

	v     starlark.Value // the value found, once found
	found bool
}

// parsedPaths keeps the paths parsed so far, up to maxParsedPaths: a
// scenario names a few, and reads each on every request (r.json("order")).
var (
	parsedPaths    sync.Map // path -> *Path
	parsedCount    atomic.Int64
	maxParsedPaths = int64(4096)
)

// ParsePath parses path, or returns the Path it parsed before; an error for
// a path that ends in "#".
func ParsePath(path string) (*Path, error) {
	if p, ok := parsedPaths.Load(path); ok {
		return p.(*Path), nil
	}
	p := &Path{keys: strings.Split(path, ".")}
	p.index, p.each = make([]int, len(p.keys)), make([]bool, len(p.keys))
	for i, k := range p.keys {
		p.index[i] = -1
		if n, err := strconv.Atoi(k); err == nil && n >= 0 && k == strconv.Itoa(n) {
			p.index[i] = n
		}
		p.each[i] = k == "#"
		p.hasEach = p.hasEach || p.each[i]
	}
	if p.each[len(p.keys)-1] {
		return nil, fmt.Errorf("a path cannot end in #: # is every element of a list, and needs a step after it (%q); for the list itself leave it out", path+".id")
	}
	if parsedCount.Add(1) <= maxParsedPaths { // past it (paths built from data), parsed each time
		parsedPaths.Store(path, p)
	}
	return p, nil
}

func newLookup(p *Path) *lookup {
	sel := &lookup{Path: p}
	if p.hasEach {
		sel.all = make([][]starlark.Value, len(p.keys))
	}
	return sel
}

// Lookup decodes only the value at p in s: the rest of s is checked as Decode
// checks it (the same errors), but not built, so reading one field of a large body costs
// little more than passing over its bytes. Where s has a key twice, the last one counts, as
// in Decode's dict. found is false when s has no value at p.
func (p *Path) Lookup(s string) (v starlark.Value, found bool, err error) {
	sel := newLookup(p)
	if _, err := decodeWith(s, sel); err != nil {
		return nil, false, err
	}
	return sel.v, sel.found, nil
}

// step reads a value of a container that the first on steps of d.sel lead to; match tells
// whether its key or index is the next step.
func (d *decoder) step(on int, match bool) starlark.Value {
	sel := d.sel
	switch {
	case !match:
		d.on = -1
		d.value()
	case on+1 < len(sel.keys):
		sel.found = false // a later duplicate key replaces what an earlier one led to
		d.on = on + 1
		d.value()
	default:
		d.on, d.discard = -1, false
		v := d.value()
		d.discard = true
		if d.err == nil {
			sel.v, sel.found = v, true
		}
	}
	d.on = on
	return starlark.None
}

// every reads an element of a list that a "#" step (the on-th) applies to: what the rest of
// the path finds in it, if anything, joins the list of what it found in the others.
func (d *decoder) every(on int) starlark.Value {
	sel := d.sel
	d.step(on, true)
	if sel.found {
		sel.all[on] = append(sel.all[on], sel.v)
	}
	return starlark.None
}

// keyText is the text of a quoted object key, unescaped as Decode unescapes it.
func keyText(quoted string) string {
	raw := quoted[1 : len(quoted)-1]
	for i := 0; i < len(raw); i++ {
		if !plainByte[raw[i]] {
			d := decoder{s: quoted}
			if v, ok := d.str().(starlark.String); ok {
				return string(v)
			}
			return raw
		}
	}
	return raw
}

// WhyMissing says where path leads nowhere in v, the whole decoded text:
// `no "order" in the body's object; its keys: error, message`.
func WhyMissing(v starlark.Value, path string) string {
	at := "the top level"
	for _, k := range strings.Split(path, ".") {
		if _, ok := v.(*starlark.List); !ok && k == "#" {
			return fmt.Sprintf("#: the value at %s is a %s, not a list", at, v.Type())
		}
		switch x := v.(type) {
		case *starlark.Dict:
			next, found, _ := x.Get(starlark.String(k))
			if !found {
				keys := make([]string, 0, x.Len())
				for _, key := range x.Keys() {
					keys = append(keys, string(key.(starlark.String)))
				}
				sort.Strings(keys)
				if len(keys) > 10 {
					keys = append(keys[:10], "...")
				}
				return fmt.Sprintf("no %q in the object at %s; its keys: %s", k, at, strings.Join(keys, ", "))
			}
			v = next
		case *starlark.List:
			n, err := strconv.Atoi(k)
			if err != nil || n < 0 || k != strconv.Itoa(n) {
				return fmt.Sprintf("%q is not an index of the list at %s", k, at)
			}
			if n >= x.Len() {
				return fmt.Sprintf("no index %d in the list at %s, of %d", n, at, x.Len())
			}
			v = x.Index(n)
		default:
			return fmt.Sprintf("%q: the value at %s is a %s, not an object or a list", k, at, v.Type())
		}
		if at == "the top level" {
			at = strconv.Quote(k)
		} else {
			at = strconv.Quote(strings.Trim(at, `"`) + "." + k)
		}
	}
	return "" // found
}

// TopField finds key among the keys of the JSON object s and returns its
// value's text, without decoding anything else: how a WebSocket message's
// type and sequence number are read for every message, handler or not. A
// key with escapes is not matched; a malformed object ends the search.
func TopField(s, key string) (string, bool) {
	if key == "" {
		return "", false
	}
	d := decoder{s: s}
	if !d.space() || s[d.i] != '{' {
		return "", false
	}
	d.i++
	for d.space() && s[d.i] == '"' {
		start := d.i
		if !d.skip() {
			return "", false
		}
		k := s[start+1 : d.i-1]
		if !d.space() || s[d.i] != ':' {
			return "", false
		}
		d.i++
		if !d.space() {
			return "", false
		}
		start = d.i
		if !d.skip() {
			return "", false
		}
		if k == key {
			return s[start:d.i], true
		}
		if !d.space() || s[d.i] != ',' {
			return "", false
		}
		d.i++
	}
	return "", false
}

// skip passes over one value (strings and brackets matched, nothing
// checked inside) and reports whether it ended before the input did.
func (d *decoder) skip() bool {
	s := d.s
	depth := 0
	for d.i < len(s) {
		c := s[d.i]
		switch c {
		case '"':
			for d.i++; d.i < len(s) && s[d.i] != '"'; d.i++ {
				if s[d.i] == '\\' {
					d.i++
				}
			}
			if d.i >= len(s) {
				return false
			}
			d.i++
		case '[', '{':
			depth++
			d.i++
		case ']', '}':
			if depth == 0 {
				return true // the end of the enclosing container
			}
			depth--
			d.i++
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return true
			}
			d.i++
		default:
			d.i++
		}
		if depth == 0 && (c == '"' || c == ']' || c == '}') {
			return true
		}
	}
	return depth == 0
}
