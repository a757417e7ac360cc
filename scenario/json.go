package scenario

import (
	"fmt"
	"strings"

	"go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// Limits on the JSON that json.decode and response.json() read. A body
// comes from the target, and Starlark's decoder trusts it: it recurses
// once per level of nesting (five million '[' overflow Go's stack, which
// is fatal, and a million balanced levels take about 1 GB), and it parses
// a number of n digits in time that grows as n² (three million digits,
// some 15 s, in a builtin that cannot be interrupted).
const (
	MaxJSONDepth  = 1000 // levels of nested arrays and objects
	MaxJSONNumber = 1000 // characters of one number
)

// jsonModule is Starlark's json module with a decode that checks the
// limits first, and encoders that write DEL as JSON. Immutable.
var jsonModule = &starlarkstruct.Module{
	Name: "json",
	Members: starlark.StringDict{
		"encode":        starlark.NewBuiltin("json.encode", jsonEncode(json.Module.Members["encode"])),
		"encode_indent": starlark.NewBuiltin("json.encode_indent", jsonEncode(json.Module.Members["encode_indent"])),
		"indent":        json.Module.Members["indent"],
		"decode":        starlark.NewBuiltin("json.decode", jsonDecode),
	},
}

// starlarkBuiltin is the Go function of one of Starlark's builtins.
type starlarkBuiltin = func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error)

// jsonEncode mends one of Starlark's encoders: it quotes a string of ASCII
// with strconv.Quote, which writes DEL (0x7f) as \x7f, and that is not
// JSON (found by FuzzResponseJSON). It becomes \u007f.
func jsonEncode(enc starlark.Value) starlarkBuiltin {
	return func(th *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		v, err := enc.(*starlark.Builtin).CallInternal(th, args, kw)
		if err != nil {
			return nil, err
		}
		s := string(v.(starlark.String))
		if !strings.Contains(s, `\x`) {
			return v, nil
		}
		var b strings.Builder
		b.Grow(len(s) + 8)
		for i := 0; i < len(s); i++ {
			switch {
			case s[i] != '\\' || i+1 == len(s):
				b.WriteByte(s[i])
			case s[i+1] == 'x': // \xHH, which only strconv writes
				b.WriteString(`\u00`)
				i++
			default: // another escape, \\ included: both bytes as they are
				b.WriteString(s[i : i+2])
				i++
			}
		}
		return starlark.String(b.String()), nil
	}
}

// jsonDecode is json.decode(x, default=...) on decodeJSON: it returns
// default, when given, for a text over the limits as for any it cannot
// decode.
func jsonDecode(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var s string
	var d starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kw, "x", &s, "default?", &d); err != nil {
		return nil, err
	}
	if len(args) < 1 {
		return nil, fmt.Errorf("%s: unexpected keyword argument x", b.Name()) // x is positional only
	}
	v, err := decodeJSON(s)
	if err != nil {
		if d != nil {
			return d, nil
		}
		return nil, fmt.Errorf("%s: %w", b.Name(), err)
	}
	return v, nil
}
