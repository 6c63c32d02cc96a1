package ssestream

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// On a connection that is not TCP (TLS, say), each send is one Write of
// the head (first), the chunk's size, the data and CRLF, and the clean
// close adds the last chunk.
func TestConnStreamOnAConnectionOtherThanTCP(t *testing.T) {
	server, client := net.Pipe()
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(client)
		got <- string(b)
	}()
	c := newConnStream(server, httptest.NewRequest("GET", "/", nil), http.Header{"Content-Type": {"text/event-stream"}})
	deadline := time.Now().Add(time.Minute)
	for _, p := range []string{"data: a\n\n", "data: bb\n\n"} {
		if err := c.send([]byte(p), deadline); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	if err := c.close(true, deadline); err != nil {
		t.Fatalf("close: %v", err)
	}
	out := <-got
	head, body, ok := strings.Cut(out, "\r\n\r\n")
	head += "\r\n"
	if !ok || !strings.HasPrefix(head, "HTTP/1.1 200 OK\r\n") || !strings.Contains(head, "Transfer-Encoding: chunked\r\n") {
		t.Fatalf("head %q", head)
	}
	if want := "9\r\ndata: a\n\n\r\na\r\ndata: bb\n\n\r\n0\r\n\r\n"; body != want {
		t.Errorf("body %q, want %q", body, want)
	}
	if c.written != 19 {
		t.Errorf("written %d, want 19", c.written)
	}
}
