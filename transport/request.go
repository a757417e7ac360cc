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
// same before they get here, with a better message; this is the last
// line. The path needs no check: appendURI escapes control bytes.
func checkRequest(req *Request) error {
	if !isToken(req.Method) {
		return fmt.Errorf("%w: method %q is not an HTTP token", ErrBadRequest, req.Method)
	}
	for _, hs := range [2][]Header{req.Defaults, req.Header} {
		for _, h := range hs {
			if !isToken(h.Key) {
				return fmt.Errorf("%w: header name %q is not an HTTP token", ErrBadRequest, h.Key)
			}
			if strings.ContainsAny(h.Value, "\r\n\x00") {
				return fmt.Errorf("%w: header %q holds a CR, LF or NUL", ErrBadRequest, h.Key)
			}
		}
	}
	return nil
}

// isToken reports whether s is a non-empty RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
