package agents

import (
	"context"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// rawCodec sends a body as it is, shared: the attack below costs the
// attacker one buffer, so what the heap holds is the coordinator's.
type rawCodec struct{}

func (rawCodec) Name() string                    { return "headroom-frame" }
func (rawCodec) Marshal(v any) ([]byte, error)   { return v.([]byte), nil }
func (rawCodec) Unmarshal(b []byte, v any) error { *(v.(*[]byte)) = b; return nil }

// heapBytes is the bytes of the heap's live and unswept objects.
func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// Anyone who reaches a coordinator's port gets little before proving the
// token: hellos of 60 MiB are refused by their length, not held (the
// heap grows by far less than one of them while 16 are sent), and
// streams that take a challenge and never answer are cut at the
// handshake deadline, those past the handshake slots at once; an agent
// with the token joins meanwhile.
func TestUnauthenticatedPeersAreBounded(t *testing.T) {
	defer func(d time.Duration) { handshakeTimeout = d }(handshakeTimeout)
	handshakeTimeout = 500 * time.Millisecond
	c, err := Listen("127.0.0.1:0", []byte(testToken), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dial := func() *grpc.ClientConn {
		conn, err := grpc.NewClient(c.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Big hellos.
	big := make([]byte, 60<<20)
	big[0] = byte(KindHello)
	before := heapBytes()
	var peak uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak = max(peak, heapBytes())
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	refused := make(chan error, 16)
	for range 16 {
		conn := dial()
		wg.Go(func() {
			s, err := conn.NewStream(ctx, &joinDesc, "/"+service+"/Join", grpc.ForceCodec(rawCodec{}), grpc.MaxCallSendMsgSize(len(big)+1))
			if err != nil {
				refused <- err
				return
			}
			err = s.SendMsg(big)
			var in []byte
			if err == nil {
				for err == nil {
					err = s.RecvMsg(&in) // the challenge, then the refusal
				}
			}
			refused <- err
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	for range 16 {
		if err := <-refused; status.Code(err) != codes.ResourceExhausted {
			t.Errorf("a 60 MiB hello ended with %v, want refused as too large", err)
		}
	}
	if grew := int64(peak) - int64(before); grew > 32<<20 {
		t.Errorf("the heap grew by %d MiB while 16 hellos of 60 MiB were refused; want under 32 MiB", grew>>20)
	}
	t.Logf("heap: %d MiB before, %d MiB at most while 16 hellos of 60 MiB were refused", before>>20, peak>>20)

	// Idle streams: 200, on 25 connections.
	start := time.Now()
	type end struct {
		err  error
		took time.Duration
	}
	ends := make(chan end, 200)
	for range 25 {
		conn := dial()
		for range 8 {
			go func() {
				s, err := Join(ctx, conn)
				if err == nil {
					for err == nil {
						_, err = s.Recv()
					}
				}
				ends <- end{err, time.Since(start)}
			}()
		}
	}
	if _, err := greetWithToken(ctx, dial(), testToken); err != nil {
		t.Errorf("an agent with the token beside 200 idle streams: %v", err)
	}
	counts := map[codes.Code]int{}
	var last time.Duration
	for range 200 {
		e := <-ends
		counts[status.Code(e.err)]++
		last = max(last, e.took)
	}
	if counts[codes.DeadlineExceeded] == 0 || counts[codes.Unavailable] == 0 || counts[codes.DeadlineExceeded]+counts[codes.Unavailable] != 200 {
		t.Errorf("200 idle streams ended %v; want each cut at the deadline or refused a slot", counts)
	}
	if last > 10*handshakeTimeout {
		t.Errorf("the last idle stream was cut %v after it opened; the deadline is %v", last, handshakeTimeout)
	}
	t.Logf("200 idle streams: %v, the last cut after %v", counts, last)
}

// greetWithToken joins as an agent over conn and returns its welcome,
// trying again as an agent does (Retry) for up to 10 s.
func greetWithToken(ctx context.Context, conn *grpc.ClientConn, token string) (Welcome, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := Join(ctx, conn)
		var w Welcome
		if err == nil {
			w, _, err = Greet(s, []byte(token), Hello{Version: "test", Name: "honest", Cores: 1})
		}
		if err == nil || !Retry(err) || time.Now().After(deadline) {
			return w, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
