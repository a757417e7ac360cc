package transport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// The HTTP/1.1 wire format, the response's way (wire_request.go writes
// requests): responses are parsed as their bytes arrive, so a caller can
// read straight from the socket into the parser and stop as soon as the
// response is complete.

// bufSize is the size of pooled read and write buffers. A response that
// does not fit grows its own buffer (to its exact size when the length is
// known); a buffer grown past maxPooled is not pooled again.
const (
	bufSize   = 8 << 10
	maxPooled = 64 << 10
)

var bufs = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

func getBuf() *[]byte { return bufs.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if c := cap(*b); bufSize <= c && c <= maxPooled {
		*b = (*b)[:cap(*b)]
		bufs.Put(b)
	}
}

// Errors of a response that cannot be read as HTTP/1.x.
var (
	errMalformed = errors.New("malformed HTTP response")
	errExtra     = errors.New("server sent more bytes than one response")
)

// Limits on what a response may make the parser hold before its body:
// the status lines and headers of the interim (1xx) responses and the
// final one, together, and how many interim responses may come first.
const (
	maxHead    = 1 << 20
	maxInterim = 32
)

// respParser reads one response from bytes appended to buf as they
// arrive: call space for room to read into, then advance with the count.
// It is incremental: each byte is looked at a bounded number of times.
// What it holds is bounded by maxHead plus the body limit.
type respParser struct {
	buf     *[]byte // pooled, taken at the first read; replaced by a larger one when the response outgrows it
	n       int     // bytes in *buf
	head    int     // length of the status line and headers; 0 until they are complete
	start   int     // where the current head starts (after skipped 1xx responses)
	scanned int     // bytes already searched for the end of the head
	interim int     // 1xx responses skipped
	max     int     // body limit, bytes
	noBody  bool    // a response to HEAD

	status  int
	length  int       // Content-Length, or -1
	chunked bool      // Transfer-Encoding: chunked
	close   bool      // the server closes the connection after this response
	cookies bool      // the head has Set-Cookie lines
	coding  coding    // Content-Encoding
	first   time.Time // when the response's first byte arrived (set by the reader)
	chunkAt int       // chunked: offset of the next chunk-size line
	body    int       // chunked: data bytes so far
	end     int       // offset just past the response, once complete
}

// reset readies p for a response, keeping its buffer if it has one.
func (p *respParser) reset(max int, noBody bool) {
	*p = respParser{buf: p.buf, max: max, noBody: noBody, length: -1}
}

// space returns where to read the next bytes into. A full buffer grows
// to the exact size of the response when its length is known, else to
// twice its size, but never past what the head and body limits allow
// (plus one read, to see that a response is too large).
func (p *respParser) space() []byte {
	if p.buf == nil {
		p.buf = getBuf()
	}
	b := *p.buf
	if p.n == len(b) {
		want := 2 * len(b)
		switch {
		case p.head > 0 && p.length >= 0 && !p.chunked:
			want = p.head + p.length // exactly the response
		case p.head > 0:
			want = min(want, p.head+p.max+bufSize)
		default:
			want = min(want, maxHead+bufSize)
		}
		nb := make([]byte, max(want, p.n+bufSize))
		copy(nb, b[:p.n])
		putBuf(p.buf)
		p.buf = &nb
		b = nb
	}
	return b[p.n:]
}

// advance accounts for n new bytes (eof: the server closed the
// connection) and reports whether the response is complete.
func (p *respParser) advance(n int, eof bool) (bool, error) {
	p.n += n
	if p.buf == nil { // nothing was ever read
		if eof {
			return false, io.EOF
		}
		return false, nil
	}
	if p.head == 0 {
		ok, err := p.parseHead()
		if err != nil {
			return false, err
		}
		if !ok {
			if eof {
				if p.n == 0 {
					return false, io.EOF
				}
				return false, io.ErrUnexpectedEOF
			}
			if p.n > maxHead {
				return false, fmt.Errorf("%w: status line and headers (interim responses included) longer than 1 MiB", errMalformed)
			}
			return false, nil
		}
	}
	done, err := p.parseBody(eof)
	if err != nil || !done {
		if err == nil && eof {
			err = io.ErrUnexpectedEOF
		}
		return false, err
	}
	if p.end < p.n {
		return false, errExtra
	}
	return true, nil
}

// parseHead parses the status line and headers once they are complete,
// skipping interim (1xx) responses, at most maxInterim of them.
func (p *respParser) parseHead() (bool, error) {
	for {
		b := (*p.buf)[p.start:p.n]
		from := max(p.scanned-3, p.start) - p.start // the end may straddle the last read
		i := bytes.Index(b[from:], []byte("\r\n\r\n"))
		if i < 0 {
			if bytes.Contains(b[max(from-1, 0):], []byte("\n\n")) {
				return false, fmt.Errorf("%w: lines end in a bare LF, not CRLF", errMalformed)
			}
			p.scanned = p.n
			return false, nil
		}
		i += from
		head := b[:i+4]
		status, err := p.parseFields(head)
		if err != nil {
			return false, err
		}
		if status < 200 && status != 101 { // 100 Continue, 103 Early Hints: the real response follows
			if p.interim++; p.interim > maxInterim {
				return false, fmt.Errorf("%w: more than %d interim (1xx) responses before the response", errMalformed, maxInterim)
			}
			p.start += len(head)
			p.scanned = p.start
			continue
		}
		p.status = status
		p.head = p.start + len(head)
		p.chunkAt = p.head
		return true, nil
	}
}

// parseFields reads a complete head: the status line and the header
// fields framing depends on. It returns the status.
//
// Lines must end in CRLF: a bare CR or LF is read one way here and another
// by a proxy, so it is refused, not guessed. Lines are cut at each LF,
// which must follow a CR; a head of n lines then holds n CRs, so one
// count over the head finds a bare CR without a second look at each line.
func (p *respParser) parseFields(head []byte) (int, error) {
	if bytes.Count(head, []byte{'\r'}) != bytes.Count(head, []byte{'\n'}) {
		return 0, bareCR(head)
	}
	line, rest, err := cutLine(head)
	if err != nil {
		return 0, fmt.Errorf("%w: a bare CR or LF in the status line", errMalformed)
	}
	// HTTP/1.1 200 OK
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, fmt.Errorf("%w: status line %q", errMalformed, clipBytes(line, 40))
	}
	status := decimal(line[9:12])
	if status < 100 || (len(line) > 12 && line[12] != ' ') {
		return 0, fmt.Errorf("%w: status line %q", errMalformed, clipBytes(line, 40))
	}
	http10 := line[7] == '0'
	p.close = http10
	p.length, p.chunked, p.cookies, p.coding = -1, false, false, identity
	for len(rest) > 2 {
		var l []byte
		if l, rest, err = cutLine(rest); err != nil {
			return 0, err
		}
		k, v, ok := bytes.Cut(l, []byte(":"))
		if !ok {
			continue
		}
		v = bytes.TrimSpace(v)
		switch {
		case equalFold(k, "content-length"):
			n := decimal(v)
			if n < 0 || (p.length >= 0 && n != p.length) {
				return 0, fmt.Errorf("%w: Content-Length %q", errMalformed, clipBytes(v, 40))
			}
			p.length = n
		case equalFold(k, "transfer-encoding"):
			if http10 { // HTTP/1.0 has no transfer codings: readers disagree on such framing
				return 0, fmt.Errorf("%w: Transfer-Encoding in an HTTP/1.0 response", errMalformed)
			}
			p.chunked = hasToken(v, "chunked")
		case equalFold(k, "connection"):
			if hasToken(v, "close") {
				p.close = true
			} else if http10 && hasToken(v, "keep-alive") {
				p.close = false
			}
		case equalFold(k, "set-cookie"):
			p.cookies = true
		case equalFold(k, "content-encoding"):
			if c := parseCoding(v); p.coding == identity {
				p.coding = c
			} else if c != identity {
				p.coding = otherCoding // two codings in a row: left as they came
			}
		}
	}
	return status, nil
}

// cutLine cuts b at its first LF, which must end a CRLF. b holds an LF:
// a complete head ends in CRLF CRLF.
func cutLine(b []byte) (line, rest []byte, err error) {
	i := bytes.IndexByte(b, '\n')
	if i < 1 || b[i-1] != '\r' {
		return nil, nil, fmt.Errorf("%w: a bare CR or LF in header line %q", errMalformed, clipBytes(b[:max(i, 0)], 40))
	}
	return b[:i-1], b[i+1:], nil
}

// bareCR is the error of a head with more CRs than LFs (or fewer): it
// names the first line whose CR does not end it. Only malformed heads
// come here.
func bareCR(head []byte) error {
	first := true
	for len(head) > 0 {
		line, rest, _ := bytes.Cut(head, []byte("\r\n"))
		if bytes.IndexByte(line, '\r') >= 0 || bytes.IndexByte(line, '\n') >= 0 {
			if first {
				return fmt.Errorf("%w: a bare CR or LF in the status line", errMalformed)
			}
			return fmt.Errorf("%w: a bare CR or LF in header line %q", errMalformed, clipBytes(line, 40))
		}
		head, first = rest, false
	}
	return fmt.Errorf("%w: a bare CR or LF in the head", errMalformed)
}

// parseBody reports whether the body is complete, setting end.
func (p *respParser) parseBody(eof bool) (bool, error) {
	switch {
	case p.status == 101: // Switching Protocols: the connection is no longer HTTP
		p.end, p.close = p.head, true
		return true, nil
	case p.noBody || p.status == 204 || p.status == 304:
		p.end = p.head
		return true, nil
	case p.chunked:
		return p.parseChunks()
	case p.length >= 0:
		if p.length > p.max {
			return false, fmt.Errorf("response body of %d bytes is larger than the limit of %d", p.length, p.max)
		}
		p.end = p.head + p.length
		return p.n >= p.end, nil
	default: // the body runs to the end of the connection
		p.close = true
		if p.n-p.head > p.max {
			return false, fmt.Errorf("response body is larger than the limit of %d bytes", p.max)
		}
		p.end = p.n
		return eof, nil
	}
}

// parseChunks decodes the chunks that have fully arrived in place: each
// chunk's data is moved down to the end of the body decoded so far
// (head..head+body), and the bytes not yet parsed after it, so the buffer
// holds the body and one partial chunk, never the framing of the chunks
// before. It ends after the last chunk and its trailers.
func (p *respParser) parseChunks() (bool, error) {
	b := (*p.buf)[:p.n]
	dataEnd := p.head + p.body
	defer func() { // move what is not parsed yet down to the body's end
		if p.chunkAt > dataEnd && p.end == 0 {
			p.n = dataEnd + copy(b[dataEnd:], b[p.chunkAt:p.n])
			p.chunkAt, p.scanned = dataEnd, dataEnd
		}
	}()
	for {
		size, data := chunkHeader(b, p.chunkAt)
		if data < 0 {
			if p.n-p.chunkAt > 4<<10 {
				return false, fmt.Errorf("%w: chunk-size line longer than 4 KiB", errMalformed)
			}
			return false, nil
		}
		if size < 0 {
			return false, fmt.Errorf("%w: chunk size %q", errMalformed, clipBytes(b[p.chunkAt:data-2], 20))
		}
		if size == 0 { // the last chunk, then trailers up to an empty line
			if bytes.HasPrefix(b[data:], []byte("\r\n")) {
				p.end = data + 2
				return true, nil
			}
			t := bytes.Index(b[max(data, p.scanned-3):], []byte("\r\n\r\n"))
			if t < 0 {
				if len(b)-data > maxHead {
					return false, fmt.Errorf("%w: trailers longer than 1 MiB", errMalformed)
				}
				p.scanned = len(b)
				return false, nil
			}
			p.end = max(data, p.scanned-3) + t + 4
			return true, nil
		}
		if p.body+size > p.max {
			return false, fmt.Errorf("response body is larger than the limit of %d bytes", p.max)
		}
		if len(b) < data+size+2 {
			return false, nil
		}
		if b[data+size] != '\r' || b[data+size+1] != '\n' {
			return false, fmt.Errorf("%w: chunk not followed by CRLF", errMalformed)
		}
		dataEnd += copy(b[dataEnd:], b[data:data+size])
		p.body += size
		p.chunkAt = data + size + 2
	}
}

// result returns the head (status line and headers) and the body of the
// complete response. A response that fit the pooled buffer is copied once
// into a slice of its exact size; a larger one already has a buffer of its
// own, which is handed over rather than copied again, so a response never
// costs twice its size.
func (p *respParser) result() (head, body []byte) {
	b := *p.buf
	bodyEnd := p.end
	if p.chunked && p.end > p.head { // decoded in place by parseChunks
		bodyEnd = p.head + p.body
	}
	if cap(b) > maxPooled { // grown for this response: never pooled again
		p.buf = nil
		return b[p.start:p.head:p.head], b[p.head:bodyEnd:bodyEnd]
	}
	out := bytes.Clone(b[p.start:bodyEnd]) // not make and copy: the new bytes are not zeroed first
	h := p.head - p.start
	return out[:h:h], out[h:]
}

// chunkHeader reads the chunk-size line at b[at:]: the size (-1 if
// malformed) and where the chunk's data starts (-1 if the line has not
// fully arrived).
func chunkHeader(b []byte, at int) (size, data int) {
	i := bytes.Index(b[at:], []byte("\r\n"))
	if i < 0 {
		return 0, -1
	}
	line := b[at : at+i]
	if j := bytes.IndexByte(line, ';'); j >= 0 {
		line = line[:j]
	}
	return hexSize(line), at + i + 2
}

// decimal parses a non-negative decimal number; -1 if b is not one (or
// has more than 18 digits).
func decimal(b []byte) int {
	if len(b) == 0 || len(b) > 18 {
		return -1
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// hexSize parses a chunk size (hex, spaces around allowed); -1 if b is
// not one or it is 256 MiB or more.
func hexSize(b []byte) int {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || len(b) > 7 {
		return -1
	}
	n := 0
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			n = n<<4 | int(c-'0')
		case 'a' <= c && c <= 'f':
			n = n<<4 | int(c-'a'+10)
		case 'A' <= c && c <= 'F':
			n = n<<4 | int(c-'A'+10)
		default:
			return -1
		}
	}
	return n
}

// equalFold reports whether b equals the lower-case ASCII s, ignoring case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// hasToken reports whether a comma-separated header value holds tok.
func hasToken(v []byte, tok string) bool {
	for len(v) > 0 {
		var t []byte
		t, v, _ = bytes.Cut(v, []byte(","))
		if equalFold(bytes.TrimSpace(t), tok) {
			return true
		}
	}
	return false
}

func clipBytes(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
