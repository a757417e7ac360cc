package starjson

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	starlarkjson "go.starlark.net/lib/json"
	"go.starlark.net/starlark"
)

// starlarkDecode is Starlark's own json.decode: the oracle Decode is
// held to.
func starlarkDecode(s string) (starlark.Value, error) {
	return starlark.Call(&starlark.Thread{}, starlarkjson.Module.Members["decode"], starlark.Tuple{starlark.String(s)}, nil)
}

// sameDecoding fails t unless Decode and Starlark's decoder agree on s:
// the same value (compared by its encoding and its types) or both an
// error, the same one but for the limits, which only Decode has.
func sameDecoding(t *testing.T, s string) {
	t.Helper()
	got, err := Decode(s)
	want, werr := starlarkDecode(s)
	var lim *LimitError
	if errors.As(err, &lim) {
		if checkJSON(s) == nil {
			t.Fatalf("%.200q: refused as over the limits, which it is not: %v", s, err)
		}
		return
	}
	if checkJSON(s) != nil {
		// Over the limits, and Decode found a syntax error first.
		if err == nil {
			t.Fatalf("%.200q: over the limits (%v), decoded", s, checkJSON(s))
		}
		return
	}
	if (err == nil) != (werr == nil) {
		t.Fatalf("%.200q: Decode %v (%.100v), Starlark's decoder %v (%.100v)", s, err, got, werr, want)
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
	_, err := Decode(strings.Repeat("[", 1001))
	if err == nil || err.Error() != "JSON nested too deep (more than 1000 levels, at byte 1000)" {
		t.Errorf("1001 levels: %v", err)
	}
	_, err = Decode(`[1, ` + strings.Repeat("7", 1001) + `]`)
	if err == nil || err.Error() != "JSON number too long (more than 1000 characters, at byte 4)" {
		t.Errorf("a number of 1001 digits: %v", err)
	}
	if _, err := Decode(strings.Repeat("[", 1000) + strings.Repeat("]", 1000)); err != nil {
		t.Errorf("1000 levels: %v", err)
	}
}

// FuzzDecodeJSON holds Decode to Starlark's own decoder on any input.
//
//	go test -run='^$' -fuzz=FuzzDecodeJSON -fuzztime=2m ./starjson/
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sameDecoding(t, s)
		samePicks(t, s)
	})
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
// get_posts does for every channel it opens, with Decode and with
// Starlark's decoder.
func BenchmarkDecodeJSON(b *testing.B) {
	page := postsPage(30)
	b.Run("headroom", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(page)))
		for b.Loop() {
			if _, err := Decode(page); err != nil {
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
	whole, err := Decode(page)
	if err != nil {
		t.Fatal(err)
	}
	order, _, _ := whole.(*starlark.Dict).Get(starlark.String("order"))
	at, _, err := lookupPath(page, "order")
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

func TestCheckJSONSkipsStrings(t *testing.T) {
	for body, ok := range map[string]bool{
		`"` + strings.Repeat("[", 5000) + `"`:                       true,  // brackets in a string
		`["\"` + strings.Repeat("[", 5000) + `"]`:                   true,  // after an escaped quote
		`["\\"` + strings.Repeat(",[", 1001) + `]`:                  false, // an escaped backslash ends the string
		strings.Repeat("[", 1000) + strings.Repeat("]", 1000):       true,
		strings.Repeat("[]", 100_000):                               true, // depth, not count
		`{"a": "` + strings.Repeat("1", 5000) + `"}`:                true,
		`[` + strings.Repeat("1", 1001) + `]`:                       false,
		`[` + strings.Repeat("1, ", 1000) + `]`:                     true,
		`{"e": true, "f": false, "n": null, "x": -1.5e+10, "y": 0}`: true,
	} {
		if err := checkJSON(body); (err == nil) != ok {
			t.Errorf("%.40q...: error %v, want ok=%v", body, err, ok)
		}
	}
}

// checkJSON refuses JSON nested deeper than MaxDepth or with a number
// longer than MaxNumber, in one pass, apart from the decoder: the tests'
// oracle of what Decode must refuse as over the limits. It does not
// validate.
func checkJSON[T string | []byte](s T) error {
	depth, num := 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"': // skip the string, escapes included
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			num = 0
		case c == '[' || c == '{':
			if depth++; depth > MaxDepth {
				return fmt.Errorf("JSON nested too deep (more than %d levels, at byte %d)", MaxDepth, i)
			}
			num = 0
		case c == ']' || c == '}':
			depth--
			num = 0
		case num == 0 && ('0' <= c && c <= '9' || c == '-') || // where the decoder starts a number,
			num > 0 && ('0' <= c && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'): // and what it takes in
			if num++; num > MaxNumber {
				return fmt.Errorf("JSON number too long (more than %d characters, at byte %d)", MaxNumber, i-num+1)
			}
		default:
			num = 0
		}
	}
	return nil
}
