//go:build unix

package ssestream

import (
	"crypto/tls"
	"net"
	"net/http/httptest"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}

func TestPeerClosed(t *testing.T) {
	t.Parallel()
	buf := make([]byte, 16)
	client, server := tcpPair(t)
	if peerClosed(server, buf) {
		t.Error("an open, silent connection reported closed")
	}
	// What the client sends is dropped, and the connection stays open.
	if _, err := client.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if peerClosed(server, buf) {
		t.Error("a connection the client wrote to reported closed")
	}
	client.Close()
	waitUntil(t, "the close to be seen", func() bool { return peerClosed(server, buf) })
	if !peerClosed(&net.TCPConn{}, buf) {
		t.Error("a connection without a socket is not reported closed")
	}
}

// A TLS client closes with a close_notify alert before its FIN: the
// connection must still read as closed.
func TestPeerClosedTLS(t *testing.T) {
	t.Parallel()
	certs := httptest.NewTLSServer(nil)
	defer certs.Close()
	rawClient, rawServer := tcpPair(t)
	server := tls.Server(rawServer, certs.TLS.Clone())
	client := tls.Client(rawClient, &tls.Config{InsecureSkipVerify: true})
	handshake := make(chan error, 1)
	go func() { handshake <- server.Handshake() }()
	if err := client.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-handshake; err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4<<10)
	if peerClosed(server, buf) {
		t.Fatal("an open TLS connection reported closed")
	}
	client.Close() // close_notify, then FIN
	waitUntil(t, "the TLS close to be seen", func() bool { return peerClosed(server, buf) })
}

// waitUntil polls cond until it holds, failing the test after 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
