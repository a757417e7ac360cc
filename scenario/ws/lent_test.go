package ws

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// A lentConn reads what the peer sent in order, through reads of any size, holds no buffer while
// nothing is unread, and reports the peer's close as io.EOF and a passed deadline as a timeout.
func TestLentConnReads(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() { c, _ := ln.Accept(); accepted <- c }()
	dialed, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	l := lend(dialed).(*lentConn)
	defer l.Close()
	peer := <-accepted

	// Nothing sent yet: a read waits, and the deadline ends it as a timeout, with no buffer held.
	l.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	var ne net.Error
	if n, err := l.Read(make([]byte, 10)); n != 0 || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read with nothing sent: %d, %v; want a timeout", n, err)
	}
	if l.buf != nil {
		t.Fatal("a buffer held while waiting")
	}
	l.SetReadDeadline(time.Time{})

	sent := bytes.Repeat([]byte("0123456789abcdef"), 3*readChunk/16+7) // more than a chunk, not a multiple
	go func() { peer.Write(sent); peer.Close() }()
	var got []byte
	p := make([]byte, 100)
	for {
		n, err := l.Read(p)
		got = append(got, p[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(got), err)
		}
	}
	if !bytes.Equal(got, sent) {
		t.Fatalf("read %d bytes, not the %d sent, in order", len(got), len(sent))
	}
	if l.buf != nil {
		t.Fatal("a buffer held after everything was read")
	}
}
