// Package hostile serves HTTP that is broken on purpose, for tests: each
// Behaviour is one way a real server, proxy or attacker misbehaves
// (endless interim responses, bodies that never end, framing that lies,
// connections dropped at the worst moment). A Server listens on
// 127.0.0.1 and runs a Behaviour on every connection it accepts.
//
// Every behaviour that writes without end stops when the client goes away
// or the server is closed, so a test that ends ends its server's work.
package hostile

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Behaviour serves one accepted connection. It returns when it is done
// with it; the server then closes the connection.
type Behaviour func(c *Conn)

// Server runs a Behaviour on every connection to a loopback listener.
type Server struct {
	URL      *url.URL     // http://127.0.0.1:port
	Requests atomic.Int64 // request heads read, over all connections
	Conns    atomic.Int64 // connections accepted
	Ended    atomic.Int64 // connections the server has closed

	ln     net.Listener
	behave Behaviour
	mu     sync.Mutex
	open   map[net.Conn]bool
	wg     sync.WaitGroup
	closed chan struct{}
}

// Start serves b on a new listener on 127.0.0.1. Close stops it.
func Start(b Behaviour) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse("http://" + ln.Addr().String())
	s := &Server{URL: u, ln: ln, behave: b, open: map[net.Conn]bool{}, closed: make(chan struct{})}
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

func (s *Server) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.Conns.Add(1)
		s.mu.Lock()
		s.open[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.open, c)
				s.mu.Unlock()
				c.Close()
				s.Ended.Add(1)
			}()
			s.behave(&Conn{Conn: c, r: bufio.NewReader(c), srv: s})
		}()
	}
}

// Close stops accepting, closes every open connection and waits for the
// behaviours to return.
func (s *Server) Close() {
	close(s.closed)
	s.ln.Close()
	s.mu.Lock()
	for c := range s.open {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Conn is an accepted connection with a reader for request heads.
type Conn struct {
	net.Conn
	r   *bufio.Reader
	srv *Server
}

// ReadRequest reads one request: its head and a Content-Length body. It
// returns the request line, or an error when the client is gone.
func (c *Conn) ReadRequest() (string, error) {
	var line string
	length := 0
	for i := 0; ; i++ {
		l, err := c.r.ReadString('\n')
		if err != nil {
			return "", err
		}
		l = strings.TrimRight(l, "\r\n")
		if i == 0 {
			line = l
			continue
		}
		if l == "" {
			break
		}
		if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(k, "Content-Length") {
			length, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if _, err := io.CopyN(io.Discard, c.r, int64(length)); err != nil {
		return "", err
	}
	c.srv.Requests.Add(1)
	return line, nil
}

// Closed reports whether the server is closing.
func (c *Conn) Closed() bool {
	select {
	case <-c.srv.closed:
		return true
	default:
		return false
	}
}

// Reply answers every request on the connection with raw.
func Reply(raw string) Behaviour {
	return func(c *Conn) {
		for {
			if _, err := c.ReadRequest(); err != nil {
				return
			}
			if _, err := io.WriteString(c, raw); err != nil {
				return
			}
		}
	}
}

// ReplyOnce answers the first request with raw, then closes.
func ReplyOnce(raw string) Behaviour {
	return func(c *Conn) {
		if _, err := c.ReadRequest(); err == nil {
			_, _ = io.WriteString(c, raw)
		}
	}
}

// Endless answers the first request with head, then writes piece again
// and again until the client goes away.
func Endless(head, piece string) Behaviour {
	return func(c *Conn) {
		if _, err := c.ReadRequest(); err != nil {
			return
		}
		if _, err := io.WriteString(c, head); err != nil {
			return
		}
		p := bytes.Repeat([]byte(piece), max(1, 64<<10/len(piece))) // ~64 KiB a write
		for !c.Closed() {
			if _, err := c.Write(p); err != nil {
				return
			}
		}
	}
}

// Trickle answers the first request with raw, one byte every interval.
func Trickle(raw string, interval time.Duration) Behaviour {
	return func(c *Conn) {
		if _, err := c.ReadRequest(); err != nil {
			return
		}
		for i := 0; i < len(raw) && !c.Closed(); i++ {
			if _, err := c.Write([]byte{raw[i]}); err != nil {
				return
			}
			time.Sleep(interval)
		}
		c.Hold()
	}
}

// Hold keeps the connection open, saying nothing, until the client or
// the server closes it.
func (c *Conn) Hold() {
	_, _ = io.Copy(io.Discard, c.r)
}

// Silent reads the request and never answers.
func Silent(c *Conn) {
	if _, err := c.ReadRequest(); err != nil {
		return
	}
	c.Hold()
}

// Body is a response with a Content-Length body of n bytes, written as
// fast as the client reads.
func Body(n int) Behaviour {
	chunk := bytes.Repeat([]byte("x"), 256<<10)
	return func(c *Conn) {
		for {
			if _, err := c.ReadRequest(); err != nil {
				return
			}
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(n)+"\r\n\r\n"); err != nil {
				return
			}
			for left := n; left > 0; {
				k, err := c.Write(chunk[:min(left, len(chunk))])
				if err != nil {
					return
				}
				left -= k
			}
		}
	}
}

// ReadThenClose reads the request and closes the connection without a
// byte of answer, for the second request on each connection onwards; the
// first is answered with a 200, so the connection is kept alive first.
func ReadThenClose(c *Conn) {
	if _, err := c.ReadRequest(); err != nil {
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
		return
	}
	_, _ = c.ReadRequest() // then drop it, unanswered
}

// NoRead accepts and never reads: a request larger than the socket
// buffers cannot be sent whole.
func NoRead(c *Conn) {
	<-c.srv.closed
}

// Stray answers each request with ok, and 20 ms after each answer writes
// a response that no request asked for, leaving the connection open: a
// client that reuses it without looking would take the stray response for
// the answer to its next request.
func Stray(c *Conn) {
	for {
		if _, err := c.ReadRequest(); err != nil {
			return
		}
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale"); err != nil {
			return
		}
	}
}

// Reset answers nothing and resets the connection (RST, not FIN) once the
// request has arrived.
func Reset(c *Conn) {
	if _, err := c.ReadRequest(); err != nil {
		return
	}
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
}
