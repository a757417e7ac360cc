package scenario

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario/ws"
)

// rawServer accepts connections on 127.0.0.1 and hands each to serve.
func rawServer(t *testing.T, serve func(c net.Conn)) *url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return &url.URL{Scheme: "http", Host: l.Addr().String()}
}

// upgrade reads a handshake off c and answers 101, by hand.
func upgrade(c net.Conn) bool {
	r := bufio.NewReader(c)
	req, err := http.ReadRequest(r)
	if err != nil {
		return false
	}
	_, err = c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Accept: " + acceptKey(req.Header.Get("Sec-WebSocket-Key")) + "\r\n\r\n"))
	return err == nil
}

// TestHostileWebSocketServers: whatever a server does with a WebSocket, it ends as an outcome, in bounded
// time and memory, never as a hang or a crash.
func TestHostileWebSocketServers(t *testing.T) {
	connect := `
def act(user):
    c = user.ws.connect("/", name="ws", on_message=lambda user, msg: None)
    user.state["c"] = c
`
	t.Run("handshake never answered", func(t *testing.T) {
		target := rawServer(t, func(c net.Conn) { io.Copy(io.Discard, c) }) // reads, never answers
		u, rec := wsUserTimeout(t, connect, target, 300*time.Millisecond)
		start := time.Now()
		out := u.Run(u.Type().Actions[0])
		hs := rec.last(metrics.Request)
		if out != metrics.Timeout || hs.Outcome != metrics.Timeout || time.Since(start) > 5*time.Second {
			t.Errorf("action %v, handshake %v %q after %v; want a timed-out handshake failing the action within the timeout",
				out, hs.Outcome, hs.Message, time.Since(start))
		}
	})
	t.Run("garbage after the upgrade", func(t *testing.T) {
		target := rawServer(t, func(c net.Conn) {
			if upgrade(c) {
				c.Write([]byte("HTTP/1.1 200 OK\r\n\r\nthis is not a frame \xff\xfe\x00"))
				io.Copy(io.Discard, c) // until the client goes
			}
		})
		u, rec := wsUserTimeout(t, connect, target, 5*time.Second)
		if out := u.Run(u.Type().Actions[0]); out != metrics.OK {
			t.Fatalf("connect: %v %s", out, rec.last(metrics.Action).Message)
		}
		rec.await(t, "an abnormal close", func() bool { return rec.count("ws", metrics.Closed) == 1 })
		if c := rec.last(metrics.Closed); c.Outcome != metrics.Failed || c.Message == "" {
			t.Errorf("close %+v, want abnormal, saying why", c)
		}
	})
	t.Run("a message over the limit", func(t *testing.T) {
		srv := wsServer(t, func(ws *websocket.Conn) {
			ws.WriteMessage(websocket.TextMessage, []byte(strings.Repeat("x", 64<<10)))
			untilClosed(ws)
		})
		u, rec := wsUserEnv(t, connect, Env{WS: ws.Dialing{Target: srv, Timeout: 5 * time.Second, MaxMessage: 4 << 10}})
		u.Run(u.Type().Actions[0])
		rec.await(t, "the connection closed", func() bool { return rec.count("ws", metrics.Closed) == 1 })
		if c := rec.last(metrics.Closed); c.Outcome != metrics.Failed || !strings.Contains(c.Message, "read limit") {
			t.Errorf("close %+v, want abnormal: read limit exceeded", c)
		}
		if n := rec.count("ws", metrics.MessageIn); n != 0 {
			t.Errorf("%d messages over the limit delivered", n)
		}
	})
}

// wsServer serves a gorilla WebSocket at / running fn.
func wsServer(t *testing.T, fn func(ws *websocket.Conn)) *url.URL {
	t.Helper()
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		fn(ws)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u
}

func wsUserTimeout(t *testing.T, src string, target *url.URL, timeout time.Duration) (*User, *lockedSamples) {
	return wsUserEnv(t, src, Env{WS: ws.Dialing{Target: target, Timeout: timeout}})
}

// wsUserEnv is wsUser with env's target, timeout and message limit.
func wsUserEnv(t *testing.T, src string, env Env) (*User, *lockedSamples) {
	t.Helper()
	sc, err := load("w.star", src+"\nactions = [action('A', act)]\n")
	if err != nil {
		t.Fatal(err)
	}
	rec := &lockedSamples{}
	env.ID, env.Seed, env.HTTP, env.Record = 1, 1, &fakeDoer{status: 200}, rec
	u := NewUser(sc, env)
	t.Cleanup(u.Close)
	return u, rec
}

// acceptKey is RFC 6455's answer to a Sec-WebSocket-Key.
func acceptKey(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// untilClosed reads ws until the client closes it or it breaks.
func untilClosed(ws *websocket.Conn) {
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			return
		}
	}
}
