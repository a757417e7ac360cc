package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/headroom-dev/headroom/internal/rusage"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario/ws"
	"github.com/headroom-dev/headroom/transport"
)

type nopDoer struct{}

func (nopDoer) Do(_ *transport.Request, resp *transport.Response) {
	*resp = transport.Response{Status: 200, Body: []byte("Hello, World!")}
}
func (nopDoer) Cookies() map[string]string { return nil }

// BenchmarkActionOverhead is what headroom adds to each request of the
// cheapest scenario: one Starlark action making one GET, recorded into a
// real shard. The transport is a no-op, so this is scenario + metrics only.
func BenchmarkActionOverhead(b *testing.B) {
	sc, err := load("b.star", "def hit(user):\n    user.http.get('/', name='GET /')\nactions = [action('Hit', hit)]\n")
	if err != nil {
		b.Fatal(err)
	}
	rec := metrics.NewRecorder(1, metrics.NewProm(), time.Now)
	u := NewUser(sc, Env{ID: 1, Seed: 1, HTTP: nopDoer{}, Record: rec.Shard(0)})
	b.ReportAllocs()
	for b.Loop() {
		u.Run(u.Next())
	}
}

// postedEvent is a WebSocket event shaped like Mattermost's "posted" (the post itself a JSON string
// inside the event), 808 bytes: what a chat client receives most.
var postedEvent = func() []byte {
	id := func(c byte) string { return strings.Repeat(string(c), 26) }
	post, _ := json.Marshal(map[string]any{"id": id('p'), "create_at": int64(1764000000000), "update_at": int64(1764000000000),
		"edit_at": 0, "delete_at": 0, "is_pinned": false, "user_id": id('u'), "channel_id": id('c'), "root_id": "",
		"original_id": "", "message": "a message of a usual length, said in a channel of many members", "type": "",
		"props": map[string]any{}, "hashtag": "", "pending_post_id": "", "reply_count": 0, "metadata": map[string]any{}})
	ev, _ := json.Marshal(map[string]any{"event": "posted", "seq": 42,
		"data": map[string]any{"channel_display_name": "Town Square", "channel_name": "town-square", "channel_type": "O",
			"post": string(post), "sender_name": "@user1", "set_online": true, "team_id": id('t')},
		"broadcast": map[string]any{"omit_users": nil, "user_id": "", "channel_id": id('c'), "team_id": "",
			"connection_id": "", "omit_connection_id": ""}})
	return ev
}()

// pusher is a WebSocket server on 127.0.0.1 that, from start until halt, sends one message over and
// over to every connection, then closes it; sent counts the messages written. It writes ready-made
// frames straight to the socket, many to a write, so that it costs little of the process's CPU next to
// the client's. With window 0 it floods: it writes as fast as the connection takes the bytes. With a
// window, it writes that many messages for each credit its connection's reader gives back (two to
// begin with), so at most two windows are unhandled at once: set under the user's inbox (256), no
// message is dropped and the rate is what the client can handle.
type pusher struct {
	target  *url.URL
	sent    atomic.Int64
	credits chan chan struct{} // with a window: each connection's credits, in the order they connect
	start   func()
	halt    func()
}

func newPusher(b *testing.B, msg []byte, window int) *pusher {
	b.Helper()
	var frame []byte
	switch n := len(msg); {
	case n < 126:
		frame = []byte{0x81, byte(n)}
	case n < 1<<16:
		frame = []byte{0x81, 126, byte(n >> 8), byte(n)}
	default:
		b.Fatalf("a %d-byte message: keep it under 64 KiB", n)
	}
	frame = append(frame, msg...)
	perWrite := window
	if window == 0 {
		perWrite = 64
	}
	batch := bytes.Repeat(frame, perWrite)
	begin, end := make(chan struct{}), make(chan struct{})
	p := &pusher{credits: make(chan chan struct{}, 1<<16),
		start: sync.OnceFunc(func() { close(begin) }), halt: sync.OnceFunc(func() { close(end) })}
	b.Cleanup(p.start)
	b.Cleanup(p.halt)
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		var credit chan struct{}
		if window > 0 {
			credit = make(chan struct{}, 2)
			credit <- struct{}{}
			credit <- struct{}{}
			p.credits <- credit
		}
		<-begin
		for {
			if credit != nil {
				select {
				case <-credit:
				case <-end:
					return
				}
			}
			select {
			case <-end:
				return
			default:
			}
			if _, err := ws.NetConn().Write(batch); err != nil {
				return
			}
			p.sent.Add(int64(perWrite))
		}
	}))
	b.Cleanup(srv.Close)
	p.target, _ = url.Parse(srv.URL)
	return p
}

// BenchmarkWebSocketMessages is how many WebSocket messages a second headroom receives and hands to
// a scenario's on_message handler, by the path a run takes: each connection's reader goroutine reads
// a message into its user's inbox, and the user's goroutine takes it and runs the handler
// (User.Handle, recorded into a real shard), as the engine's pause does between actions. A local
// server (pusher) sends postedEvent to every user. One op is one message handled. Besides ns/op it
// reports msgs/s and msgs/cpu-s, the messages handled per second of the process's CPU time (user +
// system, the server's small share included): per core, whatever else the machine does. For one core:
//
//	go test -run '^$' -bench WebSocketMessages -cpu 1 ./scenario/
//
// send=window: the server sends 100 messages per 100 handled (two windows ahead), so none is dropped:
// the rate is what headroom can handle. send=flood: as fast as the sockets take them; messages that
// find an inbox full are dropped (drop-%), and the rate is what headroom handles when overwhelmed.
// handler=none connects one user without on_message, flooded: the messages are read and dropped
// unread, the reading alone, counted as the server sent them (more than were read by what the sockets
// buffer, a few thousand messages: too many to count this way for more users). pass runs an empty
// handler; json decodes each message and counts the posts, as bench/ws-events.sh's users do.
func BenchmarkWebSocketMessages(b *testing.B) {
	handlers := []struct{ name, body string }{
		{"none", ""},
		{"pass", "pass"},
		{"json", `if msg.json()["event"] == "posted":
        user.state["posts"] = user.state.get("posts", 0) + 1`},
	}
	for _, send := range []string{"window", "flood"} {
		for _, h := range handlers {
			for _, users := range []int{1, 100, 1000} {
				if h.body == "" && (send == "window" || users > 1) {
					continue
				}
				b.Run(fmt.Sprintf("send=%s/handler=%s/users=%d", send, h.name, users), func(b *testing.B) {
					window := 0
					if send == "window" {
						window = 100
					}
					benchMessages(b, h.body, users, window)
				})
			}
		}
	}
}

// benchMessages runs BenchmarkWebSocketMessages for n users whose on_message has body ("": none), the
// server sending window messages per credit (0: flooding).
func benchMessages(b *testing.B, body string, n, window int) {
	src := "def setup(user):\n    user.ws.connect('/push')\ndef act(user):\n    pass\nactions = [action('A', act)]\n"
	if body != "" {
		src = strings.Replace(src, "'/push'", "'/push', on_message=on_message", 1) +
			"def on_message(user, msg):\n    " + body + "\n"
	}
	sc, err := load("ws.star", src)
	if err != nil {
		b.Fatal(err)
	}
	srv := newPusher(b, postedEvent, window)
	rec := metrics.NewRecorder(min(runtime.GOMAXPROCS(0), 8), metrics.NewProm(), time.Now)
	var handled atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	users := make([]*User, n)
	for i := range users {
		u := NewUser(sc, Env{ID: i + 1, Seed: 1, HTTP: nopDoer{}, Record: rec.Shard(i), WS: ws.Dialing{Target: srv.target, Timeout: 10 * time.Second}})
		if out := u.Setup(); out != metrics.OK {
			b.Fatalf("user %d's setup: %v", i+1, out)
		}
		users[i] = u
		var credit chan struct{}
		if window > 0 {
			credit = <-srv.credits // users connect one after the other: this one's
		}
		wg.Go(func() { // the engine's pause, for a think time that never ends
			mine := 0
			for {
				select {
				case <-stop:
					return
				case <-u.Waiting():
					for m := u.NextMessage(); m != nil; m = u.NextMessage() {
						if u.Handle(m) != metrics.OK {
							b.Error("a handler failed")
						}
						handled.Add(1)
						if mine++; credit != nil && mine%window == 0 {
							credit <- struct{}{}
						}
					}
				}
			}
		})
	}
	dropped := func() (sum int64) {
		for _, u := range users {
			sum += u.Dropped()
		}
		return sum
	}
	count := handled.Load // messages handled
	if body == "" {
		count = srv.sent.Load // messages read, near enough
	}
	srv.start()
	time.Sleep(10 * time.Millisecond) // every connection under way
	b.ResetTimer()
	c0, d0, cpu0, start := count(), dropped(), rusage.CPU(), time.Now()
	for count()-c0 < int64(b.N) { // polling costs next to nothing
		time.Sleep(time.Millisecond)
	}
	elapsed, cpu, got, drop := time.Since(start), rusage.CPU()-cpu0, count()-c0, dropped()-d0
	b.StopTimer()
	srv.halt() // before closing: while it floods, a user's close waits for the CPU
	close(stop)
	wg.Wait()
	for _, u := range users {
		u.Close()
	}
	b.ReportMetric(float64(got)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(got)/cpu.Seconds(), "msgs/cpu-s")
	if body != "" {
		b.ReportMetric(100*float64(drop)/float64(got+drop), "drop-%")
	}
}
