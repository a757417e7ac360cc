package scenario

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// The helpers for real APIs that need no user: URL encoding, uuid,
// digests and HMAC, base64, the clock. Immutable, like jsonModule.
var (
	urlModule = &starlarkstruct.Module{Name: "url", Members: starlark.StringDict{
		"quote":        starlark.NewBuiltin("url.quote", urlQuote(false)),
		"quote_plus":   starlark.NewBuiltin("url.quote_plus", urlQuote(true)),
		"unquote":      starlark.NewBuiltin("url.unquote", urlUnquote(false)),
		"unquote_plus": starlark.NewBuiltin("url.unquote_plus", urlUnquote(true)),
		"encode":       starlark.NewBuiltin("url.encode", urlEncode),
	}}
	cryptoModule = &starlarkstruct.Module{Name: "crypto", Members: starlark.StringDict{
		"sha1":   starlark.NewBuiltin("crypto.sha1", digest(sha1.New)),
		"sha256": starlark.NewBuiltin("crypto.sha256", digest(sha256.New)),
		"sha512": starlark.NewBuiltin("crypto.sha512", digest(sha512.New)),
		"hmac":   starlark.NewBuiltin("crypto.hmac", cryptoHMAC),
	}}
	base64Module = &starlarkstruct.Module{Name: "base64", Members: starlark.StringDict{
		"encode": starlark.NewBuiltin("base64.encode", base64Encode),
		"decode": starlark.NewBuiltin("base64.decode", base64Decode),
	}}
	clockModule = &starlarkstruct.Module{Name: "clock", Members: starlark.StringDict{
		"now":    starlark.NewBuiltin("clock.now", clockNow),
		"millis": starlark.NewBuiltin("clock.millis", clockMillis),
	}}
)

// userKey is the thread-local under which a user's thread holds its *User.
const userKey = "headroom.user"

// userOf returns the user whose thread th is, or nil at load.
func userOf(th *starlark.Thread) *User {
	u, _ := th.Local(userKey).(*User)
	return u
}

// sleep(d): pause the user; see (*User).sleep.
func builtinSleep(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var dv starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 1, &dv); err != nil {
		return nil, err
	}
	d, err := Duration(dv)
	if err != nil {
		return nil, fmt.Errorf("sleep: %w", err)
	}
	if d < 0 {
		return nil, fmt.Errorf("sleep: %v is negative; sleep for 0 or more", d)
	}
	u := userOf(th)
	if u == nil {
		return nil, &argError{"sleep is for setup, init, actions and teardown, not the top level",
			"the top level runs once, at load; call sleep(...) inside a function the user runs"}
	}
	return starlark.None, u.sleep(d)
}

// sleep pauses the user for d, or until it is cancelled, and counts the
// time slept so that call leaves it out of the action's latency. A
// cancelled sleep returns an error: the action ends there, as cancelled.
func (u *User) sleep(d time.Duration) error {
	if reason := u.canceled.Load(); reason != nil {
		return fmt.Errorf("sleep: cancelled: %s", *reason)
	}
	if d == 0 {
		return nil
	}
	start := u.env.Now()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		u.slept += u.env.Now().Sub(start)
		return nil
	case <-u.cancelCh:
		u.slept += u.env.Now().Sub(start)
		return fmt.Errorf("sleep: cancelled: %s", *u.canceled.Load())
	}
}

// uuid(): a random RFC 4122 version 4 UUID, from crypto/rand (not the
// seed: two runs must not send the same ids).
func builtinUUID(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 0); err != nil {
		return nil, err
	}
	var id [16]byte
	_, _ = rand.Read(id[:])   // never fails (crypto/rand: it crashes the program instead)
	id[6] = id[6]&0x0f | 0x40 // version 4
	id[8] = id[8]&0x3f | 0x80 // variant 10
	var out [36]byte
	hex.Encode(out[0:8], id[0:4])
	hex.Encode(out[9:13], id[4:6])
	hex.Encode(out[14:18], id[6:8])
	hex.Encode(out[19:23], id[8:10])
	hex.Encode(out[24:36], id[10:16])
	out[8], out[13], out[18], out[23] = '-', '-', '-', '-'
	return starlark.String(out[:]), nil
}

// unreserved reports whether RFC 3986 lets c stand for itself anywhere
// in a URL: letters, digits and - . _ ~.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// quote percent-encodes every byte of s but the unreserved ones and
// those in safe; plus writes a space as '+'.
func quote(s, safe string, plus bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + len(s)/2)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case unreserved(c) || strings.IndexByte(safe, c) >= 0:
			b.WriteByte(c)
		case plus && c == ' ':
			b.WriteByte('+')
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}

// url.quote(s, safe=""), url.quote_plus(s, safe="")
func urlQuote(plus bool) starlarkBuiltin {
	return func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		var v starlark.Value
		var safe string
		if err := starlark.UnpackArgs(b.Name(), args, kw, "s", &v, "safe?", &safe); err != nil {
			return nil, err
		}
		s, err := bytesArg(b.Name(), "s", v)
		if err != nil {
			return nil, err
		}
		return starlark.String(quote(s, safe, plus)), nil
	}
}

// url.unquote(s), url.unquote_plus(s)
func urlUnquote(plus bool) starlarkBuiltin {
	return func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		var v starlark.Value
		if err := starlark.UnpackArgs(b.Name(), args, kw, "s", &v); err != nil {
			return nil, err
		}
		s, err := bytesArg(b.Name(), "s", v)
		if err != nil {
			return nil, err
		}
		var out strings.Builder
		out.Grow(len(s))
		for i := 0; i < len(s); i++ {
			switch c := s[i]; {
			case c == '%':
				if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
					return nil, fmt.Errorf("%s: %q at byte %d is not an escape: a %% must be followed by two hex digits (write a %% itself as %%25)",
						b.Name(), s[i:min(i+3, len(s))], i)
				}
				out.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
				i += 2
			case plus && c == '+':
				out.WriteByte(' ')
			default:
				out.WriteByte(c)
			}
		}
		return starlark.String(out.String()), nil
	}
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// url.encode(d): a query string from a dict or a list of pairs, in their
// order, keys and values quoted.
func urlEncode(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 1, &v); err != nil {
		return nil, err
	}
	var pairs []starlark.Tuple
	switch x := v.(type) {
	case *starlark.Dict:
		pairs = x.Items()
	case *starlark.List, starlark.Tuple: // of (key, value)
		seq := x.(starlark.Indexable)
		for i := range seq.Len() {
			p, ok := seq.Index(i).(starlark.Tuple)
			if !ok || len(p) != 2 {
				return nil, fmt.Errorf("%s: item %d is a %s, want a (key, value) pair", b.Name(), i, seq.Index(i).Type())
			}
			pairs = append(pairs, p)
		}
	default:
		return nil, fmt.Errorf("%s: got a %s, want a dict or a list of (key, value) pairs", b.Name(), v.Type())
	}
	var out strings.Builder
	add := func(k string, v starlark.Value) error {
		s, err := queryValue(v)
		if err != nil {
			return fmt.Errorf("%s: key %q: %w", b.Name(), k, err)
		}
		if out.Len() > 0 {
			out.WriteByte('&')
		}
		out.WriteString(quote(k, "", false))
		out.WriteByte('=')
		out.WriteString(quote(s, "", false))
		return nil
	}
	for _, p := range pairs {
		k, ok := starlark.AsString(p[0])
		if !ok {
			k = p[0].String()
		}
		var err error
		switch x := p[1].(type) {
		case *starlark.List, starlark.Tuple: // the key repeated, once per value
			it := x.(starlark.Iterable).Iterate()
			var e starlark.Value
			for err == nil && it.Next(&e) {
				err = add(k, e)
			}
			it.Done()
		default:
			err = add(k, x)
		}
		if err != nil {
			return nil, err
		}
	}
	return starlark.String(out.String()), nil
}

// queryValue is how url.encode writes one value.
func queryValue(v starlark.Value) (string, error) {
	switch x := v.(type) {
	case starlark.String:
		return string(x), nil
	case starlark.Bytes:
		return string(x), nil
	case starlark.Bool:
		if x {
			return "true", nil
		}
		return "false", nil
	case starlark.Int, starlark.Float:
		return x.String(), nil
	}
	return "", fmt.Errorf("value is a %s, want a string, number or bool (or a list of them)", v.Type())
}

// bytesArg reads an argument that may be a string or bytes.
func bytesArg(fn, name string, v starlark.Value) (string, error) {
	switch x := v.(type) {
	case starlark.String:
		return string(x), nil
	case starlark.Bytes:
		return string(x), nil
	}
	return "", fmt.Errorf("%s: %s is a %s, want a string or bytes", fn, name, v.Type())
}

// crypto.sha1/sha256/sha512(data): the digest in lower-case hex.
func digest(newHash func() hash.Hash) starlarkBuiltin {
	return func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		var v starlark.Value
		if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 1, &v); err != nil {
			return nil, err
		}
		data, err := bytesArg(b.Name(), "data", v)
		if err != nil {
			return nil, err
		}
		h := newHash()
		h.Write([]byte(data))
		return starlark.String(hex.EncodeToString(h.Sum(nil))), nil
	}
}

// hashes are the names crypto.hmac's hash= takes.
var hashes = map[string]func() hash.Hash{"sha1": sha1.New, "sha256": sha256.New, "sha512": sha512.New}

// crypto.hmac(key, data, hash="sha256"): lower-case hex.
func cryptoHMAC(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var keyV, dataV starlark.Value
	name := "sha256"
	if err := starlark.UnpackArgs(b.Name(), args, kw, "key", &keyV, "data", &dataV, "hash?", &name); err != nil {
		return nil, err
	}
	key, err := bytesArg(b.Name(), "key", keyV)
	if err != nil {
		return nil, err
	}
	data, err := bytesArg(b.Name(), "data", dataV)
	if err != nil {
		return nil, err
	}
	newHash, ok := hashes[name]
	if !ok {
		return nil, fmt.Errorf(`%s: hash=%q: want "sha1", "sha256" or "sha512"`, b.Name(), name)
	}
	m := hmac.New(newHash, []byte(key))
	m.Write([]byte(data))
	return starlark.String(hex.EncodeToString(m.Sum(nil))), nil
}

func base64Encoding(url, pad bool) *base64.Encoding {
	enc := base64.StdEncoding
	if url {
		enc = base64.URLEncoding
	}
	if !pad {
		enc = enc.WithPadding(base64.NoPadding)
	}
	return enc
}

// base64.encode(data, url=False, pad=True)
func base64Encode(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	url, pad := false, true
	if err := starlark.UnpackArgs(b.Name(), args, kw, "data", &v, "url?", &url, "pad?", &pad); err != nil {
		return nil, err
	}
	data, err := bytesArg(b.Name(), "data", v)
	if err != nil {
		return nil, err
	}
	return starlark.String(base64Encoding(url, pad).EncodeToString([]byte(data))), nil
}

// base64.decode(s, url=False): padded or not.
func base64Decode(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	url := false
	if err := starlark.UnpackArgs(b.Name(), args, kw, "s", &v, "url?", &url); err != nil {
		return nil, err
	}
	s, err := bytesArg(b.Name(), "s", v)
	if err != nil {
		return nil, err
	}
	out, err := base64Encoding(url, false).DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		alphabet := "A-Z a-z 0-9 + / (url=True reads - and _ instead)"
		if url {
			alphabet = "A-Z a-z 0-9 - _ (url=False reads + and / instead)"
		}
		return nil, fmt.Errorf("%s: %v: the alphabet is %s, then = padding", b.Name(), err, alphabet)
	}
	return starlark.String(out), nil
}

// now is the user's clock on a user's thread, else the wall clock.
func now(th *starlark.Thread) time.Time {
	if u := userOf(th); u != nil {
		return u.env.Now()
	}
	return time.Now()
}

// clock.now(): float seconds since the Unix epoch.
func clockNow(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 0); err != nil {
		return nil, err
	}
	return starlark.Float(float64(now(th).UnixNano()) / 1e9), nil
}

// clock.millis(): int milliseconds since the Unix epoch.
func clockMillis(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 0); err != nil {
		return nil, err
	}
	return starlark.MakeInt64(now(th).UnixMilli()), nil
}
