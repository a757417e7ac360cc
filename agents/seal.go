package agents

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"sync"
)

// After the handshake every frame is sealed (docs/AGENTS.md, "Security"):
// it carries an HMAC-SHA256, under a key of this stream only, of its
// direction, its number on the stream, its kind, Seq and body. Someone
// who relayed the handshake, or sits on the path, can neither make a
// frame the other side takes (a scenario, a --var, a target of their
// own), nor change, replay, reorder or drop one unnoticed: the frame is
// refused and the stream ends.
//
// The key is HMAC(token, "headroom agents v1 session", nonce_c, nonce_a,
// session): both nonces are fresh, so a key is good for one stream.
//
// A frame no larger than partSize crosses as one gRPC message; a larger
// body (a scenario's data files, a snapshot of many names) is cut into
// KindPart frames, each sealed, and put together again on receipt up to
// maxFrame. So gRPC's own limit, which holds before the handshake too, is
// small: an unauthenticated peer cannot make the coordinator hold more
// than partSize for a frame.

// macSize is the size of a frame's seal.
const macSize = sha256.Size

// partSize bounds a frame's body on the wire; gRPC's limit is a little
// above it (maxMessage), for the header and the seal.
const partSize = 1 << 20

// maxMessage is gRPC's limit on one message, either way, before the
// handshake as after it.
const maxMessage = partSize + 4<<10

// ErrTampered is wrapped by a sealed stream's Recv when a frame's seal is
// wrong: not made with the session's key, altered, replayed or out of
// order.
var ErrTampered = errors.New("a frame failed its seal (altered, replayed, out of order or not from the token's holder)")

// sealed is a stream whose frames are sealed each way and cut into parts.
// Send is safe for concurrent use; Recv is called by one goroutine.
type sealed struct {
	s         Stream
	out, in   string // the directions' labels: what this side sends, receives
	sendMu    sync.Mutex
	sendMAC   hash.Hash
	sent      uint64 // frames sent (parts included)
	recvMAC   hash.Hash
	received  uint64
	assembled []byte // the parts of a frame received so far
}

// sessionKey is the key of a stream's seals.
func sessionKey(token, nonceC, nonceA []byte, session string) []byte {
	m := hmac.New(sha256.New, token)
	m.Write([]byte("headroom agents v1 session\x00"))
	m.Write(nonceC)
	m.Write(nonceA)
	m.Write([]byte(session))
	return m.Sum(nil)
}

// seal wraps s, the side role ("coordinator" or "agent") sending.
func seal(s Stream, key []byte, role string) *sealed {
	x := &sealed{s: s, sendMAC: hmac.New(sha256.New, key), recvMAC: hmac.New(sha256.New, key)}
	x.out, x.in = "agent→coordinator", "coordinator→agent"
	if role == "coordinator" {
		x.out, x.in = x.in, x.out
	}
	return x
}

// mac is the seal of a frame: its direction, number, kind, Seq and body.
func mac(m hash.Hash, dir string, n uint64, k Kind, seq uint64, body []byte) []byte {
	m.Reset()
	var h [17]byte
	binary.BigEndian.PutUint64(h[:8], n)
	h[8] = byte(k)
	binary.BigEndian.PutUint64(h[9:], seq)
	m.Write([]byte(dir))
	m.Write(h[:])
	m.Write(body)
	return m.Sum(nil)
}

// Send seals f, in parts if its body is longer than partSize.
func (x *sealed) Send(f *Frame) error {
	if len(f.Body) > maxFrame {
		return fmt.Errorf("agents: a %s frame of %d bytes, more than %d", f.Kind, len(f.Body), maxFrame)
	}
	x.sendMu.Lock()
	defer x.sendMu.Unlock()
	body := f.Body
	for len(body) > partSize {
		if err := x.send(KindPart, 0, body[:partSize]); err != nil {
			return err
		}
		body = body[partSize:]
	}
	return x.send(f.Kind, f.Seq, body)
}

// send sends one sealed frame; x.sendMu held.
func (x *sealed) send(k Kind, seq uint64, body []byte) error {
	tag := mac(x.sendMAC, x.out, x.sent, k, seq, body)
	x.sent++
	b := make([]byte, 0, len(body)+macSize)
	return x.s.Send(&Frame{Kind: k, Seq: seq, Body: append(append(b, body...), tag...)})
}

// Recv returns the next frame whose seals hold, its parts put together.
func (x *sealed) Recv() (*Frame, error) {
	for {
		f, err := x.s.Recv()
		if err != nil {
			return nil, err
		}
		n := len(f.Body) - macSize
		if n < 0 || !hmac.Equal(f.Body[n:], mac(x.recvMAC, x.in, x.received, f.Kind, f.Seq, f.Body[:n])) {
			return nil, fmt.Errorf("agents: frame %d (%s): %w", x.received, f.Kind, ErrTampered)
		}
		x.received++
		body := f.Body[:n]
		if len(x.assembled)+len(body) > maxFrame {
			return nil, fmt.Errorf("agents: a frame of more than %d bytes", maxFrame)
		}
		if f.Kind == KindPart {
			x.assembled = append(x.assembled, body...)
			continue
		}
		if x.assembled != nil {
			body, x.assembled = append(x.assembled, body...), nil
		}
		return &Frame{Kind: f.Kind, Seq: f.Seq, Body: body}, nil
	}
}
