package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A shutdown (SIGTERM) lets a request in flight finish: its body arrives
// after the shutdown began, and it is still appended and answered 201
// with its seq, which the store holds after a restart. Under the old
// BaseContext (the signal context) it was answered 503 UNAVAILABLE.
func TestServeShutdownLetsInFlightAppendsFinish(t *testing.T) {
	t.Parallel()
	store := "sqlite:" + filepath.Join(t.TempDir(), "runstream.db")
	p := runServe(t, nil, "--store", store, "--workers", "0")
	body := `{"events":[{"event_type":"run.start","content":{"chain":null},"metadata":{"caller":"lead_agent"}}]}`

	conn, err := net.Dial("tcp", strings.TrimPrefix(p.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// With Expect: 100-continue the server says "100 Continue" when the
	// handler starts reading the body: the request is then in flight.
	head := fmt.Sprintf("POST /api/threads/t1/runs/r1/events HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nIdempotency-Key: k1\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", len(body))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	if cont, err := http.ReadResponse(br, nil); err != nil || cont.StatusCode != http.StatusContinue {
		t.Fatalf("want 100 Continue: %v", err)
	}
	if _, err := io.WriteString(conn, body[:10]); err != nil {
		t.Fatal(err)
	}
	// The handler is reading the body; now the shutdown begins.
	stopped := make(chan error, 1)
	go func() { stopped <- p.stop() }()
	p.waitLog(t, "shutting down", 10*time.Second)
	// New connections are refused once the listener is closed.
	if _, err := http.Get(p.base + "/healthz"); err == nil {
		t.Error("a new request was served after the shutdown began")
	}
	if _, err := io.WriteString(conn, body[10:]); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read the append's answer: %v\n%s", err, p.stderr)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || !strings.Contains(string(answer), `"seq":1`) {
		t.Fatalf("in-flight append during shutdown = %d %s; want 201 with seq 1", resp.StatusCode, answer)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("serve: %v\nstderr:\n%s", err, p.stderr)
	}

	// After a restart the event is there once, and the retry replays.
	p2 := runServe(t, nil, "--store", store, "--workers", "0")
	req, _ := http.NewRequest("POST", p2.base+"/api/threads/t1/runs/r1/events", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "k1")
	retry, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	replayed, _ := io.ReadAll(retry.Body)
	retry.Body.Close()
	if retry.StatusCode != http.StatusCreated || retry.Header.Get("Idempotency-Replayed") != "true" || string(replayed) != string(answer) {
		t.Errorf("retry after restart = %d (replayed %q) %s; want the first answer %s", retry.StatusCode, retry.Header.Get("Idempotency-Replayed"), replayed, answer)
	}
	code, page, _ := get(t, p2.base+"/api/threads/t1/runs/r1/events")
	var events []struct{ Seq int64 }
	if err := json.Unmarshal([]byte(page), &events); code != 200 || err != nil || len(events) != 1 {
		t.Errorf("events after restart = %d %s; want the one event", code, page)
	}
}

// A connection that never sends a request (a browser's preconnected
// socket) does not hold a shutdown: the server closes it a moment after
// the shutdown began, and serve returns without error within a timeout
// shorter than the five seconds http.Server.Shutdown would wait for it.
func TestServeShutdownClosesSilentConnections(t *testing.T) {
	t.Parallel()
	store := "sqlite:" + filepath.Join(t.TempDir(), "runstream.db")
	p := runServe(t, nil, "--store", store, "--workers", "0", "--shutdown-timeout", "2s")
	silent, err := net.Dial("tcp", strings.TrimPrefix(p.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// A request on another connection is answered: the server has
	// accepted connections by then, the silent one too.
	resp, err := http.Get(p.base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := p.stop(); err != nil {
		t.Fatalf("serve's shutdown: %v", err)
	}
	silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := silent.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the silent connection read %d bytes, %v; want it closed by the server (EOF)", n, err)
	}
}
