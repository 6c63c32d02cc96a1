//go:build !linux

package main

import (
	"errors"
	"io"
	"syscall"
)

// stalledSocket leaves the socket as it is: the stalled followers then
// stall later, once the system's buffers are full.
func stalledSocket(int) func(network, address string, c syscall.RawConn) error {
	return nil
}

func isConnEnd(err error) bool { return errors.Is(err, io.EOF) }
