package rawio

import (
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix" // the system call numbers of every architecture: syscall names no recvfrom or recvmsg on 386, which reaches them through socketcall
)

var zero byte

func ptr(p []byte) uintptr {
	if len(p) == 0 {
		return uintptr(unsafe.Pointer(&zero))
	}
	return uintptr(unsafe.Pointer(&p[0]))
}

// Read is read(2) on a non-blocking fd: syscall.EAGAIN when nothing is there.
func Read(fd uintptr, p []byte) (int, error) {
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, ptr(p), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// Write is write(2) on a non-blocking fd: syscall.EAGAIN when its buffer is
// full.
func Write(fd uintptr, p []byte) (int, error) {
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, ptr(p), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// Peek is recv(2) with MSG_PEEK|MSG_DONTWAIT into p: what has arrived, left
// in the socket; syscall.EAGAIN when nothing has.
func Peek(fd uintptr, p []byte) (int, error) {
	n, _, e := syscall.RawSyscall6(unix.SYS_RECVFROM, fd, ptr(p), uintptr(len(p)),
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// Supported reports whether Read, Write and Peek work on this system's
// sockets.
const Supported = true

// Stamps is what ReadStamped needs for one socket, kept with it so that a read allocates
// nothing: the message header the kernel fills, and room for its timestamp (one control
// message: a header and a timespec, 32 bytes on 64-bit Linux, 20 on 32-bit).
type Stamps struct {
	iov syscall.Iovec
	msg syscall.Msghdr
	oob [32]byte
	fd  uintptr // Recv's socket (Bind)
}

// StampArrivals turns SO_TIMESTAMPNS on for fd: the kernel then stamps each segment as it
// arrives, and ReadStamped says when the last of the bytes it read did.
func StampArrivals(fd uintptr) error {
	return syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
}

// ReadStamped is Read, and when the last of the bytes read arrived in the kernel (its
// CLOCK_REALTIME, the wall clock time.Now reads): zero when the socket is not stamped
// (StampArrivals) or nothing was read.
func (s *Stamps) ReadStamped(fd uintptr, p []byte) (int, time.Time, error) {
	if s.fd != fd || s.msg.Iov == nil {
		s.Bind(fd)
	}
	n, err := s.Recv(p)
	if err != nil {
		return 0, time.Time{}, err
	}
	return n, s.stamp(), nil
}

// Recv is ReadStamped without the stamp, from the socket Bind gave,
// which Arrived then finds: a caller deep in a goroutine's stack (a
// reader that parks there) reads with the least of it, and looks for
// the stamp once back up.
func (s *Stamps) Recv(p []byte) (int, error) {
	s.iov.Base = &zero
	if len(p) > 0 {
		s.iov.Base = &p[0]
	}
	s.iov.SetLen(len(p))
	s.msg.SetControllen(len(s.oob))
	n, _, e := syscall.RawSyscall(unix.SYS_RECVMSG, s.fd, uintptr(unsafe.Pointer(&s.msg)), 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// Bind makes s Recv's for the socket fd.
func (s *Stamps) Bind(fd uintptr) {
	s.fd = fd
	s.msg = syscall.Msghdr{Iov: &s.iov, Iovlen: 1, Control: &s.oob[0]}
}

// Arrived is ReadStamped's stamp of what the last Recv that succeeded read.
func (s *Stamps) Arrived() time.Time { return s.stamp() }

// stamp finds the SCM_TIMESTAMPNS message among what recvmsg left in oob.
func (s *Stamps) stamp() time.Time {
	head := syscall.CmsgLen(0)
	for i := 0; i+head <= int(s.msg.Controllen); {
		h := (*syscall.Cmsghdr)(unsafe.Pointer(&s.oob[i]))
		size := int(h.Len)
		if size < head || i+size > int(s.msg.Controllen) {
			return time.Time{}
		}
		if h.Level == syscall.SOL_SOCKET && h.Type == syscall.SO_TIMESTAMPNS && size-head >= int(unsafe.Sizeof(syscall.Timespec{})) {
			ts := (*syscall.Timespec)(unsafe.Pointer(&s.oob[i+head]))
			return time.Unix(int64(ts.Sec), int64(ts.Nsec))
		}
		i += syscall.CmsgSpace(size - head)
	}
	return time.Time{}
}
