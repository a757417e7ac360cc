package transport

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

func zstdOf(s string) string {
	w, _ := zstd.NewWriter(nil)
	return string(w.EncodeAll([]byte(s), nil))
}

func brOf(s string) string {
	var b bytes.Buffer
	w := brotli.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.String()
}

func zlibOf(s string) string {
	var b bytes.Buffer
	w := zlib.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.String()
}

func flateOf(s string) string {
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, flate.BestSpeed)
	w.Write([]byte(s))
	w.Close()
	return b.String()
}

// TestCompression: users ask for what browsers ask for, each coding a
// server may answer with is decoded (twice over, so that a reused decoder
// is clean), BytesIn counts the wire; a request's own Accept-Encoding
// wins, and NoCompression asks for nothing.
func TestCompression(t *testing.T) {
	text := strings.Repeat(`{"id":"a1b2c3","message":"hello, world"},`, 200)
	bodies := map[string]string{"gzip": gzipped(text), "deflate": zlibOf(text), "raw-deflate": flateOf(text), "br": brOf(text), "zstd": zstdOf(text)}
	var mu sync.Mutex // the handler's goroutine writes, the test reads
	var sent string
	asked := func() string { mu.Lock(); defer mu.Unlock(); return sent }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = r.Header.Get("Accept-Encoding")
		mu.Unlock()
		c := r.URL.Query().Get("c")
		w.Header().Set("Content-Encoding", strings.TrimPrefix(c, "raw-"))
		w.Write([]byte(bodies[c]))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	c := NewClient(Options{Target: u})
	defer c.Close()
	for _, coding := range []string{"gzip", "deflate", "raw-deflate", "br", "zstd", "gzip", "deflate", "raw-deflate", "br", "zstd"} {
		var r Response
		c.Do(&Request{Method: "GET", URL: "/?c=" + coding}, &r)
		if r.Err != nil || string(r.Body) != text {
			t.Fatalf("%s: err %v, body %q", coding, r.Err, clipBytes(r.Body, 40))
		}
		if r.BytesIn > int64(len(bodies[coding]))+200 || r.BytesIn < int64(len(bodies[coding])) {
			t.Errorf("%s: %d bytes in, want the %d encoded ones and a head", coding, r.BytesIn, len(bodies[coding]))
		}
	}
	if asked() != "gzip, deflate, br, zstd" {
		t.Errorf("Accept-Encoding %q", asked())
	}
	var r Response
	c.Do(&Request{Method: "GET", URL: "/?c=identity", Header: []Header{{"Accept-Encoding", "identity"}}}, &r)
	if asked() != "identity" {
		t.Errorf("a request's own Accept-Encoding: sent %q", asked())
	}
	set, _ := Config{NoCompression: true}.Settings()
	plain := NewClient(Options{Target: u, Settings: set})
	defer plain.Close()
	plain.Do(&Request{Method: "GET", URL: "/?c=gzip"}, &r)
	if asked() != "" || string(r.Body) != text {
		t.Errorf("NoCompression: sent Accept-Encoding %q; a gzip body anyway decoded to %q", asked(), clipBytes(r.Body, 40))
	}
}
