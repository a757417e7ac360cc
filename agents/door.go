package agents

import (
	"context"
	"net"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/stats"
)

// Connections before the token is proved (docs/AGENTS.md, "Security").
// Anyone who reaches the coordinator's port can open connections, and a
// connection proves nothing until a stream on it proves the token: until
// then it is a stranger, and strangers are bounded apart from the rest,
// so that they cannot hold every place an agent needs.
//
//   - A stranger is closed at the handshake timeout from its accept,
//     whether it opened a stream or not.
//   - At most maxStrangers are open at once, so maxConns-maxStrangers
//     connections are always left to the token's holders (agents that
//     joined, or resumed on a new connection).
//   - At most maxPerAddress from one address (an IPv6 /64 counts as one
//     address: one host holds a /64).
//   - When maxStrangers are open (or maxConns connections in all), a
//     new connection from an address that holds fewer strangers than the
//     address that holds the most takes the place of that address's
//     oldest. So strangers from a few addresses delay an agent from
//     another address by nothing: its connection is taken at once, and
//     kept through its handshake (its address holds one stranger, never
//     the most while any holds two).
//     Only strangers from maxStrangers addresses, one each, could end an
//     agent's handshake, and then only by opening maxStrangers newer
//     connections while it lasts (the oldest goes first).
//   - A stranger carries one stream in its handshake at a time (guard):
//     streams in their handshake on strangers are bounded by the same
//     numbers, and cannot take the slots of a resume on a connection that
//     proved the token.
//
// What is not covered: strangers from an agent's own address (its host,
// or the NAT in front of it) can keep it out for as long as they keep
// that address's maxPerAddress places filled.
const (
	// maxConns bounds the connections open at once, proved or not; at it
	// a new one takes a stranger's place, as above, or is closed as it is
	// accepted. A run of 75 agents holds 75.
	maxConns = 1024
	// maxStrangers bounds the connections open at once that have not
	// proved the token: well below maxConns, and each holds at most one
	// stream in its handshake (~1 MiB), so 64 MiB at most.
	maxStrangers = 64
	// maxPerAddress bounds the strangers of one address: an agent opens
	// one connection, so 16 lets 16 agents behind one NAT shake hands at
	// once (those past it are closed and dial again), and one address
	// holds a quarter of maxStrangers at most.
	maxPerAddress = 16
)

// door is the coordinator's listener: it admits connections within the
// bounds above and closes each stranger at its timeout. Its methods are
// safe for concurrent use.
type door struct {
	net.Listener
	timeout time.Duration // a stranger's life from its accept

	mu         sync.Mutex
	open       int                // connections open
	strangers  map[string][]*conn // by address (addressOf), oldest first
	nStrangers int
	byPair     map[string]*conn // strangers by their two ends (pairOf): how tagger finds them
	accepted   uint64           // connections accepted so far: their order
}

func newDoor(ln net.Listener, timeout time.Duration) *door {
	return &door{Listener: ln, timeout: timeout, strangers: map[string][]*conn{}, byPair: map[string]*conn{}}
}

// conn is a connection the door admitted.
type conn struct {
	net.Conn
	d    *door
	from string // addressOf its remote end
	pair string // pairOf its ends
	n    uint64 // its number in the order of accepts
	once sync.Once

	// Under d.mu:
	timer       *time.Timer // closes it at its timeout while a stranger
	stranger    bool        // no stream on it has proved the token yet
	handshaking bool        // a stream on it is in its handshake (enter)
}

// Accept returns the next connection the bounds admit, closing those
// they do not.
func (d *door) Accept() (net.Conn, error) {
	for {
		raw, err := d.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c := d.take(raw); c != nil {
			return c, nil
		}
	}
}

// take admits raw as a stranger, or closes it; a stranger whose place
// raw takes is closed.
func (d *door) take(raw net.Conn) *conn {
	c, displaced := d.admit(raw)
	if displaced != nil {
		displaced.Close()
	}
	if c == nil {
		raw.Close()
	}
	return c
}

// admit counts raw as a stranger if the bounds allow, and returns the
// stranger whose place it took, if any.
func (d *door) admit(raw net.Conn) (c, displaced *conn) {
	from := addressOf(raw.RemoteAddr())
	d.mu.Lock()
	defer d.mu.Unlock()
	mine := len(d.strangers[from])
	if mine >= maxPerAddress {
		return nil, nil
	}
	if d.nStrangers >= maxStrangers || d.open >= maxConns {
		if displaced = d.greediest(mine); displaced == nil {
			return nil, nil
		}
		d.forget(displaced)
	}
	d.accepted++
	c = &conn{Conn: raw, d: d, from: from, pair: pairOf(raw.LocalAddr(), raw.RemoteAddr()), n: d.accepted, stranger: true}
	d.open++
	d.nStrangers++
	d.strangers[from] = append(d.strangers[from], c)
	d.byPair[c.pair] = c
	c.timer = time.AfterFunc(d.timeout, c.expire)
	return c, displaced
}

// greediest is the oldest stranger of the address that holds the most
// (of those that hold the most, the one whose oldest is oldest), if that
// is more than mine; else nil. d.mu held.
func (d *door) greediest(mine int) *conn {
	var oldest *conn
	most := mine
	for _, cs := range d.strangers {
		if len(cs) > most || (oldest != nil && len(cs) == most && cs[0].n < oldest.n) {
			oldest, most = cs[0], len(cs)
		}
	}
	return oldest
}

// forget makes c no stranger, if it was one. d.mu held.
func (d *door) forget(c *conn) {
	if !c.stranger {
		return
	}
	c.stranger = false
	c.timer.Stop()
	cs := d.strangers[c.from]
	i := slices.Index(cs, c)
	if cs = slices.Delete(cs, i, i+1); len(cs) == 0 {
		delete(d.strangers, c.from)
	} else {
		d.strangers[c.from] = cs
	}
	delete(d.byPair, c.pair)
	d.nStrangers--
}

// expire closes c if it is a stranger still: its timeout.
func (c *conn) expire() {
	c.d.mu.Lock()
	late := c.stranger
	c.d.forget(c)
	c.d.mu.Unlock()
	if late {
		c.Close()
	}
}

// proved marks c as having carried a stream that proved the token: it is
// no stranger from now on, and stays until gRPC closes it (idleConn).
func (c *conn) proved() {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	c.d.forget(c)
}

// enter takes c's one handshake slot if c is a stranger: stranger says
// whether it is, ok whether the slot was free (and is now taken, until
// leave). A stream on a connection that proved the token takes no slot
// here (the guard's bound it).
func (c *conn) enter() (stranger, ok bool) {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if !c.stranger {
		return false, false
	}
	if c.handshaking {
		return true, false
	}
	c.handshaking = true
	return true, true
}

// leave gives back the slot enter took.
func (c *conn) leave() {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	c.handshaking = false
}

func (c *conn) Close() error {
	c.once.Do(func() {
		c.d.mu.Lock()
		defer c.d.mu.Unlock()
		c.d.forget(c)
		c.d.open--
	})
	return c.Conn.Close()
}

// addressOf is the address whose strangers are counted together: the
// IP of an IPv4 peer, the /64 of an IPv6 one.
func addressOf(a net.Addr) string {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	ip := t.AddrPort().Addr().Unmap()
	if ip.Is4() {
		return ip.String()
	}
	p, _ := ip.Prefix(64)
	return p.String()
}

// pairOf names a connection by its two ends: among open TCP connections,
// one only.
func pairOf(local, remote net.Addr) string {
	if local == nil || remote == nil {
		return ""
	}
	return local.String() + " " + remote.String()
}

// tagger hands each stream the door's conn it came on: gRPC gives a
// stream no net.Conn, but every stream's context derives from the one
// TagConn returns for its connection, called once as gRPC starts serving
// the connection, before any stream. The conn is found there by its two
// ends, which name one open connection; at that moment it is certainly
// open (a stream that proves the token later, after its connection
// closed and its ends were taken by a new one, still marks its own).
// Simpler than the other ways: wrapping the transport credentials would
// have to wrap TLS's AuthInfo too, and matching peer addresses when the
// token is proved would be open to that reuse.
type tagger struct{ d *door }

type connKey struct{}

var _ stats.Handler = tagger{}

func (t tagger) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	t.d.mu.Lock()
	c := t.d.byPair[pairOf(info.LocalAddr, info.RemoteAddr)]
	t.d.mu.Unlock()
	if c == nil { // closed already (timed out, or displaced)
		return ctx
	}
	return context.WithValue(ctx, connKey{}, c)
}

func (tagger) HandleConn(context.Context, stats.ConnStats)                     {}
func (tagger) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (tagger) HandleRPC(context.Context, stats.RPCStats)                       {}

// connOf is the conn a stream came on (its context), or nil: a stream
// not served through a door (a test's), or one whose connection closed
// before gRPC served it.
func connOf(ctx context.Context) *conn {
	c, _ := ctx.Value(connKey{}).(*conn)
	return c
}
