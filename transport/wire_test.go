package transport

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// parse feeds raw to a parser in pieces of step bytes (0: all at once),
// then EOF if it is not complete, and returns what it made of it.
func parse(raw string, step int, head bool, max int) (status int, hdr, body string, closed bool, err error) {
	var p respParser
	b := make([]byte, 16) // small, so that growing is exercised
	p.buf = &b
	p.reset(max, head)
	in := []byte(raw)
	for len(in) > 0 {
		sp := p.space()
		n := min(len(sp), len(in))
		if step > 0 {
			n = min(n, step)
		}
		copy(sp, in[:n])
		in = in[n:]
		done, err := p.advance(n, false)
		if err != nil {
			return 0, "", "", false, err
		}
		if done {
			if len(in) > 0 {
				return 0, "", "", false, errExtra
			}
			h, b := p.result()
			return p.status, string(h), string(b), p.close, nil
		}
	}
	done, err := p.advance(0, true)
	if err != nil {
		return 0, "", "", false, err
	}
	if !done {
		return 0, "", "", false, errors.New("not done at EOF")
	}
	h, bd := p.result()
	return p.status, string(h), string(bd), p.close, nil
}

func TestParseResponses(t *testing.T) {
	cases := []struct {
		name, raw  string
		head       bool
		status     int
		body       string
		closed     bool
		err        string
		headSuffix string
	}{
		{name: "content-length", raw: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", status: 200, body: "hello"},
		{name: "no reason phrase", raw: "HTTP/1.1 204\r\n\r\n", status: 204},
		{name: "chunked with extension and trailer",
			raw:    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\n",
			status: 200, body: "hello, world"},
		{name: "chunked, upper-case size", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n", status: 200, body: "0123456789"},
		{name: "until close", raw: "HTTP/1.1 200 OK\r\n\r\nall of it", status: 200, body: "all of it", closed: true},
		{name: "HTTP/1.0 closes", raw: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", status: 200, body: "ok", closed: true},
		{name: "HTTP/1.0 keep-alive", raw: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", status: 200, body: "ok"},
		{name: "Connection: close", raw: "HTTP/1.1 503 Busy\r\nconnection: Close\r\ncontent-length: 0\r\n\r\n", status: 503, closed: true},
		{name: "100 Continue first", raw: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx", status: 201, body: "x", headSuffix: "Content-Length: 1\r\n\r\n"},
		{name: "101 ends HTTP on the connection", raw: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", status: 101, closed: true},
		{name: "HEAD has no body", raw: "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", head: true, status: 200},
		{name: "304 has no body", raw: "HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n", status: 304},
		{name: "extra bytes", raw: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxy", err: "more bytes"},
		{name: "bad status line", raw: "HTTP/2 200\r\n\r\n", err: "malformed"},
		{name: "bad length", raw: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", err: "Content-Length"},
		{name: "bad chunk", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", err: "chunk size"},
		{name: "chunk without CRLF", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc", err: "CRLF"},
		{name: "too large", raw: "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", err: "larger than the limit"},
		{name: "too large chunked", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n", err: "larger than the limit"},
		{name: "truncated body", raw: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", err: io.ErrUnexpectedEOF.Error()},
		{name: "truncated head", raw: "HTTP/1.1 200 OK\r\nContent-", err: io.ErrUnexpectedEOF.Error()},
		{name: "nothing", raw: "", err: io.EOF.Error()},
	}
	for _, c := range cases {
		for _, step := range []int{0, 1, 3} {
			status, hdr, body, closed, err := parse(c.raw, step, c.head, 100)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("%s (step %d): err %v, want %q", c.name, step, err, c.err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s (step %d): %v", c.name, step, err)
				continue
			}
			if status != c.status || body != c.body || closed != c.closed {
				t.Errorf("%s (step %d): status %d body %q closed %v, want %d %q %v", c.name, step, status, body, closed, c.status, c.body, c.closed)
			}
			if !strings.HasPrefix(hdr, "HTTP/1.") || !strings.HasSuffix(hdr, "\r\n\r\n") || !strings.HasSuffix(hdr, c.headSuffix) ||
				strings.Contains(hdr, "100 Continue") {
				t.Errorf("%s (step %d): head %q", c.name, step, hdr)
			}
		}
	}
}

func TestAppendRequest(t *testing.T) {
	got := string(appendRequest(nil, "POST", "/a b?q=é", "h:1", nil,
		[]Header{{"X-Default", "1"}, {"Accept", "*/*"}, {"x-default", "2"}, {"Content-Length", "7"}},
		map[string]string{"z": "1", "a": "2"}, []byte(`{}`), acceptEncoding))
	want := "POST /a%20b?q=%C3%A9 HTTP/1.1\r\n" +
		"Accept: */*\r\n" +
		"x-default: 2\r\n" +
		"Host: h:1\r\n" +
		"User-Agent: headroom\r\n" +
		"Accept-Encoding: gzip, deflate, br, zstd\r\n" +
		"Cookie: a=2; z=1\r\n" +
		"Content-Length: 2\r\n" +
		"\r\n{}"
	if got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	got = string(appendRequest(nil, "GET", "/", "h", nil, []Header{{"Cookie", "mine=1"}, {"Host", "other"}, {"accept-encoding", "gzip"}}, map[string]string{"s": "x"}, nil, acceptEncoding))
	want = "GET / HTTP/1.1\r\nCookie: mine=1; s=x\r\nHost: other\r\naccept-encoding: gzip\r\nUser-Agent: headroom\r\n\r\n"
	if got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

// BenchmarkParseResponse reads a typical API response head and small body
// (nine header lines): the parser's share of every request.
func BenchmarkParseResponse(b *testing.B) {
	raw := []byte("HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Mon, 23 Nov 2026 22:00:00 GMT\r\n" +
		"Content-Type: application/json\r\nContent-Length: 26\r\nConnection: keep-alive\r\n" +
		"Cache-Control: no-cache, max-age=31556926\r\nX-Request-Id: 5f1c2a3b4d5e6f708192a3b4c5d6e7f8\r\n" +
		"Vary: Accept-Encoding\r\nX-Version-Id: 9.11.0.0\r\n\r\n{\"id\":\"abc\",\"status\":\"ok\"}")
	var p respParser
	b.ReportAllocs()
	for b.Loop() {
		p.reset(1<<20, false)
		n := copy(p.space(), raw)
		if done, err := p.advance(n, false); !done || err != nil {
			b.Fatal(done, err)
		}
	}
	if p.buf != nil {
		putBuf(p.buf)
	}
}
