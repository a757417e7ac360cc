// Package starjson decodes JSON text into Starlark values, as Starlark's
// json.decode does but faster and within limits, and looks values up by path.
package starjson

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"go.starlark.net/starlark"
)

// Limits on the JSON that Decode and Path.Lookup read. A body comes from
// the target, and Starlark's decoder trusts it: it recurses once per level
// of nesting (five million '[' overflow Go's stack, which is fatal, and a
// million balanced levels take about 1 GB), and it parses a number of n
// digits in time that grows as n² (three million digits, some 15 s, in a
// builtin that cannot be interrupted).
const (
	MaxDepth  = 1000 // levels of nested arrays and objects
	MaxNumber = 1000 // characters of one number
)

// Decode turns JSON text into Starlark values, as Starlark's json.decode
// does (the same values, types and refusals: FuzzDecodeJSON compares the two),
// with the limits of MaxDepth and MaxNumber checked as it goes (a
// *LimitError past them).
//
// It is headroom's own because r.json() and msg.json() are what a chat user
// spends most of its CPU on: a page of 30 posts is ~250 values. Strings are
// copies (not slices of s: an id kept from a page would keep the whole page
// alive, as chat.star's threads list once kept 20 pages a user); a container's
// elements are gathered on a reused stack and the list or dict made once at
// its size; an integer of up to 18 digits is parsed without math/big. Errors
// read "at offset N, why", as Starlark's do (data files turn N into a line).
func Decode(s string) (starlark.Value, error) {
	return decodeWith(s, nil)
}

// decodeWith decodes s, or with sel only sel's value (in sel.v; None is
// returned), the rest read in discard mode.
func decodeWith(s string, sel *lookup) (starlark.Value, error) {
	d := decoders.Get().(*decoder)
	d.s, d.i, d.depth, d.err = s, 0, 0, nil
	d.sel, d.on, d.discard = sel, -1, sel != nil
	if sel != nil {
		d.on = 0
	}
	v := d.value()
	if d.err == nil && d.space() {
		d.failf("unexpected character %q after value", s[d.i])
	}
	err := d.err
	clear(d.stack)
	d.stack, d.s, d.sel = d.stack[:0], "", nil
	if len(d.keys) > 256 {
		d.keys = nil // a text of many keys (ids as keys): not kept in the pool
	}
	clear(d.keys)
	decoders.Put(d)
	if err != nil {
		return nil, err
	}
	return v, nil
}

var decoders = sync.Pool{New: func() any { return &decoder{stack: make([]starlark.Value, 0, 64)} }}

type decoder struct {
	s     string
	i     int
	depth int
	stack []starlark.Value // the elements, or keys and values, of the containers being read
	err   error
	keys  map[string]starlark.Value // the object keys met in s, as Values

	// While discard is set, values are checked as they are read but not
	// built (value returns None): how Path.Lookup passes over what its path
	// does not lead to.
	discard bool
	sel     *lookup // Path.Lookup's path, when on is not -1
	on      int     // how many of sel's steps lead to the container being read; -1: none
}

// key reads an object key: within one text, the same Value each time the
// same key comes, so a list of 30 posts holds one "channel_id", not 30.
func (d *decoder) key() starlark.Value {
	s, start := d.s, d.i
	j := start + 1
	for j < len(s) && plainByte[s[j]] {
		j++
	}
	if j == len(s) || s[j] != '"' {
		return d.str()
	}
	k := s[start+1 : j]
	d.i = j + 1
	if d.discard {
		return starlark.None
	}
	if v, ok := d.keys[k]; ok {
		return v
	}
	if d.keys == nil {
		d.keys = make(map[string]starlark.Value, 32)
	}
	v := starlark.Value(starlark.String(d.keep(k)))
	d.keys[k] = v
	return v
}

// LimitError is an input over MaxDepth or MaxNumber: said as such, not as
// a syntax error at an offset, and told apart with errors.As.
type LimitError struct{ msg string }

func (e *LimitError) Error() string { return e.msg }

func (d *decoder) failf(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("at offset %d, %s", d.i, fmt.Sprintf(format, args...))
	}
}

// space skips JSON's white space and reports whether anything follows.
func (d *decoder) space() bool {
	for ; d.i < len(d.s); d.i++ {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
		default:
			return true
		}
	}
	return false
}

// value reads one value after optional white space; on error it sets d.err
// and returns nil.
func (d *decoder) value() starlark.Value {
	if !d.space() {
		d.failf("unexpected end of file")
		return nil
	}
	s := d.s
	switch c := s[d.i]; c {
	case '"':
		return d.str()
	case '[', '{':
		if d.depth++; d.depth > MaxDepth {
			d.err = &LimitError{fmt.Sprintf("JSON nested too deep (more than %d levels, at byte %d)", MaxDepth, d.i)}
			return nil
		}
		var v starlark.Value
		if c == '[' {
			v = d.list()
		} else {
			v = d.object()
		}
		d.depth--
		return v
	case 't':
		if d.literal("true") {
			return starlark.True
		}
	case 'f':
		if d.literal("false") {
			return starlark.False
		}
	case 'n':
		if d.literal("null") {
			return starlark.None
		}
	default:
		if c == '-' || '0' <= c && c <= '9' {
			return d.number()
		}
	}
	d.failf("unexpected character %q", s[d.i])
	return nil
}

func (d *decoder) literal(word string) bool {
	if len(d.s)-d.i >= len(word) && d.s[d.i:d.i+len(word)] == word {
		d.i += len(word)
		return true
	}
	return false
}

// keep copies a string of s, so that the values do not hold s's memory.
// One allocation each, sized to it: shared chunks were tried, and a user
// keeping 40 ids from 40 bodies kept 40 chunks.
func (d *decoder) keep(x string) string { return strings.Clone(x) }

// plainByte marks the bytes a string can hold and still be its own value: not
// a quote, a backslash, a control character or the start of a multi-byte
// character.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str reads a string. Without escapes it is a slice of the input (when it
// holds control characters or bytes past ASCII, only if they are valid
// UTF-8 without control characters, where unquoting changes nothing);
// otherwise encoding/json unquotes it, as Starlark's decoder does.
func (d *decoder) str() starlark.Value {
	s, start := d.s, d.i
	j := start + 1
	for j < len(s) && plainByte[s[j]] {
		j++
	}
	if j < len(s) && s[j] == '"' {
		d.i = j + 1
		if d.discard {
			return starlark.None
		}
		return starlark.String(d.keep(s[start+1 : j]))
	}
	// Something else first: find the closing quote, skipping escaped bytes.
	ascii, escaped, control := true, false, false
	for ; j < len(s); j++ {
		switch c := s[j]; {
		case c == '\\':
			escaped = true
			j++
		case c == '"':
			d.i = j + 1
			r := s[start+1 : j]
			if !escaped && (ascii || !control && utf8.ValidString(r)) {
				if d.discard {
					return starlark.None
				}
				return starlark.String(d.keep(r))
			}
			if u, ok := unquote(r); ok {
				return starlark.String(u)
			}
			if err := json.Unmarshal([]byte(s[start:j+1]), &r); err != nil {
				d.failf("%s", err)
				return nil
			}
			return starlark.String(r)
		case c >= utf8.RuneSelf:
			ascii = false
		case c < 0x20:
			control = true
		}
	}
	d.failf("unclosed string literal")
	return nil
}

// unquote reads the escapes of a JSON string's contents as encoding/json
// does (a lone surrogate is U+FFFD), for the strings that are valid: false
// for a control character, a bad escape or bytes that are not UTF-8, which
// encoding/json then refuses or mends with its own words.
func unquote(s string) (string, bool) {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				return "", false
			}
			b = append(b, s[i:i+n]...)
			i += n
			continue
		case c != '\\':
			b = append(b, c)
			i++
			continue
		}
		if i+1 == len(s) {
			return "", false
		}
		switch e := s[i+1]; e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := hex4(s[i+2:])
			if !ok {
				return "", false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				if r2, ok := hex4(s[min(i+2, len(s)):]); ok && i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if pair := utf16.DecodeRune(r, r2); pair != unicode.ReplacementChar {
						b = utf8.AppendRune(b, pair)
						i += 6
						continue
					}
				}
				r = unicode.ReplacementChar
			}
			b = utf8.AppendRune(b, r)
			continue
		default:
			return "", false
		}
		i += 2
	}
	return string(b), true
}

// hex4 reads the four hex digits of a \u escape.
func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[:4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func (d *decoder) list() starlark.Value {
	d.i++ // '['
	base, on := len(d.stack), d.on
	if !d.space() {
		d.failf("unexpected end of file")
		return nil
	}
	if d.s[d.i] != ']' {
		for n := 0; ; n++ {
			var v starlark.Value
			if on >= 0 && d.sel.each[on] {
				v = d.every(on)
			} else if on >= 0 {
				v = d.step(on, n == d.sel.index[on])
			} else {
				v = d.value()
			}
			if d.err != nil {
				return nil
			}
			if !d.discard {
				d.stack = append(d.stack, v)
			}
			if !d.space() {
				d.failf("unexpected end of file")
				return nil
			}
			if c := d.s[d.i]; c != ',' {
				if c != ']' {
					d.failf("got %q, want ',' or ']'", c)
					return nil
				}
				break
			}
			d.i++ // ','
		}
	}
	d.i++ // ']'
	if on >= 0 && d.sel.each[on] {
		d.sel.v, d.sel.found = starlark.NewList(d.sel.all[on]), true
		d.sel.all[on] = nil
	}
	if d.discard {
		return starlark.None
	}
	var elems []starlark.Value
	if n := len(d.stack) - base; n > 0 {
		elems = make([]starlark.Value, n)
		copy(elems, d.stack[base:])
		clear(d.stack[base:])
		d.stack = d.stack[:base]
	}
	return starlark.NewList(elems)
}

func (d *decoder) object() starlark.Value {
	d.i++ // '{'
	base, on := len(d.stack), d.on
	if !d.space() {
		d.failf("unexpected end of file")
		return nil
	}
	if d.s[d.i] != '}' {
		for {
			var k starlark.Value
			match := false
			if d.space() && d.s[d.i] == '"' {
				start := d.i
				k = d.key()
				if on >= 0 && d.err == nil && !d.sel.each[on] {
					match = keyText(d.s[start:d.i]) == d.sel.keys[on]
				}
			} else {
				discard := d.discard
				d.discard, d.on = false, -1
				k = d.value() // not a string, as it does not start with a quote
				d.discard, d.on = discard, on
				if d.err == nil {
					d.failf("got %s for object key, want string", k.Type())
				}
				return nil
			}
			if d.err != nil {
				return nil
			}
			if !d.space() {
				d.failf("unexpected end of file")
				return nil
			}
			if c := d.s[d.i]; c != ':' {
				d.failf("after object key, got %q, want ':' ", c)
				return nil
			}
			d.i++ // ':'
			var v starlark.Value
			if on >= 0 {
				v = d.step(on, match)
			} else {
				v = d.value()
			}
			if d.err != nil {
				return nil
			}
			if !d.discard {
				d.stack = append(d.stack, k, v)
			}
			if !d.space() {
				d.failf("unexpected end of file")
				return nil
			}
			if c := d.s[d.i]; c != ',' {
				if c != '}' {
					d.failf("in object, got %q, want ',' or '}'", c)
					return nil
				}
				break
			}
			d.i++ // ','
		}
	}
	d.i++ // '}'
	if d.discard {
		return starlark.None
	}
	pairs := d.stack[base:]
	dict := new(starlark.Dict) // up to 8 pairs live in the dict itself
	if len(pairs) > 2*8 {
		dict = starlark.NewDict(len(pairs) / 2)
	}
	for p := 0; p < len(pairs); p += 2 {
		_ = dict.SetKey(pairs[p], pairs[p+1]) // a string key cannot fail
	}
	clear(pairs)
	d.stack = d.stack[:base]
	return dict
}

// number reads what Starlark's decoder reads as a number: a run of digits,
// signs, points and exponents; an int when it is an optional minus and
// digits, else a float.
func (d *decoder) number() starlark.Value {
	s, start := d.s, d.i
	float := false
	j := start + 1
	for ; j < len(s); j++ {
		c := s[j]
		if '0' <= c && c <= '9' {
			continue
		}
		if c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' {
			float = true
			continue
		}
		break
	}
	if j-start > MaxNumber {
		d.err = &LimitError{fmt.Sprintf("JSON number too long (more than %d characters, at byte %d)", MaxNumber, start)}
		return nil
	}
	num := s[start:j]
	d.i = j
	digits := num
	if num[0] == '-' {
		digits = num[1:]
	}
	if digits == "" || digits[0] == '0' && len(digits) > 1 && '0' <= digits[1] && digits[1] <= '9' {
		d.failf("invalid number: %s", num)
		return nil
	}
	if float {
		x, err := strconv.ParseFloat(num, 64)
		if err != nil {
			d.failf("invalid number: %s", num)
			return nil
		}
		if d.discard {
			return starlark.None
		}
		return starlark.Float(x)
	}
	if d.discard {
		return starlark.None // digits after an optional minus, not a leading zero: an integer
	}
	if len(digits) <= 18 {
		x, err := strconv.ParseInt(num, 10, 64)
		if err == nil {
			return starlark.MakeInt64(x)
		}
	}
	x, ok := new(big.Int).SetString(num, 10)
	if !ok {
		d.failf("invalid number: %s", num)
		return nil
	}
	return starlark.MakeBigInt(x)
}
