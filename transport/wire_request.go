package transport

// The HTTP/1.1 wire format, the request's way: a request is serialized into
// one buffer (getBuf's) and sent with one write. wire.go reads responses.

import (
	"strconv"
	"strings"
)

// appendRequest serializes a request line, headers and body. defaults
// (the user's default headers, or nil) come before hs (the request's own);
// a later header replaces an earlier one of the same name, so a request's
// own headers override the defaults. Host and Content-Length are set here,
// cookies join any Cookie header given, and accept, if not empty, is the
// Accept-Encoding unless one is given.
func appendRequest(b []byte, method, uri, host string, defaults, hs []Header, cookies map[string]string, body []byte, accept string) []byte {
	b = append(b, method...)
	b = append(b, ' ')
	b = appendURI(b, uri)
	b = append(b, " HTTP/1.1\r\n"...)
	hostSet, agentSet, cookieSet, acceptSet := false, false, false, accept == ""
	for i, n := 0, len(defaults)+len(hs); i < n; i++ {
		var h Header
		if i < len(defaults) {
			h = defaults[i]
			if replaced(defaults[i+1:], h.Key) || replaced(hs, h.Key) {
				continue
			}
		} else {
			h = hs[i-len(defaults)]
			if replaced(hs[i-len(defaults)+1:], h.Key) {
				continue
			}
		}
		if strings.EqualFold(h.Key, "Content-Length") {
			continue
		}
		switch {
		case strings.EqualFold(h.Key, "Host"):
			hostSet = true
		case strings.EqualFold(h.Key, "User-Agent"):
			agentSet = true
		case strings.EqualFold(h.Key, "Accept-Encoding"):
			acceptSet = true
		case strings.EqualFold(h.Key, "Cookie"):
			cookieSet = true
			b = appendCookies(append(append(b, "Cookie: "...), h.Value...), cookies, len(h.Value) > 0)
			continue
		}
		b = appendHeader(b, h.Key, h.Value)
	}
	if !hostSet {
		b = appendHeader(b, "Host", host)
	}
	if !agentSet {
		b = append(b, "User-Agent: headroom\r\n"...)
	}
	if !acceptSet {
		b = appendHeader(b, "Accept-Encoding", accept)
	}
	if !cookieSet && len(cookies) > 0 {
		b = appendCookies(append(b, "Cookie: "...), cookies, false)
	}
	if body != nil || method == "POST" || method == "PUT" || method == "PATCH" {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, body...)
}

func replaced(later []Header, key string) bool {
	for _, h := range later {
		if strings.EqualFold(h.Key, key) {
			return true
		}
	}
	return false
}

func appendHeader(b []byte, k, v string) []byte {
	b = append(b, k...)
	b = append(b, ": "...)
	b = append(b, v...)
	return append(b, "\r\n"...)
}

// appendCookies ends a Cookie header line: "k=v; k2=v2\r\n", in name
// order so that requests are reproducible.
func appendCookies(b []byte, jar map[string]string, more bool) []byte {
	if len(jar) > 0 {
		names := make([]string, 0, len(jar))
		for k := range jar {
			names = append(names, k)
		}
		if len(names) > 1 {
			sortStrings(names)
		}
		for _, k := range names {
			if more {
				b = append(b, "; "...)
			}
			more = true
			b = append(b, k...)
			b = append(b, '=')
			b = append(b, jar[k]...)
		}
	}
	return append(b, "\r\n"...)
}

func sortStrings(s []string) { // insertion sort: a jar holds a few cookies
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// appendURI writes the request target as given, percent-encoding only
// the bytes HTTP does not allow there (spaces, controls, non-ASCII), so
// that a path with a space still makes a valid request line.
func appendURI(b []byte, uri string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(uri); i++ {
		c := uri[i]
		if c <= ' ' || c >= 0x7f {
			b = append(b, '%', hex[c>>4], hex[c&15])
			continue
		}
		b = append(b, c)
	}
	return b
}
