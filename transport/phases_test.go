package transport

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/internal/testing/memhttp"
)

// TestPhases, in virtual time: a response whose head comes 50 ms after the
// request and whose body ends 30 ms later waits 50 and receives 30; a
// redirect's hops add up; the first request made the connection, the next
// did not.
func TestPhases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dial := memhttp.Dial(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(50 * time.Millisecond)
			if r.URL.Path == "/moved" {
				http.Redirect(w, r, "/", http.StatusFound)
				return
			}
			w.Write([]byte(strings.Repeat("a", 100)))
			w.(http.Flusher).Flush()
			time.Sleep(30 * time.Millisecond)
			w.Write([]byte("b"))
		}))
		c := NewClient(Options{Target: &url.URL{Scheme: "http", Host: "target.invalid"}, Dial: dial})
		defer c.Close()
		for i, tc := range []struct {
			path          string
			dialed        bool
			wait, receive time.Duration
		}{{"/", true, 50 * time.Millisecond, 30 * time.Millisecond}, {"/", false, 50 * time.Millisecond, 30 * time.Millisecond},
			{"/moved", false, 100 * time.Millisecond, 30 * time.Millisecond}} {
			var r Response
			c.Do(&Request{Method: "GET", URL: tc.path}, &r)
			ph := r.Phases
			if r.Err != nil || ph.Dialed != tc.dialed || ph.Wait != tc.wait || ph.Receive != tc.receive || ph.DNS != 0 || ph.TLS != 0 {
				t.Errorf("request %d, %s: err %v, phases %+v; want dialed %v, wait %v, receive %v", i, tc.path, r.Err, ph, tc.dialed, tc.wait, tc.receive)
			}
			if sum := ph.DNS + ph.Connect + ph.TLS + ph.Wait + ph.Receive; sum > r.Latency {
				t.Errorf("request %d: phases add up to %v, past the latency %v", i, sum, r.Latency)
			}
		}
	})
}

// TestPhasesOfAConnection over real sockets: a name is resolved (DNS),
// an address is not; https makes a handshake (TLS), and a kept-alive
// connection none of them.
func TestPhasesOfAConnection(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	byIP, _ := url.Parse(srv.URL)
	byName, _ := url.Parse(strings.Replace(srv.URL, "127.0.0.1", "localhost", 1))
	for _, u := range []*url.URL{byIP, byName} {
		c := NewClient(Options{Target: u, Settings: insecure(t)})
		var first, second Response
		c.Do(&Request{Method: "GET", URL: "/"}, &first)
		c.Do(&Request{Method: "GET", URL: "/"}, &second)
		c.Close()
		ph := first.Phases
		if first.Err != nil || !ph.Dialed || ph.Connect <= 0 || ph.TLS <= 0 || ph.Wait <= 0 || (ph.DNS > 0) != (u == byName) {
			t.Errorf("%s, first request: err %v, phases %+v; want DNS only for a name, a connect and a handshake", u, first.Err, ph)
		}
		if ph := second.Phases; second.Err != nil || ph.Dialed || ph.DNS != 0 || ph.Connect != 0 || ph.TLS != 0 || ph.Wait <= 0 {
			t.Errorf("%s, second request: err %v, phases %+v; want no connection's", u, second.Err, ph)
		}
	}
}
