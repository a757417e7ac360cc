// The race detector's instrumentation enlarges every frame (an idle reader
// holds 4.9 KB under -race): the stack this test holds is the build users run.

//go:build !race

package ws

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestIdleReadersKeepTheSmallestStack: a connected user's reader, parked
// waiting for a message, holds Go's smallest stack (2 KB). The deepest it
// goes while waiting (NextReader down to the socket's read) is within a
// few hundred bytes of that (600 bytes more at the read double it, 96 do
// not): past it, every idle WebSocket's stack doubles, 2 KB more a
// connected user (bench/idle-memory.sh, MODE=ws). The server answers the handshakes on
// one goroutine and holds the connections, so that the stacks counted
// are the readers'.
func TestIdleReadersKeepTheSmallestStack(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			req, err := http.ReadRequest(bufio.NewReader(c))
			if err != nil {
				c.Close()
				continue
			}
			sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
			c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
				"Sec-WebSocket-Accept: " + base64.StdEncoding.EncodeToString(sum[:]) + "\r\n\r\n"))
			held = append(held, c)
		}
	}()
	d := lentDialer()
	const n = 500
	conns := make([]*websocket.Conn, n)
	for i := range conns {
		if conns[i], _, err = d.Dial("ws://"+ln.Addr().String()+"/", nil); err != nil {
			t.Fatal(err)
		}
		defer conns[i].Close()
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, ws := range conns {
		go (&Conn{}).read(ws) // as dial starts it; it ends with its connection, as nobody's (ended)
	}
	// Wait until every reader waits on its socket.
	buf := make([]byte, 1<<22)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if s := string(buf[:runtime.Stack(buf, true)]); strings.Count(s, "[IO wait]:\n") >= n && strings.Count(s, "ws.(*Conn).read(") >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the readers did not all come to wait on their sockets in a minute")
		}
	}
	runtime.GC()
	runtime.GC() // a stack grown and now mostly unused is halved at a collection
	runtime.ReadMemStats(&after)
	if per := float64(after.StackInuse-before.StackInuse) / n; per > 3<<10 {
		t.Errorf("an idle reader holds %.0f bytes of stack; want 2 KB, Go's smallest (4 KB: its deepest frames grew past 2 KB)", per)
	}
}
