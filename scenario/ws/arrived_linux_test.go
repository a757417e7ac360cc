package ws

import (
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/headroom-dev/headroom/internal/rawio"
)

// TestMessagesArriveWhenTheKernelSaysSo: a message read 30 ms after its
// bytes arrived (a reader busy elsewhere) is dated by the
// kernel's stamp of its arrival, before the reader saw it and 30 ms at
// least before it was read, so a delivery it carries leaves the reader's
// delay out. Linux only: the stamps are its (SO_TIMESTAMPNS).
func TestMessagesArriveWhenTheKernelSaysSo(t *testing.T) {
	srv := serveWS(func(c *websocket.Conn) {
		for { // each message back as it came
			typ, m, err := c.ReadMessage()
			if err != nil || c.WriteMessage(typ, m) != nil {
				return
			}
		}
	})
	defer srv.Close()
	d := lentDialer()
	ws, _, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	l := ws.NetConn().(*lentConn)
	var seen time.Time // when the bytes of the last echo were seen there, unread
	echo := func(late time.Duration) time.Time {
		t.Helper()
		if err := ws.WriteMessage(websocket.TextMessage, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		if late > 0 { // a reader busy elsewhere: it reads late what has arrived
			var b [1]byte
			_ = l.raw.Read(func(fd uintptr) bool { // the poller wakes it when bytes have come
				n, _ := rawio.Peek(fd, b[:])
				return n > 0
			})
			seen = time.Now()
			time.Sleep(late)
		}
		if _, m, err := readMessage(ws); err != nil || string(m) != "hello" {
			t.Fatalf("read %q, %v", m, err)
		}
		return arrived(ws, time.Now())
	}
	// The kernel stamps a moment after the first socket asks
	// (rawio.StampArrivals): until then a message is dated when read.
	for i := 0; l.last.IsZero(); i++ {
		if i == 1000 {
			t.Fatal("no message was stamped in 1,000, a millisecond apart")
		}
		echo(0)
		time.Sleep(time.Millisecond)
	}
	if at := echo(0); at.After(time.Now()) {
		t.Errorf("read at once: arrived %v, after it was read", at)
	}

	at := echo(30 * time.Millisecond)
	if read := time.Now(); at.After(seen) || read.Sub(at) < 30*time.Millisecond {
		t.Errorf("read 30 ms after it was seen: arrived %v, seen %v, read %v; want it arrived before it was seen, 30 ms before it was read",
			at.Format(time.StampMicro), seen.Format(time.StampMicro), read.Format(time.StampMicro))
	}
}
