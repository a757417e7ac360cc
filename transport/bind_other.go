//go:build !linux

package transport

import "syscall"

// bindNoPort does nothing where IP_BIND_ADDRESS_NO_PORT does not exist: a
// source address then holds one port per connection, whatever the target.
func bindNoPort(_, _ string, _ syscall.RawConn) error { return nil }
