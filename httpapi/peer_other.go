//go:build !unix

package httpapi

import "net"

// peerClosed cannot peek here: a client that left is noticed when a write
// to it fails.
func peerClosed(net.Conn) bool { return false }
