package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/sse"
	"github.com/runstream/runstream/workflow"
)

// The fake server below serves one run, fakeRunID, with a script of stream
// connections, so a test decides exactly where each connection ends. It
// runs behind a real httptest.Server or, inside a synctest bubble, behind
// pipeTransport, which serves an http.Handler in memory.

const fakeRunID = "run_1"

// envelope returns event seq of the fake run.
func envelope(seq int64, event workflow.EventType) workflow.Envelope {
	env := workflow.Envelope{
		SchemaVersion: workflow.SchemaVersion, RunID: fakeRunID, WorkflowID: "wf_1", VersionID: "wv_1",
		Seq: seq, Event: event, Timestamp: time.Date(2026, 8, 26, 10, 0, 0, 0, time.UTC).Add(time.Duration(seq) * time.Millisecond),
		Data: json.RawMessage(`{"seq":` + jsonInt(seq) + `}`),
	}
	if event.NodeScoped() {
		env.NodeID, env.NodeRunID = "n1", "nr1"
	}
	return env
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// frame returns the wire form of env with its id line, or without one (as
// the server sends a synthesised terminal event) when noID is set.
func frame(env workflow.Envelope, noID bool) string {
	data, err := env.MarshalJSON()
	if err != nil {
		panic(err)
	}
	f := sse.Frame{ID: jsonInt(env.Seq), Event: string(env.Event), Data: data}
	if noID {
		f.ID = ""
	}
	b, err := sse.AppendFrame(nil, f)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// progress returns the frames of node.progress events from..to.
func progress(from, to int64) string {
	var b strings.Builder
	for seq := from; seq <= to; seq++ {
		b.WriteString(frame(envelope(seq, workflow.EventNodeProgress), false))
	}
	return b.String()
}

// completed returns the frame of run.completed at seq.
func completed(seq int64) string {
	return frame(envelope(seq, workflow.EventRunCompleted), false)
}

const heartbeat = ": heartbeat\n"

// streamRequest is what the fake server saw of one stream request.
type streamRequest struct {
	lastEventID string
	header      http.Header
	at          time.Time
}

// fakeServer answers the i-th stream request with script[i], and the run
// view with run (404 WORKFLOW_RUN_NOT_FOUND when nil).
type fakeServer struct {
	script []http.HandlerFunc
	run    *Run

	mu   sync.Mutex
	reqs []streamRequest
}

func (s *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/workflows/runs/" + fakeRunID + "/stream":
		s.mu.Lock()
		i := len(s.reqs)
		s.reqs = append(s.reqs, streamRequest{lastEventID: r.Header.Get("Last-Event-ID"), header: r.Header.Clone(), at: time.Now()})
		s.mu.Unlock()
		if i >= len(s.script) {
			writeError(w, http.StatusBadRequest, "TEST_SCRIPT_EXHAUSTED")
			return
		}
		s.script[i](w, r)
	case "/api/workflows/runs/" + fakeRunID:
		if s.run == nil {
			writeError(w, http.StatusNotFound, runstream.CodeWorkflowRunNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(s.run)
	default:
		writeError(w, http.StatusNotFound, runstream.CodeNotFound)
	}
}

// requests returns the stream requests seen so far.
func (s *fakeServer) requests() []streamRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]streamRequest(nil), s.reqs...)
}

// lastEventIDs returns the Last-Event-ID of each stream request.
func (s *fakeServer) lastEventIDs() []string {
	var ids []string
	for _, r := range s.requests() {
		ids = append(ids, r.lastEventID)
	}
	return ids
}

// gaps returns the time between consecutive stream requests.
func (s *fakeServer) gaps() []time.Duration {
	var gaps []time.Duration
	reqs := s.requests()
	for i := 1; i < len(reqs); i++ {
		gaps = append(gaps, reqs[i].at.Sub(reqs[i-1].at))
	}
	return gaps
}

func writeError(w http.ResponseWriter, status int, code runstream.ErrorCode) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"code": code, "message": "scripted " + string(code), "retryable": status == 429 || status >= 500, "requestId": "req_1",
	})
}

// stream answers with an event stream: the retry hint (when not 0), body,
// then a clean close.
func stream(retry time.Duration, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeStream(w, retry, body)
	}
}

// streamOpen is stream that keeps the connection open until the client
// leaves.
func streamOpen(retry time.Duration, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeStream(w, retry, body)
		<-r.Context().Done()
	}
}

// streamCut is stream that ends with the connection cut instead of a clean
// close.
func streamCut(retry time.Duration, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeStream(w, retry, body)
		if c, ok := w.(*pipeResponse); ok {
			c.cut(errors.New("connection reset by peer"))
			return
		}
		panic(http.ErrAbortHandler) // net/http drops the connection
	}
}

// refuse fails the request before any response, as a refused connection
// does (pipeTransport only).
func refuse(w http.ResponseWriter, r *http.Request) {
	w.(*pipeResponse).cut(errors.New("connection refused"))
}

// fail answers with the unified error body.
func fail(status int, code runstream.ErrorCode) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { writeError(w, status, code) }
}

func writeStream(w http.ResponseWriter, retry time.Duration, body string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	if retry > 0 {
		b, _ := sse.AppendRetry(nil, retry)
		w.Write(b)
	}
	w.Write([]byte(body))
	http.NewResponseController(w).Flush()
}

// pipeTransport is an http.RoundTripper that serves h in memory: the body
// is an io.Pipe the handler writes to, so it works inside a synctest bubble,
// where real network I/O is not allowed. Like a transport that does not
// watch the request's context once the response has arrived, it cancels the
// handler's context only when the body is closed.
type pipeTransport struct {
	h http.Handler
}

func (t *pipeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(req.Context()))
	pr, pw := io.Pipe()
	w := &pipeResponse{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer cancel()
		t.h.ServeHTTP(w, req.WithContext(ctx))
		w.WriteHeader(http.StatusOK)
		pw.Close()
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		cancel()
		pr.Close()
		return nil, req.Context().Err()
	}
	if w.err != nil {
		cancel()
		pr.Close()
		return nil, w.err
	}
	return &http.Response{
		Status: http.StatusText(w.status), StatusCode: w.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: &pipeBody{PipeReader: pr, cancel: cancel}, ContentLength: -1, Request: req,
	}, nil
}

// pipeResponse is the http.ResponseWriter of pipeTransport.
type pipeResponse struct {
	header http.Header
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{} // closed once the status (or err) is known
	status int
	sent   http.Header
	err    error // set by cut before the status: the request fails
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) WriteHeader(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeResponse) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(p)
}

func (w *pipeResponse) Flush() {}

// cut breaks the connection with err: the request fails with it before the
// status is sent, the body read after.
func (w *pipeResponse) cut(err error) {
	w.once.Do(func() {
		w.err = err
		close(w.ready)
	})
	w.pw.CloseWithError(err)
}

type pipeBody struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *pipeBody) Close() error {
	b.cancel()
	return b.PipeReader.Close()
}

// newPipeClient returns a client of h over pipeTransport whose backoff has
// no jitter: every delay is its ceiling.
func newPipeClient(t *testing.T, h http.Handler) *Client {
	t.Helper()
	c, err := New("http://runstream.test", WithHTTPClient(&http.Client{Transport: &pipeTransport{h: h}}))
	if err != nil {
		t.Fatal(err)
	}
	c.jitter = func(d time.Duration) time.Duration { return d }
	return c
}

// collect ranges over seq and returns the seqs yielded, the envelopes and
// the final error.
func collect(seq iter.Seq2[workflow.Envelope, error]) ([]int64, []workflow.Envelope, error) {
	var seqs []int64
	var envs []workflow.Envelope
	for env, err := range seq {
		if err != nil {
			return seqs, envs, err
		}
		seqs = append(seqs, env.Seq)
		envs = append(envs, env)
	}
	return seqs, envs, nil
}

// seqRange returns from..to.
func seqRange(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}
