package scenario

import (
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/transport"
	"github.com/mccutchen/go-httpbin/v2/httpbin"
	"go.starlark.net/starlark"
)

// TestRedirectsAndCompressionInAScenario, against go-httpbin through
// headroom's transport: a redirected request is one sample under its name,
// r.redirects and r.url say where it went, redirect=False takes the 3xx,
// statuses are what the server said, and a gzipped or deflated body reads
// as JSON, its decoded size counted.
func TestRedirectsAndCompressionInAScenario(t *testing.T) {
	srv := httptest.NewServer(httpbin.New().Handler())
	defer srv.Close()
	target, _ := url.Parse(srv.URL)
	client := transport.NewClient(transport.Options{Target: target})
	defer client.Close()
	u, rec := newTestUser(t, `
def act(user):
    r = user.http.get("/redirect/2", name="followed")
    if r.status != 200 or r.redirects != 2 or not r.url.endswith("/get"):
        fail("followed: %d, %d redirects to %s" % (r.status, r.redirects, r.url))
    r = user.http.post("/redirect-to?url=/anything&status_code=303", json={"a": 1}, name="posted")
    if r.json("method") != "GET" or r.redirects != 1:
        fail("a POST redirected by a 303 arrived as %s" % r.json("method"))
    r = user.http.get("/redirect/2", redirect=False, name="not followed", expect=302)
    if r.redirects != 0 or r.url != "/redirect/2" or r.headers["location"] != "/relative-redirect/1":
        fail("not followed: %d redirects, %s, %s" % (r.redirects, r.url, r.headers))
    for status in [200, 204, 404, 418, 503]:
        r = user.http.get("/status/%d" % status, name="status", expect=status)
        if r.status != status or r.redirects != 0:
            fail("GET /status/%d: %d" % (status, r.status))
    for coding in ["gzip", "deflate"]:
        r = user.http.get("/" + coding, name=coding)
        if r.headers["content-encoding"] != coding or not r.json(coding + "ped" if coding == "gzip" else "deflated"):
            fail("%s: %s" % (coding, r.text))
        user.state[coding] = len(r.text)
`, Env{ID: 1, HTTP: client})
	if out := u.Run(u.sc.Actions[0]); out != metrics.OK {
		t.Fatalf("%v: %+v", out, *rec)
	}
	byName := map[string]metrics.Sample{}
	for _, s := range *rec {
		if s.Kind == metrics.Request {
			if _, twice := byName[s.Name]; twice && s.Name != "status" {
				t.Errorf("%s counted twice: a redirect's hop became a sample", s.Name)
			}
			byName[s.Name] = s
		}
	}
	if len(byName) != 6 || byName["followed"].Status != 200 || byName["not followed"].Status != 302 {
		t.Errorf("samples %+v", byName)
	}
	for _, coding := range []string{"gzip", "deflate"} {
		v, _, _ := u.value.state.Get(starlark.String(coding))
		if s := byName[coding]; v == nil || v.String() != strconv.FormatInt(s.BodyIn, 10) || s.BodyIn == 0 {
			t.Errorf("%s: body_bytes_in %d, r.text %v bytes", coding, s.BodyIn, v)
		}
	}
}
