//go:build unix

package httpapi

import (
	"net"
	"testing"
)

func TestPeerClosed(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if peerClosed(server) {
		t.Error("an open, silent connection reported closed")
	}
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	client.Close()
	// The byte comes before the end: while it is unread, the connection
	// does not look closed; once it is read, the end shows.
	if peerClosed(server) {
		t.Error("a connection with an unread byte reported closed")
	}
	var b [1]byte
	if _, err := server.Read(b[:]); err != nil || b[0] != 'x' {
		t.Fatalf("read %q, %v: the peek consumed the byte", b[:], err)
	}
	waitUntil(t, "the close to be seen", func() bool { return peerClosed(server) })
	if peerClosed(&net.TCPConn{}) != true {
		t.Error("a connection without a socket is not reported closed")
	}
}
