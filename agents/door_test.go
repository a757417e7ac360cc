package agents

import (
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// fakeConn is a connection from remote that records its Close; nothing
// is read from it or written to it here.
type fakeConn struct {
	net.Conn
	remote net.Addr
	closed atomic.Bool
}

var coordinatorAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7070}

func (c *fakeConn) Close() error         { c.closed.Store(true); return nil }
func (c *fakeConn) LocalAddr() net.Addr  { return coordinatorAddr }
func (c *fakeConn) RemoteAddr() net.Addr { return c.remote }

// knock offers the door a connection from ip (a port of its own each
// time): the fake, and the door's conn if it was admitted.
func knock(d *door, ip string) (*fakeConn, *conn) {
	knocks++
	f := &fakeConn{remote: net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(ip), uint16(knocks)))}
	return f, d.take(f)
}

var knocks int // the ports of knock's connections; tests here are not parallel

// A connection on which no stream proved the token is closed at the
// handshake timeout from its accept, and only such a one: one proved
// before is kept, and closed only when gRPC closes it.
func TestDoorClosesStrangersAtTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDoor(nil, 10*time.Second)
		idle, _ := knock(d, "10.0.0.1")
		shaking, c := knock(d, "10.0.0.1")
		if stranger, ok := c.enter(); !stranger || !ok {
			t.Fatalf("a stranger's first handshake: stranger %v, slot %v", stranger, ok)
		}
		if _, ok := c.enter(); ok {
			t.Error("a stranger took a second handshake slot at once")
		}
		time.Sleep(5 * time.Second)
		agent, a := knock(d, "10.0.0.2")
		a.proved()
		time.Sleep(5*time.Second - time.Nanosecond)
		synctest.Wait()
		if idle.closed.Load() || shaking.closed.Load() || agent.closed.Load() {
			t.Fatal("a connection was closed before the handshake timeout")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !idle.closed.Load() || !shaking.closed.Load() {
			t.Errorf("at the handshake timeout: an idle stranger closed %v, one in its handshake %v; want both", idle.closed.Load(), shaking.closed.Load())
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if agent.closed.Load() || d.open != 1 || d.nStrangers != 0 {
			t.Errorf("an hour on: the proved connection closed %v, %d open, %d strangers; want it open, 1, 0", agent.closed.Load(), d.open, d.nStrangers)
		}
		a.Close()
		if d.open != 0 {
			t.Errorf("%d connections counted open after the last closed", d.open)
		}
	})
}

// One address holds at most maxPerAddress strangers (an IPv6 /64 counts
// as one address, an IPv4-mapped one as its IPv4): past it a new one is
// closed at once, while other addresses still get in, and a connection
// that proved the token no longer counts against its address.
func TestDoorBoundsStrangersPerAddress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDoor(nil, 10*time.Second)
		var first *conn
		for i := range maxPerAddress {
			_, c := knock(d, "10.0.0.1")
			if c == nil {
				t.Fatalf("stranger %d from 10.0.0.1 refused; want %d in", i+1, maxPerAddress)
			}
			if i == 0 {
				first = c
			}
		}
		for _, ip := range []string{"10.0.0.1", "::ffff:10.0.0.1"} {
			if f, c := knock(d, ip); c != nil || !f.closed.Load() {
				t.Errorf("a stranger from %s past its %d: admitted; want closed at once", ip, maxPerAddress)
			}
		}
		if f, c := knock(d, "10.0.0.2"); c == nil || f.closed.Load() {
			t.Error("a stranger from 10.0.0.2 refused while 10.0.0.1 held its cap; want it in")
		}
		first.proved()
		if _, c := knock(d, "10.0.0.1"); c == nil {
			t.Error("once one of 10.0.0.1's connections proved the token, a new stranger from it was refused")
		}
		if _, c := knock(d, "10.0.0.1"); c != nil {
			t.Error("10.0.0.1 got past its cap again")
		}

		for i := range maxPerAddress {
			if _, c := knock(d, fmt.Sprintf("2001:db8::%x", i+1)); c == nil {
				t.Fatalf("stranger %d from 2001:db8::/64 refused", i+1)
			}
		}
		if _, c := knock(d, "2001:db8::ffff"); c != nil {
			t.Error("a 17th stranger from one IPv6 /64 was admitted")
		}
		if _, c := knock(d, "2001:db8:0:1::1"); c == nil {
			t.Error("a stranger from another /64 was refused")
		}
	})
}

// Strangers cannot take every place an agent needs: with maxStrangers
// open from a few addresses, each at its cap, an agent's connection from
// another address is taken at once in the place of the oldest of them,
// and kept while those addresses renew their strangers without pause
// (2,000 times); connections that proved the token do not count, and
// at maxConns a stranger still takes a stranger's place.
func TestDoorKeepsRoomForAgents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDoor(nil, 10*time.Second)
		attackers := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"}
		var held []*fakeConn
		for i := range maxStrangers {
			f, c := knock(d, attackers[i%len(attackers)])
			if c == nil {
				t.Fatalf("stranger %d refused below maxStrangers", i+1)
			}
			held = append(held, f)
		}
		agent, a := knock(d, "10.0.0.9")
		if a == nil {
			t.Fatal("with every stranger's place taken from 4 addresses, an agent from a fifth was refused")
		}
		if !held[0].closed.Load() || held[1].closed.Load() {
			t.Error("the agent's connection took the place of another than the oldest stranger")
		}
		displaced := 0
		for i := range 2000 {
			if _, c := knock(d, attackers[i%len(attackers)]); c != nil {
				displaced++
			}
		}
		if agent.closed.Load() {
			t.Fatal("the agent's connection, in its handshake, was closed while 4 addresses renewed their strangers")
		}
		a.proved()
		t.Logf("2,000 strangers renewed from 4 addresses: %d took a place (each another stranger's), the agent's kept", displaced)
		if d.nStrangers != maxStrangers-1 {
			t.Errorf("%d strangers open, want %d (the agent's proved)", d.nStrangers, maxStrangers-1)
		}

		// Proved connections up to maxConns: strangers take one another's
		// places still, and the proved ones stay.
		for d.open < maxConns {
			_, c := knock(d, fmt.Sprintf("10.1.%d.%d", d.open/256, d.open%256))
			if c == nil {
				t.Fatalf("refused at %d open", d.open)
			}
			c.proved()
		}
		if _, c := knock(d, "10.2.0.1"); c == nil {
			t.Error("at maxConns, a stranger from a new address did not take a greedier stranger's place")
		}
		if agent.closed.Load() || d.open > maxConns+1 {
			t.Errorf("at maxConns: the agent's connection closed %v; %d open", agent.closed.Load(), d.open)
		}
	})
}
