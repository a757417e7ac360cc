package transport

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/internal/testing/memhttp"
	"github.com/mccutchen/go-httpbin/v2/httpbin"
)

// TestRedirectsFollowed against go-httpbin: relative and absolute
// Locations, the hops folded into one response (Redirects, URL, the bytes
// of all), a chain past MaxRedirects an error, NoRedirect the 3xx itself.
func TestRedirectsFollowed(t *testing.T) {
	srv := httptest.NewServer(httpbin.New().Handler())
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	c := NewClient(Options{Target: u})
	defer c.Close()
	var one Response
	c.Do(&Request{Method: "GET", URL: "/get"}, &one)
	for _, path := range []string{"/redirect/3", "/relative-redirect/3", "/absolute-redirect/3"} {
		var r Response
		c.Do(&Request{Method: "GET", URL: path}, &r)
		if r.Err != nil || r.Status != 200 || r.Redirects != 3 || r.URL != srv.URL+"/get" || !strings.Contains(string(r.Body), `"url"`) {
			t.Errorf("%s: status %d, %d redirects to %q, err %v", path, r.Status, r.Redirects, r.URL, r.Err)
		}
		if r.BytesIn < one.BytesIn+3*100 || r.BytesOut < 4*50 {
			t.Errorf("%s: %d bytes in, %d out: want the four hops' (one: %d in)", path, r.BytesIn, r.BytesOut, one.BytesIn)
		}
	}
	var r Response
	c.Do(&Request{Method: "GET", URL: "/redirect/11"}, &r)
	if r.Err == nil || !strings.Contains(r.Err.Error(), "stopped after 10 redirects") || r.Redirects != 10 {
		t.Errorf("11 redirects: status %d, %d redirects, err %v", r.Status, r.Redirects, r.Err)
	}
	c.Do(&Request{Method: "GET", URL: "/redirect/2", NoRedirect: true}, &r)
	if r.Err != nil || r.Status != 302 || r.Redirects != 0 || location(r.RawHeader) != "/relative-redirect/1" {
		t.Errorf("NoRedirect: status %d, %d redirects, Location %q, err %v", r.Status, r.Redirects, location(r.RawHeader), r.Err)
	}
}

// TestRedirectMethods: a POST becomes a GET without its body on 301, 302
// and 303, as browsers do; 307 and 308 send it again as it was.
func TestRedirectMethods(t *testing.T) {
	srv := httptest.NewServer(httpbin.New().Handler())
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	c := NewClient(Options{Target: u})
	defer c.Close()
	for status, want := range map[int]string{301: "GET", 302: "GET", 303: "GET", 307: "POST", 308: "POST"} {
		var r Response
		c.Do(&Request{Method: "POST", URL: fmt.Sprintf("/redirect-to?url=/anything&status_code=%d", status), Body: []byte(`{"a":1}`),
			Header: []Header{{"Content-Type", "application/json"}}}, &r)
		var echo struct {
			Method string `json:"method"`
			Data   string `json:"data"`
		}
		if r.Err != nil || json.Unmarshal(r.Body, &echo) != nil {
			t.Fatalf("%d: status %d, err %v, body %q", status, r.Status, r.Err, clipBytes(r.Body, 80))
		}
		wantData := ""
		if want == "POST" {
			wantData = `{"a":1}`
		}
		if echo.Method != want || echo.Data != wantData {
			t.Errorf("POST redirected by %d arrived as %s with body %q; want %s with %q", status, echo.Method, echo.Data, want, wantData)
		}
	}
}

// TestRedirectCredentials: a redirect to another origin carries neither
// the user's default headers nor the request's Authorization or cookies;
// within the target it keeps them all, and a cookie set by the redirect
// itself (a login's) goes with the next hop.
func TestRedirectCredentials(t *testing.T) {
	var mu sync.Mutex // handlers write, the test reads
	seen := map[string]string{}
	saw := func(at string, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen[at] = r.Header.Get("Authorization") + "|" + r.Header.Get("X-Token") + "|" + r.Header.Get("Cookie")
	}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		saw("other", r)
	}))
	defer other.Close()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/login":
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1"})
			http.Redirect(w, r, "/home", http.StatusFound)
		case "/home":
			saw("home", r)
		case "/away":
			http.Redirect(w, r, other.URL+"/x", http.StatusFound)
		}
	}))
	defer target.Close()
	u, _ := url.Parse(target.URL)
	c := NewClient(Options{Target: u})
	defer c.Close()
	creds := Request{Method: "GET", Header: []Header{{"Authorization", "Bearer t"}}, Defaults: []Header{{"X-Token", "d"}}}
	for _, path := range []string{"/login", "/away"} {
		req := creds
		req.URL = path
		var r Response
		c.Do(&req, &r)
		if r.Err != nil || r.Status != 200 || r.Redirects != 1 {
			t.Fatalf("%s: status %d, %d redirects, err %v", path, r.Status, r.Redirects, r.Err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["home"] != "Bearer t|d|session=s1" {
		t.Errorf("within the target: Authorization|X-Token|Cookie = %q", seen["home"])
	}
	if seen["other"] != "||" {
		t.Errorf("on another origin: Authorization|X-Token|Cookie = %q, want none", seen["other"])
	}
	if creds.Header[0].Key != "Authorization" || len(creds.Header) != 1 {
		t.Errorf("the caller's request was changed: %v", creds.Header)
	}
}

// TestRedirectsShareTheTimeout: the timeout bounds the whole request,
// every hop together (in virtual time: each hop takes 80 ms of it).
func TestRedirectsShareTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dial := memhttp.Dial(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(80 * time.Millisecond)
			http.Redirect(w, r, "/again", http.StatusFound)
		}))
		c := NewClient(Options{Target: &url.URL{Scheme: "http", Host: "target.invalid"}, Timeout: 200 * time.Millisecond, Dial: dial})
		defer c.Close()
		var r Response
		c.Do(&Request{Method: "GET", URL: "/"}, &r)
		if !r.Timeout || r.Redirects != 2 || r.Latency < 200*time.Millisecond || r.Latency > 202*time.Millisecond || !strings.Contains(r.Err.Error(), "timeout after 200ms") {
			t.Errorf("timeout %v after %v and %d redirects, err %v; want a timeout of the whole request at 200 ms, in the third hop", r.Timeout, r.Latency, r.Redirects, r.Err)
		}
		time.Sleep(time.Second) // the server's last handler ends
	})
}
