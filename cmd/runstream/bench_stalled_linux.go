//go:build linux

package main

import (
	"errors"
	"io"
	"syscall"
)

// stalledSocket sets, before a stalled follower's socket connects, its
// receive buffer to rcvbuf bytes (the window it announces stays small)
// and its maximum segment size to that of an Ethernet path: over loopback
// the segments are 64 KiB and the kernel sizes the server's send buffer
// by them (up to 4 MiB, several seconds of a follower's frames at 500
// events/s), which is not what a remote client that stops reading gets.
func stalledSocket(rcvbuf int) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
			if serr == nil {
				serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, 1400)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}
}

// isConnEnd reports whether err is the end of a connection the peer
// closed or reset.
func isConnEnd(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
