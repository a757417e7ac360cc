package scenario

import (
	"fmt"
	"strings"

	"github.com/headroom-dev/headroom/transport"
)

// The transport writes a request's method and headers to the wire as they
// are, so a CR or LF in one of them ends a line there: a value taken from a
// response (a token with a trailing "\r\n", say) would add headers of its
// own or start a second, smuggled request. These checks refuse such a
// request, naming what holds the byte, before it is sent. The URL's bytes
// are escaped by the transport, but a CR, LF or NUL there is as surely a
// mistake. The rules are the transport's (transport.IsTokenByte,
// transport.BadValueByte), which checks them again as its last line; these
// checks name the header and where it came from.

// checkMethod refuses a method that is not a token.
func checkMethod(fn, m string) error {
	if m == "" {
		return fmt.Errorf("%s: the method is empty; give one such as GET or PATCH", fn)
	}
	for i := 0; i < len(m); i++ {
		if !transport.IsTokenByte(m[i]) {
			return fmt.Errorf("%s: method %q holds %q (at byte %d): a method is one word of letters, such as GET or PATCH", fn, m, m[i], i)
		}
	}
	return nil
}

// checkURL refuses a URL holding CR, LF or NUL.
func checkURL(fn, u string) error {
	if i := strings.IndexAny(u, "\r\n\x00"); i >= 0 {
		return fmt.Errorf("%s: URL %s holds %s (at byte %d); strip it (e.g. .strip()) before sending", fn, clip(fmt.Sprintf("%q", u), 80), byteName(u[i]), i)
	}
	return nil
}

// checkHeader refuses a header whose name is not a token or whose value
// holds CR, LF or NUL. from says where the header came from, for the
// message ("" for headers=).
func checkHeader(fn, from, name, value string) error {
	if name == "" {
		return fmt.Errorf("%s: a header%s has an empty name", fn, from)
	}
	for i := 0; i < len(name); i++ {
		if !transport.IsTokenByte(name[i]) {
			return fmt.Errorf("%s: header name %q%s holds %q (at byte %d), which a name cannot: names are letters, digits and %s",
				fn, name, from, name[i], i, transport.TokenChars)
		}
	}
	i := transport.BadValueByte(value)
	switch {
	case i < 0:
		return nil
	case value[i] == 0:
		return fmt.Errorf("%s: header %q%s value holds a NUL byte (at byte %d): servers refuse it or cut the value there; remove it",
			fn, name, from, i)
	}
	return fmt.Errorf("%s: header %q%s value holds %s (at byte %d): it would end the header and start another; strip it (e.g. .strip()) before sending",
		fn, name, from, byteName(value[i]), i)
}

func byteName(c byte) string {
	switch c {
	case '\r':
		return "a CR"
	case '\n':
		return "an LF"
	case 0:
		return "a NUL byte"
	}
	return fmt.Sprintf("%q", c)
}
