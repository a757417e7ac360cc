package transport

// What a request may carry onto the wire, and whether it may be sent twice.

import (
	"errors"
	"fmt"
	"strings"
)

// idempotent reports whether req may be sent twice without harm (RFC 9110
// 9.2.2, and the Idempotency-Key convention).
func idempotent(req *Request) bool {
	switch req.Method {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	for _, h := range req.Header {
		if strings.EqualFold(h.Key, "Idempotency-Key") || strings.EqualFold(h.Key, "X-Idempotency-Key") {
			return true
		}
	}
	return false
}

// ErrBadRequest is the error of a request that cannot be written as
// HTTP/1.1: a CR, LF or NUL in its method, a header name or value, or a
// method or header name that is not a token.
var ErrBadRequest = errors.New("request cannot be sent")

// checkRequest refuses a request whose bytes would change its framing on
// the wire (header injection, request smuggling). Scenarios check the
// same rules (IsTokenByte, BadValueByte) before they get here, to say
// where the header came from; this is the last line. The path needs no check: appendURI escapes control bytes.
func checkRequest(req *Request) error {
	if !isToken(req.Method) {
		return fmt.Errorf("%w: method %q is not an HTTP token", ErrBadRequest, req.Method)
	}
	for _, hs := range [2][]Header{req.Defaults, req.Header} {
		for _, h := range hs {
			if !isToken(h.Key) {
				return fmt.Errorf("%w: header name %q is not an HTTP token", ErrBadRequest, h.Key)
			}
			if BadValueByte(h.Value) >= 0 {
				return fmt.Errorf("%w: header %q holds a CR, LF or NUL", ErrBadRequest, h.Key)
			}
		}
	}
	return nil
}

// TokenChars are the bytes of an HTTP token (RFC 9110 5.6.2) besides
// letters and digits: what methods and header names are made of.
const TokenChars = "!#$%&'*+-.^_`|~"

// IsTokenByte reports whether c may be part of a token.
func IsTokenByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(TokenChars, c) >= 0
}

// BadValueByte returns the index of the first CR, LF or NUL in a header
// value (bytes that would end its line on the wire, or that servers cut
// it at), or -1 if it has none.
func BadValueByte(v string) int {
	for i := 0; i < len(v); i++ { // a loop rather than IndexAny: every header of every request
		if c := v[i]; c == '\r' || c == '\n' || c == 0 {
			return i
		}
	}
	return -1
}

// isToken reports whether s is a non-empty RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !IsTokenByte(s[i]) {
			return false
		}
	}
	return true
}
