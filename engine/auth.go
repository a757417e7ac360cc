package engine

import (
	"encoding/base64"
	"net/url"
	"strings"

	"github.com/headroom-dev/headroom/scenario"
	"github.com/headroom-dev/headroom/transport"
)

// basicAuth sends the credentials of the target URL
// (http://user:password@host) as HTTP basic authentication with every
// request to the target's origin: a default header, so it never goes to
// another host, and a request's or the scenario's own Authorization
// header takes its place.
type basicAuth struct {
	scenario.HTTPClient
	header transport.Header
}

var _ scenario.HTTPClient = (*basicAuth)(nil)

// withCredentials wraps c when target carries credentials; else it
// returns c.
func withCredentials(c scenario.HTTPClient, target *url.URL) scenario.HTTPClient {
	if target == nil || target.User == nil {
		return c
	}
	pw, _ := target.User.Password()
	cred := base64.StdEncoding.EncodeToString([]byte(target.User.Username() + ":" + pw))
	return &basicAuth{HTTPClient: c, header: transport.Header{Key: "Authorization", Value: "Basic " + cred}}
}

func (b *basicAuth) Do(req *transport.Request, resp *transport.Response) {
	if !has(req.Header, "Authorization") && !has(req.Defaults, "Authorization") {
		req.Defaults = append(req.Defaults, b.header)
	}
	b.HTTPClient.Do(req, resp)
}

func has(hs []transport.Header, key string) bool {
	for _, h := range hs {
		if strings.EqualFold(h.Key, key) {
			return true
		}
	}
	return false
}
