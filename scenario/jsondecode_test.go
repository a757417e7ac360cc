package scenario

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	starjson "go.starlark.net/lib/json"
	"go.starlark.net/starlark"
)

// starlarkDecode is Starlark's own json.decode: the oracle decodeJSON is
// held to.
func starlarkDecode(s string) (starlark.Value, error) {
	return starlark.Call(&starlark.Thread{}, starjson.Module.Members["decode"], starlark.Tuple{starlark.String(s)}, nil)
}

// sameDecoding fails t unless decodeJSON and Starlark's decoder agree on s:
// the same value (compared by its encoding and its types) or both an
// error, the same one but for the limits, which only decodeJSON has.
func sameDecoding(t *testing.T, s string) {
	t.Helper()
	got, err := decodeJSON(s)
	want, werr := starlarkDecode(s)
	var lim *jsonLimit
	if errors.As(err, &lim) {
		if checkJSON(s) == nil {
			t.Fatalf("%.200q: refused as over the limits, which it is not: %v", s, err)
		}
		return
	}
	if checkJSON(s) != nil {
		// Over the limits, and decodeJSON found a syntax error first.
		if err == nil {
			t.Fatalf("%.200q: over the limits (%v), decoded", s, checkJSON(s))
		}
		return
	}
	if (err == nil) != (werr == nil) {
		t.Fatalf("%.200q: decodeJSON %v (%.100v), Starlark's decoder %v (%.100v)", s, err, got, werr, want)
	}
	if err != nil {
		if "json.decode: "+err.Error() != werr.Error() {
			t.Fatalf("%.200q: error %q, Starlark's decoder says %q", s, err, werr)
		}
		return
	}
	if g, w := typedRepr(got), typedRepr(want); g != w {
		t.Fatalf("%.200q: decoded %.300s, Starlark's decoder %.300s", s, g, w)
	}
}

// typedRepr writes v with every value's type, so 1 and 1.0 differ.
func typedRepr(v starlark.Value) string {
	var b strings.Builder
	var walk func(v starlark.Value)
	walk = func(v starlark.Value) {
		switch v := v.(type) {
		case *starlark.List:
			b.WriteString("[")
			for i := range v.Len() {
				walk(v.Index(i))
				b.WriteString(",")
			}
			b.WriteString("]")
		case *starlark.Dict:
			b.WriteString("{")
			for _, kv := range v.Items() {
				walk(kv[0])
				b.WriteString(":")
				walk(kv[1])
				b.WriteString(",")
			}
			b.WriteString("}")
		default:
			b.WriteString(v.Type() + "(" + v.String() + ")")
		}
	}
	walk(v)
	return b.String()
}

var jsonSeeds = []string{
	`{"id": "u1", "n": [1, 2.5, -3e2, true, false, null]}`,
	`[]`, `{}`, `""`, `0`, `-0`, `-0.0`, `1.`, `01`, `-01`, `-`, `1e400`, `1e-400`, `[1,]`, `{"a" 1}`, `{"a":1,}`, `{1:2}`,
	`{"a":{"b":1},"a":{"c":2}}`, `{"a":{"b":{"c":1}},"a":{"b":{"c":2}}}`, `{"a\u002eb":1,"a":[0,{"b":[]}]}`, `{"\u0061":1,"a":2}`, `[{"id":1},{"x":2},{"id":3,"id":4},5,{"id":[{"k":1}]}]`, `{"a":[{"b":1}],"a":[{"b":2},{"b":3}]}`, `[[{"a":1}],[{"a":2},{"a":3}]]`,
	`"\ud800"`, `"\u00e9\n\"x\\"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ud83dx"`, `"\ud83d\u0041"`, `"\ude00\ud83d"`,
	`"\/\b\f\r\t"`, `"\u00E9\u00e9é"`, `"\u12"`, `"\q"`, `"é\n` + "\xff" + `"`, `{"post":"{\"id\":\"p1\",\"message\":\"hi \u00e9\"}"}`, `"é"`, `"a` + "\n" + `b"`, `"é` + "\t" + `"`, "\"\xff\"", "\xff\xfe", `"\x"`, `"abc`,
	`[` + strings.Repeat(`"]`, 3), `{"a":{"b":{"c":[[[]]]}}}`, `{"a":1,"a":2,"b":3}`, ` [ 1 , 2 ] `, `[1 2]`, `tru`, `nul`,
	`123456789012345678`, `1234567890123456789`, `-9223372036854775808`, `-9223372036854775809`, `9223372036854775807`,
	`99999999999999999999999`, `1-2`, `1e5`, `1E+5`, `2.5e-3`, `[1]x`, `{"k":"v"} `, "", " ", `{"a":[1,{"b":null}],"c":"d"}`,
	strings.Repeat("[", 1001), strings.Repeat("[", 1000) + strings.Repeat("]", 1000),
	strings.Repeat(`{"a":`, 1001) + "1" + strings.Repeat("}", 1001), "1" + strings.Repeat("0", 1000),
	"[" + strings.Repeat("9", 1001) + "]", `"` + strings.Repeat("[", 2000) + `"`,
}

func TestDecodeJSONIsStarlarks(t *testing.T) {
	for _, s := range jsonSeeds {
		sameDecoding(t, s)
		samePicks(t, s)
	}
	// A page of posts, as the testbed sends it.
	sameDecoding(t, postsPage(30))
	samePicks(t, postsPage(30))
}

func TestDecodeJSONLimits(t *testing.T) {
	_, err := decodeJSON(strings.Repeat("[", 1001))
	if err == nil || err.Error() != "JSON nested too deep (more than 1000 levels, at byte 1000)" {
		t.Errorf("1001 levels: %v", err)
	}
	_, err = decodeJSON(`[1, ` + strings.Repeat("7", 1001) + `]`)
	if err == nil || err.Error() != "JSON number too long (more than 1000 characters, at byte 4)" {
		t.Errorf("a number of 1001 digits: %v", err)
	}
	if _, err := decodeJSON(strings.Repeat("[", 1000) + strings.Repeat("]", 1000)); err != nil {
		t.Errorf("1000 levels: %v", err)
	}
}

// FuzzDecodeJSON holds decodeJSON to Starlark's own decoder on any input.
//
//	go test -run='^$' -fuzz=FuzzDecodeJSON -fuzztime=2m ./scenario/
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sameDecoding(t, s)
		samePicks(t, s)
	})
}

// samePicks fails t unless decodeJSONAt agrees with decodeJSON on s for every
// path to a value in it (up to 200, four steps deep), "#" paths over its lists,
// and a path beside each that leads nowhere: the same value as resolvePath finds
// in the whole decoding, or not found, or the same error.
func samePicks(t *testing.T, s string) {
	t.Helper()
	whole, err := decodeJSON(s)
	if err != nil {
		for _, path := range []string{"a", "0", "order", "a.b.0", "#.id"} {
			if _, _, perr := decodeJSONAt(s, path); perr == nil || perr.Error() != err.Error() {
				t.Fatalf("%.200q at %q: error %v, decodeJSON's is %v", s, path, perr, err)
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
		got, found, err := decodeJSONAt(s, path)
		switch {
		case err != nil:
			t.Fatalf("%.200q at %q: %v, though decodeJSON decodes it", s, path, err)
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

// postsPage is a body of GET /api/v4/channels/{id}/posts as the testbed
// sends it: n posts with their ids in order.
func postsPage(n int) string {
	var b strings.Builder
	b.WriteString(`{"order":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"p4k2x9ad3jfn8e7rqzw` + string(rune('a'+i%26)) + `"`)
	}
	b.WriteString(`],"posts":{`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		id := `p4k2x9ad3jfn8e7rqzw` + string(rune('a'+i%26))
		b.WriteString(`"` + id + `":{"id":"` + id + `","channel_id":"c8d7s6a5q4w3e2r1t0y9u8i7o6","user_id":"u1a2s3d4f5g6h7j8k9l0z1x2c3",` +
			`"message":"hello world of chat, said in a channel of many members ` + id + `","root_id":"","create_at":1764130000123,` +
			`"update_at":1764130000123,"metadata":{"reactions":[]}}`)
	}
	b.WriteString(`},"next_post_id":"","prev_post_id":""}`)
	return b.String()
}

// BenchmarkDecodeJSON decodes a page of 30 posts, as chat.star's
// get_posts does for every channel it opens, with decodeJSON and with
// Starlark's decoder.
func BenchmarkDecodeJSON(b *testing.B) {
	page := postsPage(30)
	b.Run("headroom", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(page)))
		for b.Loop() {
			if _, err := decodeJSON(page); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("starlark", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(page)))
		for b.Loop() {
			if _, err := starlarkDecode(page); err != nil {
				b.Fatal(err)
			}
		}
	})
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
		got, ok := topField(c.s, c.key)
		if got != c.want || ok != c.ok {
			t.Errorf("topField(%q, %q) = %q, %v; want %q, %v", c.s, c.key, got, ok, c.want, c.ok)
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
			if _, found, err := decodeJSONAt(page, "order"); err != nil || !found {
				b.Fatal(err)
			}
		}
	})
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(page)))
		for b.Loop() {
			v, err := decodeJSON(page)
			if err != nil {
				b.Fatal(err)
			}
			if _, found, _ := v.(*starlark.Dict).Get(starlark.String("order")); !found {
				b.Fatal("no order")
			}
		}
	})
}

// TestDecodedStringsDoNotHoldTheText: a string kept from a decoded body (an id
// from a page of posts) holds none of the body's memory, so keeping it does not
// keep the page alive, whether decoded whole, at a path or by key.
func TestDecodedStringsDoNotHoldTheText(t *testing.T) {
	page := postsPage(30)
	lo, hi := uintptr(unsafe.Pointer(unsafe.StringData(page))), uintptr(unsafe.Pointer(unsafe.StringData(page)))+uintptr(len(page))
	inPage := func(v starlark.Value) bool {
		s := string(v.(starlark.String))
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		return len(s) > 0 && lo <= p && p < hi
	}
	whole, err := decodeJSON(page)
	if err != nil {
		t.Fatal(err)
	}
	order, _, _ := whole.(*starlark.Dict).Get(starlark.String("order"))
	at, _, err := decodeJSONAt(page, "order")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []starlark.Value{order.(*starlark.List).Index(0), at.(*starlark.List).Index(29)} {
		if inPage(v) {
			t.Errorf("%s is a slice of the page", v)
		}
	}
	for _, k := range whole.(*starlark.Dict).Keys() {
		if inPage(k) {
			t.Errorf("key %s is a slice of the page", k)
		}
	}
}

// TestParsedPathsAreShared: a path is parsed once and its steps shared by
// every read of it, at once from many goroutines (users); what a read
// finds ("#"'s lists included) is its own.
func TestParsedPathsAreShared(t *testing.T) {
	const path = "posts.#.id"
	a, _ := parsePath(path)
	b, _ := parsePath(path)
	if a.pathSteps != b.pathSteps || a == b || &a.all[0] == &b.all[0] {
		t.Fatalf("two reads of %q: steps %p and %p (want one), reads %p and %p (want two)", path, a.pathSteps, b.pathSteps, a, b)
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
				v, found, err := decodeJSONAt(`{"posts": [`+strings.Join(ids, ",")+`]}`, path)
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
