package rawio

import (
	"syscall"
	"unsafe"
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
	n, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, ptr(p), uintptr(len(p)),
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// Supported reports whether Read, Write and Peek work on this system's
// sockets.
const Supported = true
