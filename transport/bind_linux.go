package transport

import "syscall"

// bindNoPort lets a socket bound to a source address take its port at
// connect time (IP_BIND_ADDRESS_NO_PORT), as an unbound one does: the
// port then need only be free towards that destination, so one address
// serves every target with its whole port range.
func bindNoPort(_, _ string, rc syscall.RawConn) error {
	const ipBindAddressNoPort = 24 // linux/in.h
	return rc.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, ipBindAddressNoPort, 1)
	})
}
