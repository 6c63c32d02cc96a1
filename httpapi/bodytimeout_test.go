package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestSlowBodyTimesOut sends a request body one byte every 200 ms over a
// real TCP connection to a server with a 500 ms body deadline: it is
// answered 408 REQUEST_TIMEOUT and its connection closed, long before the
// body would have arrived.
func TestSlowBodyTimesOut(t *testing.T) {
	env := newThreadEnv(t, func(c *envConfig) { c.BodyTimeout = 500 * time.Millisecond })
	srv := httptest.NewServer(env.api)
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const size = 200 // 40 s at one byte per 200 ms
	fmt.Fprintf(conn, "POST /api/threads/t1/runs/r1/events HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
	start := time.Now()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for range size {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no response within 15 s: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), `"code":"REQUEST_TIMEOUT"`) {
		t.Errorf("answer %d %s, want 408 REQUEST_TIMEOUT", resp.StatusCode, body)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("answered after %s", took)
	}
	// The server closes the connection: a read ends (EOF or reset) before
	// the test's deadline.
	if _, err := conn.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("the connection stays open after the 408: %v", err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestBodyDeadlineLeavesKeepAliveAlone: a body read in time clears the
// deadline, and the kept-alive connection serves a request sent after
// the deadline would have passed.
func TestBodyDeadlineLeavesKeepAliveAlone(t *testing.T) {
	env := newThreadEnv(t, func(c *envConfig) { c.BodyTimeout = 300 * time.Millisecond })
	srv := httptest.NewServer(env.api)
	defer srv.Close()
	client := srv.Client()
	put := func() {
		t.Helper()
		req, _ := http.NewRequest("PUT", srv.URL+"/api/threads/t1/runs/r1", strings.NewReader(`{"status":"running"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("PUT run = %d", resp.StatusCode)
		}
	}
	put()
	time.Sleep(600 * time.Millisecond)
	put()
}
