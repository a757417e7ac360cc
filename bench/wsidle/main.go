// Command wsidle is the WebSocket server that bench/idle-memory.sh's MODE=ws holds its users' idle
// connections against: it upgrades every request to a WebSocket and reads each connection until the
// client closes it, sending nothing (no pings either), so that what the client holds is all that is
// measured. It listens on a loopback address only and exits by itself after -for.
//
//	go build -o /tmp/wsidle ./bench/wsidle && /tmp/wsidle -listen 127.0.0.1:9000 -for 10m
//
// It prints "listening ADDR" once it accepts connections. On SIGTERM or at the end of -for it prints
// the connections it accepted and how many were still open, then exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "loopback address to listen on")
	limit := flag.Duration("for", 10*time.Minute, "exit after this long")
	flag.Parse()
	if err := run(*listen, *limit); err != nil {
		fmt.Fprintln(os.Stderr, "wsidle:", err)
		os.Exit(1)
	}
}

func run(listen string, limit time.Duration) error {
	ap, err := netip.ParseAddrPort(listen)
	if err != nil || !ap.Addr().IsLoopback() {
		return fmt.Errorf("-listen %q: want a loopback address and port, e.g. 127.0.0.1:9000", listen)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	var accepted, open atomic.Int64
	// Buffers are small and the write buffer is pooled: the server's memory is not what is measured,
	// but 20,000 connections should not cost it gigabytes either.
	up := websocket.Upgrader{ReadBufferSize: 256, WriteBufferSize: 256, WriteBufferPool: &sync.Pool{},
		CheckOrigin: func(*http.Request) bool { return true }}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return // the upgrader has answered
		}
		accepted.Add(1)
		open.Add(1)
		defer open.Add(-1)
		defer ws.Close()
		for { // until the client closes or the connection breaks; gorilla answers a close frame
			if _, _, err := ws.NextReader(); err != nil {
				return
			}
		}
	})}
	fmt.Println("listening", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	err = srv.Serve(ln)
	fmt.Printf("accepted %d connections, %d open at the end\n", accepted.Load(), open.Load())
	if ctx.Err() != nil || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
