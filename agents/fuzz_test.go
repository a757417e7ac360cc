package agents

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// script is a stream that hands out its frames, then io.EOF.
type script struct {
	in   []*Frame
	sent []*Frame
}

func (s *script) Send(f *Frame) error { s.sent = append(s.sent, f); return nil }
func (s *script) Recv() (*Frame, error) {
	if len(s.in) == 0 {
		return nil, io.EOF
	}
	f := s.in[0]
	s.in = s.in[1:]
	return f, nil
}

// FuzzAgentFrames feeds any bytes to what faces a peer without the token:
// the frame codec (what decodes, encodes back to itself), the
// coordinator's handshake (it never places the peer), the agent's (it is
// never welcomed) and a sealed stream (nothing passes its seal).
//
//	go test -run='^$' -fuzz=FuzzAgentFrames -fuzztime=2m ./agents/
func FuzzAgentFrames(f *testing.F) {
	hello, _ := codec{}.Marshal(&Frame{Kind: KindHello, Body: []byte(`{"nonce":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","mac":"AA==","name":"x","cores":2,"proto":2}`)})
	challenge, _ := codec{}.Marshal(&Frame{Kind: KindChallenge, Body: []byte(`{"nonce":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`)})
	for _, s := range [][]byte{hello, challenge, {}, {1}, {byte(KindHello), 0x80}, {byte(KindRefused), 0, '{', '}'}, {byte(KindPart), 5, 'x'}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fr Frame
		if err := (codec{}).Unmarshal(data, &fr); err != nil {
			return
		}
		b, err := codec{}.Marshal(&fr)
		var again Frame
		if err != nil || (codec{}).Unmarshal(b, &again) != nil || again.Kind != fr.Kind || again.Seq != fr.Seq || !bytes.Equal(again.Body, fr.Body) {
			t.Fatalf("%+v does not encode back to itself: %v, %+v", fr, err, again)
		}
		_, sealed, err := Accept(&script{in: []*Frame{&fr}}, []byte(testToken), func(Hello) (Welcome, error) {
			t.Fatal("a peer without the token was placed")
			return Welcome{}, nil
		})
		if err == nil || sealed != nil {
			t.Fatalf("a hello of %q was accepted", data)
		}
		if _, _, err := Greet(&script{in: []*Frame{&fr, &fr}}, []byte(testToken), Hello{Name: "a"}); err == nil {
			t.Fatalf("an agent was welcomed by %q", data)
		}
		x := seal(&script{in: []*Frame{&fr}}, sessionKey([]byte(testToken), nil, nil, ""), "coordinator")
		if g, err := x.Recv(); err == nil || (!errors.Is(err, ErrTampered) && !errors.Is(err, io.EOF)) {
			t.Fatalf("a sealed stream took %+v from %q (%v)", g, data, err)
		}
	})
}
