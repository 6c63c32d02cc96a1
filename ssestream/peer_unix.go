//go:build unix

package ssestream

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether the client closed conn (or the connection
// broke), without blocking. Nothing else reads a taken-over connection, so
// what the client sent is read and dropped on the way to the end of the
// stream: a TLS client's close_notify alert, say, which comes before its
// FIN. It reads at most len(buf) bytes at a time and 16 times per call; a
// client that keeps sending looks open.
func peerClosed(conn net.Conn, buf []byte) bool {
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
	err = raw.Read(func(fd uintptr) bool {
		for range 16 {
			n, _, err := syscall.Recvfrom(int(fd), buf, syscall.MSG_DONTWAIT)
			switch {
			case err == nil && n == 0:
				closed = true // the end of the stream
				return true
			case err == nil:
				continue // bytes nobody will read
			case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EINTR):
				return true
			default:
				closed = true // reset, or otherwise broken
				return true
			}
		}
		return true // never wait for readability
	})
	return closed || err != nil
}
