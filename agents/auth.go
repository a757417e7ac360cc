package agents

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The handshake (docs/AGENTS.md, "Security"): each side proves it knows
// the shared token by answering the other's random challenge with an
// HMAC-SHA256 under the token, so the token never crosses the wire and an
// answer is good for one stream only. The roles are in what is signed, so
// an answer cannot be reflected back to the side that asked; and each
// answer covers every field of its message, so someone on the path of a
// --plaintext link can change none of them (an agent's Cores, which
// decide its share of the users; its place; its lease):
//
//	coordinator → agent   challenge {nonce_c, proto}
//	agent → coordinator   hello {nonce_a, version, name, cores, proto, resume, mac_a}
//	coordinator → agent   welcome {index, session, lease, resumed, mac_c}
//
//	mac_a = HMAC(token, "headroom agents v2 agent", nonce_c, nonce_a,
//	             version, name, cores, proto, resume)
//	mac_c = HMAC(token, "headroom agents v2 coordinator", nonce_a, nonce_c,
//	             mac_a, index, session, lease, resumed)
//
// The fields are written in a fixed order, each with its length (fields),
// not as their JSON: what is proved is what each side decoded. mac_c
// covers mac_a, and so the hello it answers.
//
// An agent takes no work before it has checked mac_c: a coordinator that
// cannot prove the token could make it run any code.
//
// An agent whose stream broke during the run resumes its place on a new
// stream with the same handshake, its hello naming the session its welcome
// gave it (resume): a resume proves the token as a join does, and an
// answer for one session is no answer for another.
//
// Both sides speak protoBound: a coordinator refuses the hello of an agent
// of before (its proof covers less) and an agent the challenge of a
// coordinator of before (no proto in it), each saying which to upgrade,
// rather than that the token does not match.

// nonceSize is the size of a challenge, in bytes.
const nonceSize = 32

// Challenge is the coordinator's first frame.
type Challenge struct {
	Nonce []byte `json:"nonce"`
	// Proto is the handshake the coordinator speaks: protoBound; 0
	// (absent) from a coordinator of before.
	Proto int `json:"proto,omitempty"`
}

// Hello is an agent's answer to the challenge, and what it tells of itself.
type Hello struct {
	Nonce   []byte `json:"nonce"` // the agent's challenge to the coordinator
	MAC     []byte `json:"mac"`
	Version string `json:"version"` // headroom's version
	Name    string `json:"name"`    // host or pod name, for the result
	Cores   int    `json:"cores"`   // GOMAXPROCS: users are split by it
	// Resume, if set, is the session of the place this agent held until
	// its stream broke: it takes it up again, its users still running,
	// rather than join as a new agent. Covered by MAC.
	Resume string `json:"resume,omitempty"`
	// Proto is the handshake and the frames of the run the agent speaks
	// (run.go): protoBound now; 0 (absent) in an agent of before the open
	// model.
	Proto int `json:"proto,omitempty"`
}

// Welcome is the coordinator's answer: its proof, and the agent's place.
type Welcome struct {
	MAC   []byte `json:"mac"`
	Index int    `json:"index"` // the agent's number in the run, from 0
	// Session names the agent's place for a resume (Hello.Resume): random,
	// and known only to the agent and the coordinator. Empty from a
	// coordinator that cannot resume an agent.
	Session string `json:"session,omitempty"`
	// Lease is how long the coordinator keeps the place of an agent it
	// has not heard from, its users counted as running: the time an agent
	// whose stream broke has to resume.
	Lease time.Duration `json:"lease,omitempty"`
	// Resumed says the coordinator took the agent back in its place
	// (Hello.Resume), not as a new agent.
	Resumed bool `json:"resumed,omitempty"`
}

// Refused ends a stream with the reason the other side was not trusted.
type Refused struct {
	Reason string `json:"reason"`
	Later  bool   `json:"later,omitempty"` // no place now: an agent may try again
}

// ErrRefused is returned when the other side refused this one, or failed to prove the token.
var ErrRefused = errors.New("refused")

// ErrLater is wrapped, beside ErrRefused, when the coordinator had no
// place for the agent now (the run holds every agent it can): a place may
// free up, when an agent is lost.
var ErrLater = errors.New("no place now")

// prove is role's answer to the challenge theirs, with its own nonce
// ours, covering signed (fields). The nonces are of a fixed size, so what
// follows them cannot be read as part of them.
func prove(token []byte, role string, theirs, ours []byte, signed fields) []byte {
	m := hmac.New(sha256.New, token)
	m.Write([]byte("headroom agents v2 " + role + "\x00"))
	m.Write(theirs)
	m.Write(ours)
	m.Write(signed)
	return m.Sum(nil)
}

// helloProof is mac_a: the agent's answer to the challenge nonceC, over
// its hello h (its nonce and fields).
func helloProof(token, nonceC []byte, h Hello) []byte {
	return prove(token, "agent", nonceC, h.Nonce, h.signed())
}

// welcomeProof is mac_c: the coordinator's answer to the hello h (its
// nonce and proof), over its welcome w.
func welcomeProof(token, nonceC []byte, h Hello, w Welcome) []byte {
	return prove(token, "coordinator", h.Nonce, nonceC, append(fields(nil).bytes(h.MAC), w.signed()...))
}

// fields is what a proof covers of a message, in a form with one reading:
// each string its length (8 bytes, big-endian) then its bytes; each
// number 8 bytes, big-endian (two's complement); a flag one byte, 0 or 1.
// The order is the one of signed.
type fields []byte

func (f fields) bytes(b []byte) fields {
	return append(binary.BigEndian.AppendUint64(f, uint64(len(b))), b...)
}
func (f fields) str(s string) fields { return f.bytes([]byte(s)) }
func (f fields) num(n int64) fields  { return binary.BigEndian.AppendUint64(f, uint64(n)) }
func (f fields) flag(b bool) fields {
	if b {
		return append(f, 1)
	}
	return append(f, 0)
}

// signed is what of h its proof covers besides the nonces: every field
// but the proof itself.
func (h Hello) signed() fields {
	return fields(nil).str(h.Version).str(h.Name).num(int64(h.Cores)).num(int64(h.Proto)).str(h.Resume)
}

// signed is what of w its proof covers besides the hello: every field but
// the proof itself.
func (w Welcome) signed() fields {
	return fields(nil).num(int64(w.Index)).str(w.Session).num(int64(w.Lease)).flag(w.Resumed)
}

func nonce() []byte {
	b := make([]byte, nonceSize)
	rand.Read(b) // never fails (crypto/rand)
	return b
}

// send sends a control message as a frame of kind k.
func send(s Stream, k Kind, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.Send(&Frame{Kind: k, Body: body})
}

// recv receives the next frame, which must be of kind k, into v. A
// Refused frame is an ErrRefused with its reason.
func recv(s Stream, k Kind, v any) error {
	f, err := s.Recv()
	if err != nil {
		return err
	}
	if f.Kind == KindRefused {
		var r Refused
		_ = json.Unmarshal(f.Body, &r)
		if r.Later {
			return fmt.Errorf("%w (%w): %s", ErrRefused, ErrLater, r.Reason)
		}
		return fmt.Errorf("%w: %s", ErrRefused, r.Reason)
	}
	if f.Kind != k {
		return fmt.Errorf("agents: got a %s frame, want %s", f.Kind, k)
	}
	if err := json.Unmarshal(f.Body, v); err != nil {
		return fmt.Errorf("agents: a bad %s frame: %v", k, err)
	}
	return nil
}

// refuse tells the other side why, then returns the error for this side.
func refuse(s Stream, why string) error {
	_ = send(s, KindRefused, Refused{Reason: why})
	return fmt.Errorf("%w: %s", ErrRefused, why)
}

// refuseFor refuses with err's text, and says whether to try again later.
func refuseFor(s Stream, err error) error {
	why := err.Error()
	if !errors.Is(err, ErrLater) {
		return refuse(s, why)
	}
	_ = send(s, KindRefused, Refused{Reason: why, Later: true})
	return fmt.Errorf("%w: %s", ErrRefused, why)
}

// Accept is the coordinator's side of the handshake on s. It returns the
// agent's Hello once the agent has proved it knows token (and, for a
// resume, the session it names); place then gives the agent its Welcome
// (its index, or the place it resumes; an error refuses it). Every frame
// after the welcome goes through the returned stream, sealed.
func Accept(s Stream, token []byte, place func(Hello) (Welcome, error)) (Hello, Stream, error) {
	mine := nonce()
	if err := send(s, KindChallenge, Challenge{Nonce: mine, Proto: protoBound}); err != nil {
		return Hello{}, nil, err
	}
	var h Hello
	if err := recv(s, KindHello, &h); err != nil {
		return Hello{}, nil, err
	}
	if h.Proto < protoBound { // its proof is of another form: no use checking it
		return Hello{}, nil, refuse(s, fmt.Sprintf("this agent's headroom (%s) predates the coordinator's handshake, "+
			"whose proofs cover every field: upgrade the agent to the coordinator's release", h.Version))
	}
	if len(h.Nonce) != nonceSize || !hmac.Equal(h.MAC, helloProof(token, mine, h)) {
		return Hello{}, nil, refuse(s, "the agent's token does not match the coordinator's (--token-file), or its hello was altered on the way")
	}
	w, err := place(h)
	if err != nil {
		return Hello{}, nil, refuseFor(s, err)
	}
	w.MAC = welcomeProof(token, mine, h, w)
	if err := send(s, KindWelcome, w); err != nil {
		return h, nil, err
	}
	return h, seal(s, sessionKey(token, mine, h.Nonce, h.Resume), "coordinator"), nil
}

// Greet is the agent's side of the handshake on s: it answers the
// coordinator's challenge with h (its nonce and proof filled in here) and
// returns the Welcome once the coordinator has proved it knows token, and
// the stream every later frame goes through, sealed.
func Greet(s Stream, token []byte, h Hello) (Welcome, Stream, error) {
	w, key, err := handshake(s, token, h)
	if err != nil {
		return Welcome{}, nil, err
	}
	return w, seal(s, key, "agent"), nil
}

// handshake is Greet's handshake; it returns the Welcome and the session key.
func handshake(s Stream, token []byte, h Hello) (Welcome, []byte, error) {
	h.Proto = max(h.Proto, protoBound) // proofs over every field, frames sealed
	var c Challenge
	if err := recv(s, KindChallenge, &c); err != nil {
		return Welcome{}, nil, err
	}
	if len(c.Nonce) != nonceSize {
		return Welcome{}, nil, refuse(s, "a challenge of the wrong size")
	}
	if c.Proto < protoBound {
		return Welcome{}, nil, refuse(s, fmt.Sprintf("the coordinator's headroom predates this agent's (%s) handshake, "+
			"whose proofs cover every field: upgrade the coordinator to the agent's release", h.Version))
	}
	h.Nonce = nonce()
	h.MAC = helloProof(token, c.Nonce, h)
	if err := send(s, KindHello, h); err != nil {
		return Welcome{}, nil, err
	}
	var w Welcome
	if err := recv(s, KindWelcome, &w); err != nil {
		return Welcome{}, nil, err
	}
	if !hmac.Equal(w.MAC, welcomeProof(token, c.Nonce, h, w)) {
		return Welcome{}, nil, refuse(s, "the coordinator's token does not match the agent's (--token-file), or its welcome was altered on the way")
	}
	if h.Resume != "" && !w.Resumed {
		return Welcome{}, nil, refuse(s, "the coordinator took a resuming agent as a new one")
	}
	return w, sessionKey(token, c.Nonce, h.Nonce, h.Resume), nil
}
