package runner

import (
	"net/url"
	"regexp"

	"github.com/headroom-dev/headroom/result"
)

// userinfo matches the password of a URL with credentials, in any text:
// "http://ann:s3cret@host" -> group 1 "http://ann".
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*):[^\s/@]*@`)

// Redact replaces the password of every URL in s with "xxxxx", as
// url.URL.Redacted does: what headroom prints or writes never holds one.
func Redact(s string) string { return userinfo.ReplaceAllString(s, "${1}:xxxxx@") }

// RedactAll is Redact over a command line.
func RedactAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = Redact(a)
	}
	return out
}

// redactServer removes credentials from the scraped endpoints' URLs and
// errors in a result.
func redactServer(s *result.Server) {
	if s == nil {
		return
	}
	for i := range s.Targets {
		tg := &s.Targets[i]
		tg.URL, tg.LastError = Redact(tg.URL), Redact(tg.LastError)
		if u, err := url.Parse(tg.URL); err == nil && u.Host != "" {
			tg.Instance = u.Host
		}
	}
}
