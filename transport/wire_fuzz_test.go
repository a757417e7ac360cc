package transport

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// FuzzResponseParser feeds arbitrary bytes to the response parser, split
// into two reads at an arbitrary point, then the end of the connection.
// The parser must never panic, never hold more than its limits allow, and
// when it reads a response, agree with Go's own reader (net/http) on the
// status and the body whenever that reader accepts the same bytes too.
//
// Quick run: go test -run FuzzResponseParser ./transport (the seeds only).
// Long run: scripts/fuzz.sh (docs/BENCHMARKS.md).
func FuzzResponseParser(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;x=y\r\nok\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nto the end",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
		"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok!",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffff\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokXX0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA",
		strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 40),
		"HTTP/1.1 2x0 OK\r\n\r\n",
		"HELLO\r\n\r\n",
	} {
		f.Add([]byte(s), uint16(len(s)/2), false)
		f.Add([]byte(s), uint16(7), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, split uint16, head bool) {
		const limit = 1 << 16
		var p respParser
		p.reset(limit, head)
		at := min(int(split), len(data))
		done, err := feed(&p, data[:at])
		if !done && err == nil {
			done, err = feed(&p, data[at:])
		}
		if !done && err == nil {
			done, err = p.advance(0, true)
		}
		if p.buf != nil && len(*p.buf) > maxHead+limit+2*bufSize {
			t.Fatalf("parser holds %d bytes, over its limits", len(*p.buf))
		}
		if !done {
			return
		}
		if err != nil {
			t.Fatalf("done with an error: %v", err)
		}
		if p.status < 100 || p.status > 999 || p.end > p.n {
			t.Fatalf("status %d, end %d of %d", p.status, p.end, p.n)
		}
		rawHead, body := p.result()
		if !bytes.HasPrefix(rawHead, []byte("HTTP/1.")) || len(body) > limit {
			t.Fatalf("head %q, %d body bytes", clipBytes(rawHead, 20), len(body))
		}
		if p.interim > 0 || p.status == 101 {
			return // net/http returns the interim response itself; 101 leaves HTTP
		}
		method := "GET"
		if head {
			method = "HEAD"
		}
		req, _ := http.NewRequest(method, "http://x/", nil)
		theirs, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(data)), req)
		if err != nil {
			return // stricter than ours here; ours is not wrong to read it
		}
		theirBody, err := io.ReadAll(theirs.Body)
		if err != nil {
			return
		}
		if theirs.StatusCode != p.status || !bytes.Equal(theirBody, body) {
			t.Fatalf("we read %d %q, net/http %d %q", p.status, clipBytes(body, 40), theirs.StatusCode, clipBytes(theirBody, 40))
		}
	})
}

// feed gives b to the parser as reads of at most the space it offers.
func feed(p *respParser, b []byte) (bool, error) {
	for len(b) > 0 {
		n := copy(p.space(), b)
		b = b[n:]
		if done, err := p.advance(n, false); done || err != nil {
			return done, err
		}
	}
	return false, nil
}
