package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServeBodyTimeout: serve answers a body that trickles in (one byte
// every 200 ms) 408 once --body-timeout, or RUNSTREAM_BODY_TIMEOUT, has
// passed.
func TestServeBodyTimeout(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		env  map[string]string
		args []string
	}{
		"flag": {nil, []string{"--body-timeout", "400ms"}},
		"env":  {map[string]string{"RUNSTREAM_BODY_TIMEOUT": "400ms"}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			base, _, _ := startServe(t, tc.env, append([]string{"--store", "memory:"}, tc.args...)...)
			conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST /api/workflows HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n")
			done := make(chan struct{})
			defer close(done)
			go func() {
				for range 100 {
					select {
					case <-done:
						return
					case <-time.After(200 * time.Millisecond):
					}
					if _, err := conn.Write([]byte(" ")); err != nil {
						return
					}
				}
			}()
			conn.SetReadDeadline(time.Now().Add(15 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout {
				t.Errorf("status %d, want 408", resp.StatusCode)
			}
		})
	}
}
