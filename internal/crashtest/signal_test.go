package crashtest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startUpload sends a keyed append's head and the first bytes of its body
// to srv, and returns once the handler is reading the body (100 Continue):
// the request is in flight. send writes the rest and reads the answer.
func startUpload(t *testing.T, srv *server) (send func() (*http.Response, error)) {
	t.Helper()
	body := `{"events":[{"event_type":"run.start","content":{"chain":null},"metadata":{"caller":"lead_agent"}}]}`
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.Base(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /api/threads/t1/runs/r1/events HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nIdempotency-Key: k\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", len(body))
	br := bufio.NewReader(conn)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusContinue {
		t.Fatalf("want 100 Continue: %v", err)
	}
	io.WriteString(conn, body[:10])
	return func() (*http.Response, error) {
		if _, err := io.WriteString(conn, body[10:]); err != nil {
			return nil, err
		}
		return http.ReadResponse(br, nil)
	}
}

// SIGTERM drains: the binary stops accepting, answers the request in
// flight truthfully (201), and exits 0. A second SIGTERM during the drain
// ends the process at once.
func TestSignals(t *testing.T) {
	t.Run("SIGTERM drains", func(t *testing.T) {
		dir := t.TempDir()
		srv := startServer(t, dir, freePort(t), backendArgs(t, "sqlite", dir)...)
		send := startUpload(t, srv)
		srv.Signal(syscall.SIGTERM)
		waitRefused(t, srv)
		resp, err := send()
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("the append in flight at SIGTERM: %v %v; want 201\n%s", resp, err, srv.Log())
		}
		select {
		case <-srv.Done():
			if srv.Err() != nil {
				t.Errorf("serve exited with %v after SIGTERM; want 0\n%s", srv.Err(), srv.Log())
			}
		case <-time.After(30 * time.Second):
			t.Fatal("serve still runs 30 s after SIGTERM")
		}
	})
	t.Run("second signal forces the exit", func(t *testing.T) {
		dir := t.TempDir()
		srv := startServer(t, dir, freePort(t), backendArgs(t, "sqlite", dir)...)
		startUpload(t, srv) // never finished: the drain would wait for it
		srv.Signal(syscall.SIGTERM)
		waitRefused(t, srv)
		select {
		case <-srv.Done():
			t.Fatalf("serve exited (%v) with a request in flight; want it to wait for the request", srv.Err())
		default:
		}
		srv.Signal(syscall.SIGTERM)
		select {
		case <-srv.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("serve still runs 10 s after a second SIGTERM")
		}
	})
}

// A node that would outlast --shutdown-timeout is interrupted before it
// passes: SIGTERM still exits 0, the attempt ends with node.failed
// WORKFLOW_WORKER_LOST (details.reason "shutdown", willRetry), and the
// restarted server runs the node again at once although it has no retry
// left, and completes the run.
func TestSignalInterruptsLongNode(t *testing.T) {
	dir := t.TempDir()
	addr := freePort(t)
	args := append(backendArgs(t, "sqlite", dir), "--shutdown-timeout", "2s")
	srv := startServer(t, dir, addr, args...)
	base := srv.Base()
	var wf struct{ WorkflowID string }
	postJSON(t, base+"/api/workflows", `{"name":"long","nodes":[{"id":"long","type":"delay","config":{"ms":3000,"progressEveryMs":100}}],"output":"long"}`, &wf)
	var run struct{ RunID string }
	postJSON(t, base+"/api/workflows/"+wf.WorkflowID+"/runs", `{"input":{}}`, &run)
	deadline := time.Now().Add(30 * time.Second)
	for !slices.ContainsFunc(runEvents(t, base, run.RunID), func(row map[string]any) bool { return row["event"] == "node.progress" }) {
		if time.Now().After(deadline) {
			t.Fatalf("the node did not start:\n%s", srv.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	srv.Signal(syscall.SIGTERM)
	select {
	case <-srv.Done():
		if srv.Err() != nil {
			t.Fatalf("serve exited with %v after SIGTERM; want 0\n%s", srv.Err(), srv.Log())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("serve still runs 10 s after SIGTERM\n%s", srv.Log())
	}

	srv = startServer(t, dir, addr, args...)
	deadline = time.Now().Add(30 * time.Second)
	var rows []map[string]any
	for {
		rows = runEvents(t, base, run.RunID)
		if last := rows[len(rows)-1]["event"]; last == "run.completed" || last == "run.failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not end after the restart:\n%s", srv.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	var seq []string
	var interrupted map[string]any
	for _, row := range rows {
		seq = append(seq, row["event"].(string))
		if row["event"] == "node.failed" {
			interrupted = row["data"].(map[string]any)
		}
	}
	if seq[len(seq)-1] != "run.completed" || interrupted == nil {
		t.Fatalf("events %v; want the interrupted attempt's node.failed and run.completed", seq)
	}
	e := interrupted["error"].(map[string]any)
	if e["code"] != "WORKFLOW_WORKER_LOST" || e["details"].(map[string]any)["reason"] != "shutdown" || interrupted["willRetry"] != true {
		t.Errorf("node.failed of the interrupted attempt: %v", interrupted)
	}
}

// waitRefused waits until srv no longer accepts connections: its shutdown
// began.
func waitRefused(t *testing.T, srv *server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.Dial("tcp", strings.TrimPrefix(srv.Base(), "http://"))
		if err != nil {
			return
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("serve still accepts connections 10 s after SIGTERM")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
