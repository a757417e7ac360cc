// Package agents runs one run's users on several processes: agents, each
// an engine and a recorder, and the coordinator that drives them as a
// runner.Fleet (docs/AGENTS.md). This file holds what both sides speak:
// frames over one gRPC stream per agent, and the handshake that proves
// each side knows the shared token before any work is given or taken.
package agents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/grpc"
)

// Kind is what a frame carries.
type Kind uint8

const (
	KindChallenge Kind = iota + 1 // coordinator → agent: a nonce to answer (Challenge)
	KindHello                     // agent → coordinator: its answer and its own nonce (Hello)
	KindWelcome                   // coordinator → agent: the coordinator's answer (Welcome)
	KindRefused                   // either way: why the other side is not trusted; the stream ends
	KindSnapshot                  // agent → coordinator: a drained snapshot, Seq numbered (wire.AppendSnapshot)
	KindAck                       // coordinator → agent: snapshots (and a numbered Done) up to Seq are merged
	KindPart                      // either way, after the handshake: the first part of a longer frame's body (seal.go)
)

func (k Kind) String() string {
	if s, ok := map[Kind]string{KindChallenge: "challenge", KindHello: "hello", KindWelcome: "welcome",
		KindRefused: "refused", KindSnapshot: "snapshot", KindAck: "ack", KindStart: "start", KindUsers: "users",
		KindStatus: "status", KindStop: "stop", KindDone: "done", KindMetrics: "metrics", KindFlush: "flush",
		KindOpen: "open", KindPacer: "pacer", KindPart: "part"}[k]; ok {
		return s
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// Frame is one message on an agent's stream. Body is JSON for control
// messages and the encoded snapshot for KindSnapshot.
type Frame struct {
	Kind Kind
	Seq  uint64
	Body []byte
}

// maxFrame bounds a frame's body once put together from its parts
// (seal.go), after the handshake; an agent's snapshot of 1,000 request
// names is far below it. On the wire a message is at most maxMessage.
const maxFrame = 64 << 20

// codec is the gRPC codec of frames: the kind, the sequence number as a
// varint, then the body. No protobuf: frames are all there is.
type codec struct{}

func (codec) Name() string { return "headroom-frame" }

func (codec) Marshal(v any) ([]byte, error) {
	f, ok := v.(*Frame)
	if !ok {
		return nil, fmt.Errorf("agents: cannot encode %T", v)
	}
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(f.Body))
	b = append(b, byte(f.Kind))
	b = binary.AppendUvarint(b, f.Seq)
	return append(b, f.Body...), nil
}

func (codec) Unmarshal(data []byte, v any) error {
	f, ok := v.(*Frame)
	if !ok {
		return fmt.Errorf("agents: cannot decode into %T", v)
	}
	if len(data) < 2 {
		return errors.New("agents: a frame shorter than its header")
	}
	seq, n := binary.Uvarint(data[1:])
	if n <= 0 {
		return errors.New("agents: a frame with a bad sequence number")
	}
	// The body is copied: gRPC may reuse data once Unmarshal returns.
	*f = Frame{Kind: Kind(data[0]), Seq: seq, Body: append([]byte(nil), data[1+n:]...)}
	return nil
}

// Stream is one agent's stream as either side sees it.
type Stream interface {
	Send(*Frame) error
	Recv() (*Frame, error)
}

// service is the gRPC service, described by hand (there is no .proto):
// one bidirectional stream, Join, opened by each agent.
const service = "headroom.Agents"

var joinDesc = grpc.StreamDesc{StreamName: "Join", ServerStreams: true, ClientStreams: true}

// serverStream and clientStream adapt gRPC's streams to Stream.
type serverStream struct{ grpc.ServerStream }

func (s serverStream) Send(f *Frame) error { return s.SendMsg(f) }
func (s serverStream) Recv() (*Frame, error) {
	f := &Frame{}
	return f, s.RecvMsg(f)
}

type clientStream struct{ grpc.ClientStream }

func (s clientStream) Send(f *Frame) error { return s.SendMsg(f) }
func (s clientStream) Recv() (*Frame, error) {
	f := &Frame{}
	return f, s.RecvMsg(f)
}

// Register serves Join on srv: join is called with each agent's stream,
// and the stream ends when it returns.
func Register(srv *grpc.Server, join func(Stream) error) {
	register(srv, func(_ context.Context, s Stream) error { return join(s) })
}

// register is Register with each stream's context, which names the
// connection it came on (connOf).
func register(srv *grpc.Server, join func(context.Context, Stream) error) {
	desc := joinDesc
	desc.Handler = func(_ any, s grpc.ServerStream) error { return join(s.Context(), serverStream{s}) }
	srv.RegisterService(&grpc.ServiceDesc{ServiceName: service, HandlerType: (*any)(nil), Streams: []grpc.StreamDesc{desc}}, struct{}{})
}

// ServerOptions are the options a coordinator's gRPC server needs for
// frames, besides its credentials.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodec(codec{}), grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage)}
}

// Join opens an agent's stream on conn.
func Join(ctx context.Context, conn *grpc.ClientConn) (Stream, error) {
	s, err := conn.NewStream(ctx, &joinDesc, "/"+service+"/Join",
		grpc.ForceCodec(codec{}), grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage))
	if err != nil {
		return nil, err
	}
	return clientStream{s}, nil
}
