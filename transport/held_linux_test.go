package transport

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/internal/rawio"
)

// TestHeldIsTheGeneratorsReadDelay: a response read 30 ms after it arrived
// (readHook: a generator busy elsewhere) says so in Held, at least the 30 ms
// and no more than its latency; the target's part, Latency - Held, is what
// is left. Read at once, Held is a sliver of the latency. Over plain TCP
// (rawTrip) and over TLS (a stamped socket under it). Linux only: the
// stamps are its (SO_TIMESTAMPNS); elsewhere Held is 0.
func TestHeldIsTheGeneratorsReadDelay(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	for _, tls := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "TLS"}[tls], func(t *testing.T) {
			srv := httptest.NewUnstartedServer(ok)
			var set *Settings
			if tls {
				srv.StartTLS()
				set = insecure(t)
			} else {
				srv.Start()
			}
			defer srv.Close()
			u, err := url.Parse(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			c := NewClient(Options{Target: u, Settings: set})
			defer c.Close()
			heldReadLate(t, c)
		})
	}
}

// heldReadLate reads a response at once, then one 30 ms after its bytes
// arrived, on c's connection, and checks Held of each.
func heldReadLate(t *testing.T, c *Client) {
	t.Helper()
	// The kernel stamps a moment after the first socket asks
	// (rawio.StampArrivals): until then Held is 0.
	var r Response
	for i := 0; ; i++ {
		c.Do(&Request{Method: "GET", URL: "/"}, &r)
		if r.Err != nil || r.Status != 200 {
			t.Fatalf("GET: %d, %v", r.Status, r.Err)
		}
		if r.Held > 0 {
			break
		}
		if i == 1000 {
			t.Fatal("no response was stamped in 1,000 requests, a millisecond apart")
		}
		time.Sleep(time.Millisecond)
	}
	if r.Held > r.Latency {
		t.Errorf("read at once: held %v of a latency of %v", r.Held, r.Latency)
	}

	// Each read waits until bytes have arrived, then 30 ms more.
	hook := func(fd uintptr) {
		var b [1]byte
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
			if n, _ := rawio.Peek(fd, b[:]); n > 0 {
				break
			}
		}
		time.Sleep(30 * time.Millisecond)
	}
	readHook.Store(&hook)
	defer readHook.Store(nil)
	c.Do(&Request{Method: "GET", URL: "/"}, &r)
	if r.Err != nil || r.Status != 200 {
		t.Fatalf("GET: %d, %v", r.Status, r.Err)
	}
	if r.Held < 30*time.Millisecond || r.Held > r.Latency {
		t.Errorf("read 30 ms late: held %v of a latency of %v, want 30 ms at least and no more than the latency", r.Held, r.Latency)
	}
}
