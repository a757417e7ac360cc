// Command gofloor is the least a Go process does for one HTTP/1.1 request: -c goroutines, each
// with its own keep-alive connection (the net package, its poller), writing one GET and reading
// its response, again and again, for -d. No scenario, no metrics, no parsing beyond finding the
// response's end. bench/rps.sh's question, what a Go client can do against wrk on one core, is
// then answered without headroom's layers (issue 36). With -h2 each connection is TLS with
// HTTP/2 (ALPN; the certificate is not checked: loopback only), through golang.org/x/net/http2's
// ClientConn, one stream at a time: bench/h2.sh's question, the same way.
//
//	go build -o /tmp/gofloor ./bench/gofloor
//	GOMAXPROCS=1 taskset -c 1 /tmp/gofloor -addr 127.0.0.1:8080 -c 64 -d 10s
//	GOMAXPROCS=1 taskset -c 1 /tmp/gofloor -addr 127.0.0.1:8443 -c 64 -d 10s -h2
//
// With -rate R the requests are paced, as wrk2's are: connection i sends its k-th request at
// (i + k·c + ½)/R from the start, sleeping until then (time.Sleep, the runtime's timers), or at once
// when it is late; it also prints the p50, p99 and p99.9 of the latency from each request's intended
// start and of its lateness (the send after the intended start). That is the least a Go process does
// for one paced request: bench/open-rate.sh's question (issue 54) without headroom's layers.
//
//	GOMAXPROCS=1 taskset -c 1 /tmp/gofloor -addr 127.0.0.1:8080 -c 64 -d 15s -rate 21500
//
// time.Sleep is the runtime's timer: when the process is idle, Go's poller sleeps in whole
// milliseconds, so at rates where the core idles between requests some leave up to a millisecond
// late (internal/wakeup says why). With -grid 1ms each request waits for the first tick of a 1 ms grid
// at or after its due time, near enough to wrk2's pacer (its wait rounded to whole milliseconds, its
// event loop's timers in milliseconds): one wake-up sends a millisecond's requests, late by up to the
// grid. So paced, gofloor costs what wrk2 costs a request; paced as asked, 1.37× (2026-11-30,
// docs/BENCHMARKS.md). headroom's dispatcher does not pace on a grid.
//
//	GOMAXPROCS=1 taskset -c 1 /tmp/gofloor -addr 127.0.0.1:8080 -c 64 -d 10s -rate 70000 -grid 1ms
//
// It sends only to a loopback address, and prints "requests N rps R".
package main

import (
	"bytes"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

func main() {
	addr := flag.String("addr", "", "the server, host:port on 127.0.0.0/8")
	conns := flag.Int("c", 64, "connections, one goroutine each")
	dur := flag.Duration("d", 10*time.Second, "how long to send")
	h2 := flag.Bool("h2", false, "HTTP/2 over TLS (x/net/http2), one stream at a time a connection")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	rate := flag.Float64("rate", 0, "requests a second over all connections, paced from the start (0: each connection back to back)")
	grid := flag.Duration("grid", 0, "with -rate: send each request at the first tick of this grid at or after its due time (wrk2's millisecond timers; 0: at its due time)")
	flag.Parse()
	ap, err := netip.ParseAddrPort(*addr)
	if err != nil || !ap.Addr().IsLoopback() || *conns < 1 || *dur <= 0 || *dur > 10*time.Minute || *rate < 0 || (*rate > 0 && *h2) || *grid < 0 || (*grid > 0 && *rate == 0) {
		fmt.Fprintln(os.Stderr, "gofloor: want -addr 127.x.y.z:port, -c 1 or more, -d up to 10m, -rate 0 or more (HTTP/1.1 only), -grid only with -rate")
		os.Exit(2)
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil || pprof.StartCPUProfile(f) != nil {
			fmt.Fprintln(os.Stderr, "gofloor: no CPU profile:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	var done atomic.Int64
	stop := time.Now().Add(*dur)
	var wg sync.WaitGroup
	loop := h1Loop
	if *h2 {
		loop = h2Loop
	}
	start := time.Now()
	if *rate > 0 {
		p := &paced{start: start, rate: *rate, grid: *grid, conns: *conns, late: make([][]time.Duration, *conns), took: make([][]time.Duration, *conns)}
		for i := range *conns {
			wg.Go(func() { p.loop(i, *addr, stop, &done) })
		}
		wg.Wait()
		fmt.Printf("requests %d rps %.0f\n", done.Load(), float64(done.Load())/time.Since(start).Seconds())
		fmt.Printf("from the intended start %s; late %s\n", quantiles(p.took), quantiles(p.late))
		return
	}
	for range *conns {
		wg.Go(func() { loop(*addr, stop, &done) })
	}
	wg.Wait()
	fmt.Printf("requests %d rps %.0f\n", done.Load(), float64(done.Load())/time.Since(start).Seconds())
}

// paced is -rate's schedule, and each connection's latencies from the intended start and
// lateness, one slice a connection.
type paced struct {
	start      time.Time
	rate       float64
	grid       time.Duration // 0: none
	conns      int
	late, took [][]time.Duration
}

// loop is connection i's share of the schedule: its k-th request at (i + k·conns + ½)/rate.
func (p *paced) loop(i int, addr string, stop time.Time, done *atomic.Int64) {
	c, req, buf := h1Dial(addr)
	if c == nil {
		return
	}
	defer c.Close()
	for k := 0; k < 100_000_000; k++ {
		due := p.start.Add(time.Duration((float64(i+k*p.conns) + 0.5) / p.rate * 1e9))
		if due.After(stop) {
			return
		}
		wake := due
		if p.grid > 0 { // wrk2's pacer: the next millisecond tick, so that one wake-up sends a tick's worth
			wake = p.start.Add((due.Sub(p.start) + p.grid - 1) / p.grid * p.grid)
		}
		time.Sleep(time.Until(wake))
		sent := time.Now()
		if _, err := c.Write(req); err != nil || !response(c, buf) {
			return
		}
		p.late[i] = append(p.late[i], sent.Sub(due))
		p.took[i] = append(p.took[i], time.Since(due))
		done.Add(1)
	}
}

// quantiles is "p50 A p99 B p99.9 C ms" of all the durations.
func quantiles(per [][]time.Duration) string {
	var all []time.Duration
	for _, d := range per {
		all = append(all, d...)
	}
	if len(all) == 0 {
		return "none"
	}
	slices.Sort(all)
	q := func(f float64) float64 { return float64(all[min(int(f*float64(len(all))), len(all)-1)]) / 1e6 }
	return fmt.Sprintf("p50 %.3f p99 %.3f p99.9 %.3f ms", q(0.5), q(0.99), q(0.999))
}

// h1Loop sends GET / over one keep-alive connection of its own until stop, each response read
// to its end.
func h1Loop(addr string, stop time.Time, done *atomic.Int64) {
	c, req, buf := h1Dial(addr)
	if c == nil {
		return
	}
	defer c.Close()
	for n := 0; time.Now().Before(stop) && n < 100_000_000; n++ {
		if _, err := c.Write(req); err != nil || !response(c, buf) {
			return
		}
		done.Add(1)
	}
}

// h1Dial connects to addr and returns the connection, the request to send on it and a buffer
// for its responses; a nil connection (said on stderr) when it cannot.
func h1Dial(addr string) (net.Conn, []byte, []byte) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gofloor:", err)
		return nil, nil, nil
	}
	return c, []byte("GET / HTTP/1.1\r\nHost: " + addr + "\r\n\r\n"), make([]byte, 4096)
}

// response reads one response with a Content-Length body into buf; false on an error or a
// response it does not understand.
func response(c net.Conn, buf []byte) bool {
	have := 0
	for {
		n, err := c.Read(buf[have:])
		if err != nil {
			return false
		}
		have += n
		end := bytes.Index(buf[:have], []byte("\r\n\r\n"))
		if end < 0 {
			if have == len(buf) {
				return false
			}
			continue
		}
		i := bytes.Index(buf[:end], []byte("Content-Length: "))
		if i < 0 {
			return false
		}
		j := bytes.IndexByte(buf[i:end+2], '\r')
		size, err := strconv.Atoi(string(buf[i+16 : i+j]))
		if err != nil || end+4+size > len(buf) {
			return false
		}
		for have < end+4+size {
			n, err := c.Read(buf[have:])
			if err != nil {
				return false
			}
			have += n
		}
		return have == end+4+size // a keep-alive response, nothing after it
	}
}

// h2Loop sends GET / over one HTTP/2 connection of its own until stop, a stream at a time,
// each response's body read to its end.
func h2Loop(addr string, stop time.Time, done *atomic.Int64) {
	c, err := tls.Dial("tcp", addr, &tls.Config{NextProtos: []string{"h2"}, InsecureSkipVerify: true})
	if err != nil || c.ConnectionState().NegotiatedProtocol != "h2" {
		fmt.Fprintln(os.Stderr, "gofloor: no HTTP/2 over TLS:", err)
		return
	}
	defer c.Close()
	cc, err := (&http2.Transport{}).NewClientConn(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gofloor:", err)
		return
	}
	url := "https://" + addr + "/"
	for n := 0; time.Now().Before(stop) && n < 100_000_000; n++ {
		req, _ := http.NewRequest("GET", url, nil)
		resp, err := cc.RoundTrip(req)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gofloor:", err)
			return
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			return
		}
		done.Add(1)
	}
}
