package hostile

// HTTP/2 servers that lie in frames, spoken in cleartext with prior
// knowledge (h2c: the client sends the preface at once), each made of
// golang.org/x/net/http2's Framer so that every frame is well formed where
// the lie is not the point.

import (
	"bytes"
	"io"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// H2 is one HTTP/2 connection: the client's preface and SETTINGS read, the
// server's SETTINGS (settings, then an ack of the client's) written, and
// the first request's HEADERS waited for; then serve answers that stream.
func H2(settings []http2.Setting, serve func(h *H2Conn, stream uint32)) Behaviour {
	return func(c *Conn) {
		h, ok := h2Open(c, settings)
		if !ok {
			return
		}
		if id, ok := h.next(); ok {
			serve(h, id)
		}
	}
}

// h2Open reads the client's preface and writes the server's SETTINGS.
func h2Open(c *Conn, settings []http2.Setting) (*H2Conn, bool) {
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c.r, preface); err != nil || string(preface) != http2.ClientPreface {
		return nil, false
	}
	h := &H2Conn{Conn: c, Fr: http2.NewFramer(c, c.r)}
	return h, h.Fr.WriteSettings(settings...) == nil
}

// next reads frames, acking the client's SETTINGS and PINGs, until a
// request's HEADERS: its stream; false once the connection fails.
func (h *H2Conn) next() (uint32, bool) {
	for {
		f, err := h.Fr.ReadFrame()
		if err != nil {
			return 0, false
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() && h.Fr.WriteSettingsAck() != nil {
				return 0, false
			}
		case *http2.PingFrame:
			if !f.IsAck() && h.Fr.WritePing(true, f.Data) != nil {
				return 0, false
			}
		case *http2.HeadersFrame:
			h.srv.Requests.Add(1)
			return f.StreamID, true
		}
	}
}

// H2Conn is an HTTP/2 connection a behaviour writes frames to.
type H2Conn struct {
	*Conn
	Fr *http2.Framer
}

// Head is the HPACK block of a response head: :status and the fields,
// name and value in turn.
func Head(status string, fields ...string) []byte {
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	enc.WriteField(hpack.HeaderField{Name: ":status", Value: status})
	for i := 0; i+1 < len(fields); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return b.Bytes()
}

// H2Reply answers every request with a complete response: status 200 and
// body.
func H2Reply(body string) Behaviour {
	return func(c *Conn) {
		h, ok := h2Open(c, nil)
		for ok {
			var id uint32
			if id, ok = h.next(); ok {
				ok = h.Fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: Head("200"), EndHeaders: true}) == nil &&
					h.Fr.WriteData(id, true, []byte(body)) == nil
			}
		}
	}
}

// H2GoAwayBetween, on the server's first connection, waits for two
// requests, sends a GOAWAY that names the first as the last it processes,
// and a moment later answers the first with body: the second stream was
// refused, not failed, and goes again on a new connection, where (as on
// every later one) each request is answered with body. A client that
// closed the connection on the refusal loses the first response.
func H2GoAwayBetween(body string) Behaviour {
	reply := H2Reply(body)
	return func(c *Conn) {
		if c.srv.Conns.Load() > 1 {
			reply(c)
			return
		}
		h, ok := h2Open(c, nil)
		if !ok {
			return
		}
		first, ok := h.next()
		if !ok {
			return
		}
		if _, ok := h.next(); !ok || h.Fr.WriteGoAway(first, http2.ErrCodeNo, nil) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond) // for the client to meet the refusal before the answer
		if h.Fr.WriteHeaders(http2.HeadersFrameParam{StreamID: first, BlockFragment: Head("200"), EndHeaders: true}) != nil ||
			h.Fr.WriteData(first, true, []byte(body)) != nil {
			return
		}
		h.Hold()
	}
}

// H2BadSettings announces an initial window past 2^31-1, which RFC 9113
// makes a connection error (FLOW_CONTROL_ERROR).
var H2BadSettings = H2([]http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 1 << 31}}, func(h *H2Conn, _ uint32) { h.Hold() })

// H2EndlessHeaders begins a response head and continues it with
// CONTINUATION frames without end.
func H2EndlessHeaders(h *H2Conn, id uint32) {
	if h.Fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: Head("200")}) != nil {
		return
	}
	piece := Head("200", "x-filler", string(bytes.Repeat([]byte("a"), 8000)))[1:] // the field alone
	for !h.Closed() {
		if h.Fr.WriteContinuation(id, false, piece) != nil {
			return
		}
	}
}

// H2ResetEverything answers every stream with RST_STREAM, and sends resets
// of streams never opened besides, without end.
func H2ResetEverything(h *H2Conn, id uint32) {
	if h.Fr.WriteRSTStream(id, http2.ErrCodeInternal) != nil {
		return
	}
	for next := id + 2; !h.Closed(); next += 2 {
		if h.Fr.WriteRSTStream(next, http2.ErrCodeInternal) != nil {
			return
		}
	}
}

// H2GoAwayMidBody sends the head and half the body it announced, then a
// GOAWAY that names the stream as processed, and closes the connection.
func H2GoAwayMidBody(h *H2Conn, id uint32) {
	if h.Fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: Head("200", "content-length", "10"), EndHeaders: true}) != nil ||
		h.Fr.WriteData(id, false, []byte("hello")) != nil {
		return
	}
	_ = h.Fr.WriteGoAway(id, http2.ErrCodeNo, nil)
}

// H2EndlessBody sends a head and DATA without end (the window ignored).
func H2EndlessBody(h *H2Conn, id uint32) {
	if h.Fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: Head("200"), EndHeaders: true}) != nil {
		return
	}
	piece := bytes.Repeat([]byte("x"), 16<<10)
	for !h.Closed() {
		if h.Fr.WriteData(id, false, piece) != nil {
			return
		}
	}
}

// H2Silent reads the request and never answers.
func H2Silent(h *H2Conn, _ uint32) { h.Hold() }
