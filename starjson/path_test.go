package starjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"go.starlark.net/starlark"
)

// lookupPath is ParsePath and Path.Lookup in one.
func lookupPath(s, path string) (starlark.Value, bool, error) {
	p, err := ParsePath(path)
	if err != nil {
		return nil, false, err
	}
	return p.Lookup(s)
}

// samePicks fails t unless Path.Lookup agrees with Decode on s for every
// path to a value in it (up to 200, four steps deep), "#" paths over its lists,
// and a path beside each that leads nowhere: the same value as resolvePath finds
// in the whole decoding, or not found, or the same error.
func samePicks(t *testing.T, s string) {
	t.Helper()
	whole, err := Decode(s)
	if err != nil {
		for _, path := range []string{"a", "0", "order", "a.b.0", "#.id"} {
			if _, _, perr := lookupPath(s, path); perr == nil || perr.Error() != err.Error() {
				t.Fatalf("%.200q at %q: error %v, Decode's is %v", s, path, perr, err)
			}
		}
		return
	}
	var paths []string
	var walk func(prefix string, v starlark.Value, depth int)
	walk = func(prefix string, v starlark.Value, depth int) {
		if depth == 4 || len(paths) > 200 {
			return
		}
		join := func(k string) string {
			if prefix == "" {
				return k
			}
			return prefix + "." + k
		}
		switch x := v.(type) {
		case *starlark.Dict:
			for _, kv := range x.Items() {
				k := string(kv[0].(starlark.String))
				if strings.Contains(k, ".") || k == "" || k == "#" {
					continue // not a path's step
				}
				paths = append(paths, join(k))
				walk(join(k), kv[1], depth+1)
			}
			paths = append(paths, join("no such key"), join("#.a"))
		case *starlark.List:
			for i := range x.Len() {
				paths = append(paths, join(strconv.Itoa(i)))
				walk(join(strconv.Itoa(i)), x.Index(i), depth+1)
				walk(join("#"), x.Index(i), depth+1) // the paths of an element, over every element
			}
			paths = append(paths, join(strconv.Itoa(x.Len())), join("01"))
		default:
			paths = append(paths, join("0"), join("#.0"))
		}
	}
	walk("", whole, 0)
	for _, path := range paths {
		if strings.HasSuffix(path, "#") {
			continue
		}
		want, wfound := resolvePath(whole, strings.Split(path, "."))
		got, found, err := lookupPath(s, path)
		switch {
		case err != nil:
			t.Fatalf("%.200q at %q: %v, though Decode decodes it", s, path, err)
		case found != wfound:
			t.Fatalf("%.200q at %q: found %v, want %v", s, path, found, wfound)
		case found && typedRepr(got) != typedRepr(want):
			t.Fatalf("%.200q at %q: %.300s, want %.300s", s, path, typedRepr(got), typedRepr(want))
		}
	}
}

// resolvePath is what a path means, on decoded values: a key of a dict, an index of
// a list, or with "#" the list of what the rest finds in each element that has it.
func resolvePath(v starlark.Value, steps []string) (starlark.Value, bool) {
	if len(steps) == 0 {
		return v, true
	}
	k := steps[0]
	switch x := v.(type) {
	case *starlark.Dict:
		if k == "#" {
			return nil, false
		}
		next, found, _ := x.Get(starlark.String(k))
		if !found {
			return nil, false
		}
		return resolvePath(next, steps[1:])
	case *starlark.List:
		if k == "#" {
			var all []starlark.Value
			for i := range x.Len() {
				if e, ok := resolvePath(x.Index(i), steps[1:]); ok {
					all = append(all, e)
				}
			}
			return starlark.NewList(all), true
		}
		n, err := strconv.Atoi(k)
		if err != nil || n < 0 || k != strconv.Itoa(n) || n >= x.Len() {
			return nil, false
		}
		return resolvePath(x.Index(n), steps[1:])
	}
	return nil, false
}

func TestTopField(t *testing.T) {
	for _, c := range []struct {
		s, key, want string
		ok           bool
	}{
		{`{"event":"posted","seq":12,"data":{"post":"{\"id\":1}"}}`, "event", `"posted"`, true},
		{`{"event":"posted","seq":12,"data":{"post":"{\"id\":1}"}}`, "seq", `12`, true},
		{`{"data":{"seq":1,"event":"x"},"broadcast":[1,[2,{"seq":3}]],"seq":7}`, "seq", `7`, true},
		{`{"data":{"seq":1,"event":"x"}}`, "seq", ``, false},
		{` { "seq" : 5 , "event" : "a\"b" } `, "event", `"a\"b"`, true},
		{` { "seq" : 5 , "event" : "a\"b" } `, "seq", `5`, true},
		{`{"s\"eq":1,"seq":2}`, "seq", `2`, true},
		{`{"a":"}","seq":3}`, "seq", `3`, true},
		{`{"a":[}`, "seq", ``, false},
		{`{"a":1 "seq":2}`, "seq", ``, false},
		{`{"seq":`, "seq", ``, false},
		{`{"seq":"unclosed`, "seq", ``, false},
		{`[{"seq":1}]`, "seq", ``, false},
		{`"seq"`, "seq", ``, false},
		{``, "seq", ``, false},
		{`{"seq":1}`, "", ``, false},
	} {
		got, ok := TopField(c.s, c.key)
		if got != c.want || ok != c.ok {
			t.Errorf("TopField(%q, %q) = %q, %v; want %q, %v", c.s, c.key, got, ok, c.want, c.ok)
		}
	}
}

// BenchmarkDecodeJSONAt reads the ids of a page of 30 posts, as chat.star's
// get_posts does: r.json("order") against r.json()["order"].
func BenchmarkDecodeJSONAt(b *testing.B) {
	page := postsPage(30)
	b.Run("path", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(page)))
		for b.Loop() {
			if _, found, err := lookupPath(page, "order"); err != nil || !found {
				b.Fatal(err)
			}
		}
	})
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(page)))
		for b.Loop() {
			v, err := Decode(page)
			if err != nil {
				b.Fatal(err)
			}
			if _, found, _ := v.(*starlark.Dict).Get(starlark.String("order")); !found {
				b.Fatal("no order")
			}
		}
	})
}

// TestParsedPathsAreShared: a path is parsed once and its steps shared by
// every read of it, at once from many goroutines (users); what a read
// finds ("#"'s lists included) is its own.
func TestParsedPathsAreShared(t *testing.T) {
	const path = "posts.#.id"
	pa, _ := ParsePath(path)
	pb, _ := ParsePath(path)
	a, b := newLookup(pa), newLookup(pb)
	if a.Path != b.Path || a == b || &a.all[0] == &b.all[0] {
		t.Fatalf("two reads of %q: steps %p and %p (want one), reads %p and %p (want two)", path, a.Path, b.Path, a, b)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				n := (g+i)%5 + 1
				ids := make([]string, n)
				for k := range ids {
					ids[k] = fmt.Sprintf(`{"id": "%d-%d"}`, g, k)
				}
				v, found, err := lookupPath(`{"posts": [`+strings.Join(ids, ",")+`]}`, path)
				l, ok := v.(*starlark.List)
				if err != nil || !found || !ok || l.Len() != n || l.Index(n-1) != starlark.String(fmt.Sprintf("%d-%d", g, n-1)) {
					t.Errorf("goroutine %d: %v %v %v, want %d ids of its own", g, v, found, err, n)
					return
				}
			}
		})
	}
	wg.Wait()
}

// FuzzTopField feeds any message to TopField, as every WebSocket message
// is: it never panics, and a value it finds in a valid object is that
// key's value there (one of them, if the key repeats), as encoding/json
// reads it.
//
//	go test -run='^$' -fuzz=FuzzTopField -fuzztime=2m ./starjson/
func FuzzTopField(f *testing.F) {
	for _, s := range []string{`{"event":"posted","seq":12,"data":{"post":"{\"id\":1}"}}`, `{"a":"}","seq":3}`, ` { "seq" : 5 , "event" : "a\"b" } `,
		`{"seq":`, `[{"seq":1}]`, `{"s\"eq":1,"seq":2}`, `{"seq":1,"seq":2}`, ``} {
		f.Add(s, "seq")
		f.Add(s, "event")
	}
	f.Fuzz(func(t *testing.T, s, key string) {
		got, ok := TopField(s, key)
		if !ok || !json.Valid([]byte(s)) || !utf8.ValidString(s) { // encoding/json reads invalid UTF-8 as U+FFFD
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(s), &m) != nil {
			t.Fatalf("TopField(%q, %q) found %q in what is no object", s, key, got)
		}
		if !json.Valid([]byte(got)) {
			t.Fatalf("TopField(%q, %q) = %q: not a JSON value", s, key, got)
		}
		if strings.Count(s, `"`+key+`"`) == 1 && !bytes.Equal(bytes.TrimSpace(m[key]), []byte(got)) {
			t.Fatalf("TopField(%q, %q) = %q; encoding/json reads %q", s, key, got, m[key])
		}
	})
}
