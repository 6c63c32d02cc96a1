//go:build unix

package httpapi

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether the client closed conn (or the connection
// broke), without blocking and without consuming a byte: a peek that
// reads nothing means the end of the stream. Bytes the client sent that
// nobody reads make it report false.
func peerClosed(conn net.Conn) bool {
	if nc, ok := conn.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		conn = nc.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	var closed bool
	var b [1]byte
	err = raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil:
			closed = n == 0
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EINTR):
			closed = false
		default:
			closed = true // reset, or otherwise broken
		}
		return true // never wait for readability
	})
	return closed || err != nil
}
