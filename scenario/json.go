package scenario

import (
	"fmt"
	"strings"

	"github.com/headroom-dev/headroom/starjson"
	"go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// Limits on the JSON that json.decode, response.json(), message.json()
// and data.json read: starjson's, which says why they are needed.
const (
	MaxJSONDepth  = starjson.MaxDepth  // levels of nested arrays and objects
	MaxJSONNumber = starjson.MaxNumber // characters of one number
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

// jsonDecode is json.decode(x, default=...) on starjson.Decode: it returns
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
	v, err := starjson.Decode(s)
	if err != nil {
		if d != nil {
			return d, nil
		}
		return nil, fmt.Errorf("%s: %w", b.Name(), err)
	}
	return v, nil
}

// jsonMethod is r.json() and msg.json(): the whole text decoded, or with a path only the
// value there (default= when it is missing, else an error that says what is there).
// describe turns a decoding error into the method's own message.
func jsonMethod(name string, text func() (string, error), describe func(error) error) *starlark.Builtin {
	return starlark.NewBuiltin(name, func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		var path string
		var dflt starlark.Value
		if err := starlark.UnpackArgs(b.Name(), args, kw, "path?", &path, "default?", &dflt); err != nil {
			return nil, err
		}
		s, err := text()
		if err != nil {
			return nil, err
		}
		if path == "" {
			if dflt != nil {
				return nil, fmt.Errorf("%s: default= is for a path: %s(path, default=...)", name, name)
			}
			v, err := starjson.Decode(s)
			if err != nil {
				return nil, describe(err)
			}
			return v, nil
		}
		p, err := starjson.ParsePath(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		v, found, err := p.Lookup(s)
		if err != nil {
			return nil, describe(err)
		}
		if found {
			return v, nil
		}
		if dflt != nil {
			return dflt, nil
		}
		whole, _ := starjson.Decode(s) // it decoded above
		return nil, fmt.Errorf("%s(%q): %s (default= gives a value for this case)", name, path, starjson.WhyMissing(whole, path))
	})
}
