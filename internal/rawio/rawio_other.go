//go:build unix && !linux

package rawio

import (
	"syscall"
	"time"
)

// Read is read(2) on a non-blocking fd: syscall.EAGAIN when nothing is there.
func Read(fd uintptr, p []byte) (int, error) { return syscall.Read(int(fd), p) }

// Write is write(2) on a non-blocking fd: syscall.EAGAIN when its buffer is
// full.
func Write(fd uintptr, p []byte) (int, error) { return syscall.Write(int(fd), p) }

// Peek is recv(2) with MSG_PEEK|MSG_DONTWAIT into p.
func Peek(fd uintptr, p []byte) (int, error) {
	n, _, err := syscall.Recvfrom(int(fd), p, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return n, err
}

// Supported reports whether Read, Write and Peek work on this system's
// sockets.
const Supported = true

// Stamps is what ReadStamped needs for one socket: here, nothing.
type Stamps struct{ fd uintptr }

// StampArrivals does nothing here: the arrival stamps are Linux's (SO_TIMESTAMPNS).
func StampArrivals(fd uintptr) error { return nil }

// ReadStamped is Read, with no stamp.
func (s *Stamps) ReadStamped(fd uintptr, p []byte) (int, time.Time, error) {
	n, err := Read(fd, p)
	return n, time.Time{}, err
}

// Recv is ReadStamped without the stamp (Arrived), from the socket Bind gave.
func (s *Stamps) Recv(p []byte) (int, error) { return Read(s.fd, p) }

// Bind makes s Recv's for the socket fd.
func (s *Stamps) Bind(fd uintptr) { s.fd = fd }

// Arrived is zero: no stamp here.
func (s *Stamps) Arrived() time.Time { return time.Time{} }
