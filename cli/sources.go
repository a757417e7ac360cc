package cli

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// sourceAddrs is --source-addrs: local addresses to connect from, as a
// comma-separated list of addresses and ranges ("127.0.0.1-127.0.0.4").
type sourceAddrs struct {
	flagText
	addrs []netip.Addr
}

// maxSourceAddrs bounds a range, so a typo cannot ask for millions.
const maxSourceAddrs = 1024

func (s *sourceAddrs) Set(v string) error {
	var out []netip.Addr
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := netip.ParseAddr(strings.TrimSpace(lo))
		if err != nil {
			return fmt.Errorf("%q is not an IP address; write e.g. 127.0.0.2,127.0.0.3 or 127.0.0.1-127.0.0.8", part)
		}
		last := first
		if isRange {
			if last, err = netip.ParseAddr(strings.TrimSpace(hi)); err != nil || last.Is4() != first.Is4() || last.Less(first) {
				return fmt.Errorf("%q is not a range of addresses from low to high, e.g. 127.0.0.1-127.0.0.8", part)
			}
		}
		for a := first; ; a = a.Next() {
			if len(out) == maxSourceAddrs {
				return fmt.Errorf("more than %d source addresses", maxSourceAddrs)
			}
			out = append(out, a.Unmap())
			if a == last {
				break
			}
		}
	}
	if len(out) == 0 {
		return fmt.Errorf("no address given")
	}
	s.text, s.addrs = v, out
	return nil
}

// check refuses addresses this machine cannot connect from, or of another
// family than the target's, before any traffic.
func (s *sourceAddrs) check(target *url.URL) error {
	if len(s.addrs) == 0 {
		return nil
	}
	if ip, err := netip.ParseAddr(target.Hostname()); err == nil && ip.Unmap().Is4() != s.addrs[0].Is4() {
		return fmt.Errorf("--source-addrs %s: the target %s is IPv%s; give source addresses of the same family", s.text, target.Host, map[bool]string{true: "4", false: "6"}[ip.Unmap().Is4()])
	}
	for _, a := range s.addrs {
		ln, err := net.Listen("tcp", netip.AddrPortFrom(a, 0).String())
		if err != nil {
			return fmt.Errorf("--source-addrs: cannot connect from %s, it is not an address of this machine (%v); any 127.x.y.z works for a loopback target", a, err)
		}
		ln.Close()
	}
	return nil
}

// checkPorts warns when users connections to one target are more than
// the source addresses can hold comfortably: Linux picks a connect's port
// among half the ephemeral range first (the other half it searches slowly;
// seen here: connects stalled for 10 s past ~14,000 connections to one
// target), and none are left past the whole range.
func checkPorts(env Env, users int, sources int, target *url.URL, what string) {
	ports := env.limits().Ports
	if ports == 0 || users <= 0 {
		return
	}
	n := max(sources, 1)
	easy := n * ports / 2
	if users <= easy {
		return
	}
	from := "one source address"
	if n > 1 {
		from = fmt.Sprintf("%d source addresses", n)
	}
	fails := ""
	if users > n*ports {
		fails = fmt.Sprintf(", and past %d they fail for want of ports", n*ports)
	}
	hint := fmt.Sprintf("--source-addrs 127.0.0.1-127.0.0.%d", (users+ports/2-1)/(ports/2))
	if ip, err := netip.ParseAddr(target.Hostname()); err != nil || !ip.IsLoopback() {
		hint = "--source-addrs with more addresses of this machine"
	}
	fmt.Fprintf(env.Stderr, "warning: %s needs %d connections to %s, but %s holds about %d quickly "+
		"(half of %d ephemeral ports an address, net.ipv4.ip_local_port_range): past that, connects stall for seconds (counted as timeouts)%s\n"+
		"  fix: spread them with %s, widen the range (sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\"), or use more machines\n",
		what, users, target.Host, from, easy, ports, fails, hint)
}
