package httpapi

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream/internal/apitest"
	"github.com/runstream/runstream/streams"
)

// recordedStream is the body a stream writes through a ResponseWriter
// that cannot be taken over, as under HTTP/2.
func recordedStream(t *testing.T, api *Server, path string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), "GET", path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("recorded stream: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

func TestStreamTakesItsConnectionOver(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{})
	env.progress(t, 3)
	env.complete(t)
	path := "/api/workflows/runs/" + env.run.ID + "/stream"

	var mu sync.Mutex
	var states []http.ConnState
	srv := httptest.NewUnstartedServer(env.api)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		states = append(states, s)
	}
	srv.Start()
	defer srv.Close()

	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body) // fails on broken chunking or a missing last chunk
	resp.Body.Close()
	if err != nil {
		t.Fatalf("read the stream: %v", err)
	}
	mu.Lock()
	hijacked := slices.Contains(states, http.StateHijacked)
	mu.Unlock()
	if !hijacked {
		t.Errorf("connection states %v: the stream did not take its connection over", states)
	}
	if !resp.Close || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Errorf("Connection close = %v, Transfer-Encoding = %v; want a chunked body and the connection closed after it", resp.Close, resp.TransferEncoding)
	}
	for key, want := range map[string]string{
		"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no",
		"X-Workflow-Run-Status": "completed",
	} {
		if got := resp.Header.Get(key); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	if resp.Header.Get("Date") == "" || resp.Header.Get(RequestIDHeader) == "" {
		t.Errorf("headers %v lack Date or %s", resp.Header, RequestIDHeader)
	}
	if want := recordedStream(t, env.api, path); string(body) != want {
		t.Errorf("body over a taken-over connection:\n%s\nwant, as through a ResponseWriter:\n%s", body, want)
	}
}

func TestStreamToHTTP10Client(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{})
	env.complete(t)
	path := "/api/workflows/runs/" + env.run.ID + "/stream"
	conn, err := net.Dial("tcp", strings.TrimPrefix(env.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.0\r\nHost: runstream\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body) // the body ends when the server closes
	if err != nil {
		t.Fatal(err)
	}
	if resp.Proto != "HTTP/1.0" || resp.StatusCode != 200 || len(resp.TransferEncoding) != 0 {
		t.Errorf("%s %d, Transfer-Encoding %v; want HTTP/1.0 200 without chunking", resp.Proto, resp.StatusCode, resp.TransferEncoding)
	}
	if want := recordedStream(t, env.api, path); string(body) != want {
		t.Errorf("body:\n%s\nwant:\n%s", body, want)
	}
}

func TestShutdownEndsTakenOverStreams(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{})
	c := env.open(t, "")
	c.seqs(t, 2) // the run is queued: the stream now waits
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := env.api.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	// The stream ended cleanly: its last chunk came before the close.
	ended := make(chan error, 1)
	go func() {
		_, err := c.reader.Next()
		ended <- err
	}()
	select {
	case err := <-ended:
		if err != io.EOF {
			t.Fatalf("after Shutdown the stream read %v, want io.EOF", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream is still open 10 s after Shutdown returned")
	}
	if n := env.hub.Followed(streams.WorkflowStreamKey(env.run.ID)); n != 0 {
		t.Errorf("%d subscriptions left after Shutdown", n)
	}
	// A stream asked for after Shutdown is refused before any byte.
	late := env.open(t, "")
	body, _ := io.ReadAll(late.resp.Body)
	if late.resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"code":"UNAVAILABLE"`) || late.resp.Header.Get("Retry-After") == "" {
		t.Errorf("stream after Shutdown: %d %s (Retry-After %q), want 503 UNAVAILABLE", late.resp.StatusCode, body, late.resp.Header.Get("Retry-After"))
	}
	if n := env.hub.Followed(streams.WorkflowStreamKey(env.run.ID)); n != 0 {
		t.Errorf("%d subscriptions after the refused stream", n)
	}
}

// Shutdown also ends the streams that stay with net/http (HTTP/2, or as
// here a ResponseWriter that cannot be taken over).
func TestShutdownEndsStreamsOnTheirHandler(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{})
	rec := newSyncRecorder()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		env.api.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), "GET", "/api/workflows/runs/"+env.run.ID+"/stream", nil))
	}()
	waitUntil(t, "the replay", func() bool { return strings.Contains(rec.String(), "id: 2\n") })
	if err := env.api.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream on its handler is still open 10 s after Shutdown returned")
	}
}

func TestTakenOverStreamIsLoggedWhenItEnds(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{})
	logs := newSyncRecorder()
	api := New(Config{Logger: slog.New(slog.NewJSONHandler(logs, nil))}, readOnlyWorkflows(env.store, env.hub), nil)
	srv := apitest.Serve(t, api, api)
	resp, err := http.Get(srv.URL + "/api/workflows/runs/" + env.run.ID + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for { // the replay: retry hint and seqs 1 and 2
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "id: 2\n" {
			break
		}
	}
	if got := inFlight(t, api); got != 1 {
		t.Errorf("requests in flight during the stream = %v, want 1", got)
	}
	if strings.Contains(logs.String(), `"msg":"request"`) {
		t.Errorf("the stream was logged before it ended:\n%s", logs.String())
	}
	env.complete(t)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	type accessLine struct {
		Msg, Route string
		Status     int
		Bytes      int64
	}
	// The stream writes its log line once the connection is closed.
	var entry accessLine
	waitUntil(t, "the stream's access log line", func() bool {
		for line := range strings.Lines(logs.String()) {
			entry = accessLine{}
			if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "request" {
				return true
			}
		}
		return false
	})
	if entry.Route != "GET /api/workflows/runs/{run_id}/stream" || entry.Status != 200 {
		t.Fatalf("access log entry %+v, in:\n%s", entry, logs.String())
	}
	if entry.Bytes < int64(len(rest)) || !strings.HasSuffix(string(rest), "\n\n") {
		t.Errorf("logged %d bytes, but the client read %d after seq 2", entry.Bytes, len(rest))
	}
	if got := inFlight(t, api); got != 0 {
		t.Errorf("requests in flight after the stream = %v, want 0", got)
	}
}

func TestTakenOverStreamEndsWhenItsClientLeaves(t *testing.T) {
	t.Parallel()
	// The heartbeat (15 s) writes nothing during the test: the stream must
	// notice the closed connection without a failed write.
	env := newWorkflowEnv(t, StreamConfig{MaxPerUser: 1})
	key := streams.WorkflowStreamKey(env.run.ID)
	c := env.open(t, "")
	c.seqs(t, 2)
	if n := env.hub.Followed(key); n != 1 {
		t.Fatalf("%d subscriptions, want 1", n)
	}
	c.resp.Body.Close()
	waitUntil(t, "the stream of the client that left to release its subscription", func() bool { return env.hub.Followed(key) == 0 })
	// Its place is free: the user's one stream may reconnect.
	again := env.open(t, "", "Last-Event-ID", "2")
	if again.resp.StatusCode != http.StatusOK {
		t.Fatalf("reconnect: %d, want 200", again.resp.StatusCode)
	}
	env.complete(t)
	again.seqs(t, 1)
	again.expectEOF(t)
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

func TestStreamHEAD(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{})
	req, _ := http.NewRequestWithContext(t.Context(), "HEAD", env.srv.URL+"/api/workflows/runs/"+env.run.ID+"/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("X-Workflow-Run-Status") != "queued" {
		t.Errorf("HEAD: %d %v", resp.StatusCode, resp.Header)
	}
	if n := env.hub.Followed(streams.WorkflowStreamKey(env.run.ID)); n != 0 {
		t.Errorf("HEAD left %d subscriptions", n)
	}
}

// inFlight reads the gauge of requests in flight from api's registry.
func inFlight(t *testing.T, api *Server) float64 {
	t.Helper()
	families, err := api.cfg.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "runstream_http_requests_in_flight" {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no runstream_http_requests_in_flight metric")
	return 0
}

func TestStreamsPerUserLimit(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{MaxPerUser: 2})
	env.api.cfg.Authenticate = func(r *http.Request) (string, error) { return cmp.Or(r.Header.Get("X-User"), LocalUser), nil }
	first, second := env.open(t, ""), env.open(t, "")
	first.seqs(t, 2)
	second.seqs(t, 2)

	third := env.open(t, "")
	body, _ := io.ReadAll(third.resp.Body)
	var e struct {
		Code      string
		Retryable bool
		Details   map[string]any
	}
	if third.resp.StatusCode != http.StatusTooManyRequests || json.Unmarshal(body, &e) != nil || e.Code != "RATE_LIMITED" || !e.Retryable {
		t.Fatalf("third stream: %d %s, want 429 RATE_LIMITED", third.resp.StatusCode, body)
	}
	if third.resp.Header.Get("Retry-After") != "3" || e.Details["limit"] != float64(2) {
		t.Errorf("Retry-After %q, details %v; want 3 and limit 2", third.resp.Header.Get("Retry-After"), e.Details)
	}
	if n := env.hub.Followed(streams.WorkflowStreamKey(env.run.ID)); n != 2 {
		t.Errorf("%d subscriptions after the refusal, want 2", n)
	}
	// Another user has streams of their own to open (the run is the local
	// user's: theirs answers 404, not 429).
	if other := env.open(t, "", "X-User", "someone-else"); other.resp.StatusCode != http.StatusNotFound {
		t.Errorf("another user's stream: %d, want 404", other.resp.StatusCode)
	}
	// A stream that ends gives its place back.
	env.complete(t)
	first.seqs(t, 1)
	first.expectEOF(t)
	waitUntil(t, "the ended stream to give its place back", func() bool {
		c := env.open(t, "?after=3")
		defer c.resp.Body.Close()
		return c.resp.StatusCode == http.StatusOK
	})
}
