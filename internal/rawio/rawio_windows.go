package rawio

import (
	"errors"
	"time"
)

// Supported reports whether Read, Write and Peek work on this system's
// sockets: not on Windows, whose sockets the runtime drives through I/O
// completion ports; callers use the net package's Read and Write there.
const Supported = false

var errUnsupported = errors.New("rawio: not on Windows")

// Read is not available on Windows (see Supported).
func Read(fd uintptr, p []byte) (int, error) { return 0, errUnsupported }

// Write is not available on Windows (see Supported).
func Write(fd uintptr, p []byte) (int, error) { return 0, errUnsupported }

// Peek is not available on Windows (see Supported).
func Peek(fd uintptr, p []byte) (int, error) { return 0, errUnsupported }

// Stamps is what ReadStamped needs for one socket: here, nothing.
type Stamps struct{ fd uintptr }

// StampArrivals is not available on Windows (see Supported).
func StampArrivals(fd uintptr) error { return errUnsupported }

// ReadStamped is not available on Windows (see Supported).
func (s *Stamps) ReadStamped(fd uintptr, p []byte) (int, time.Time, error) {
	return 0, time.Time{}, errUnsupported
}

// Recv is ReadStamped without the stamp (Arrived), from the socket Bind gave.
func (s *Stamps) Recv(p []byte) (int, error) { return 0, errUnsupported }

// Bind makes s Recv's for the socket fd.
func (s *Stamps) Bind(fd uintptr) { s.fd = fd }

// Arrived is zero: no stamp here.
func (s *Stamps) Arrived() time.Time { return time.Time{} }
