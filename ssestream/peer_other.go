//go:build !unix

package ssestream

import "net"

// peerClosed cannot look at the socket here: a client that left is noticed
// when a write to it fails.
func peerClosed(net.Conn, []byte) bool { return false }
