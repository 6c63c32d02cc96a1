package chunkpush_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeServer implements the push API of docs/LANGGRAPH.md for one server
// in memory: contiguous indexes, duplicates ignored, gaps 409 with
// expected_index, epochs fencing, end with the terminal status, cancel
// requests in answers and in the control long-poll. Hooks inject faults.
type fakeServer struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	changed chan struct{}
	runs    map[string]*fakeRun
	// pushes counts push requests; empty counts those without chunks and end.
	pushes, empty int
	// polls counts control long-poll requests (the fake ignores
	// cancel_seen, as a server before it did).
	polls int
	// maxBatch is the largest batch seen.
	maxBatch int
	// before, when set, may answer a push itself (a fault): it returns
	// true when it did. It runs before the push is applied.
	before func(n int, w http.ResponseWriter, r *http.Request) bool
	// dropAnswer, when set, makes the server apply push n and then cut
	// the connection instead of answering.
	dropAnswer func(n int) bool
	// hold, when set, blocks pushes until it is closed.
	hold chan struct{}
}

type fakeRun struct {
	thread string
	epoch  int64
	chunks []json.RawMessage
	status string
	ended  bool
	errMsg string
	cancel *map[string]string
}

func newFakeServer(t *testing.T) *fakeServer {
	f := &fakeServer{t: t, runs: map[string]*fakeRun{}, changed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/runs/{run}/stream-chunks", f.push)
	mux.HandleFunc("GET /api/runs/{run}/stream-control", f.control)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) signalLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func conflict(w http.ResponseWriter, msg string, details map[string]any) {
	writeJSON(w, http.StatusConflict, map[string]any{"code": "CONFLICT", "message": msg, "retryable": false, "details": details})
}

func (f *fakeServer) answerLocked(id string, r *fakeRun) map[string]any {
	var cancel any
	if r.cancel != nil {
		cancel = *r.cancel
	}
	return map[string]any{"run_id": id, "thread_id": r.thread, "epoch": r.epoch, "next_index": len(r.chunks), "status": r.status, "cancel": cancel}
}

func (f *fakeServer) push(w http.ResponseWriter, req *http.Request) {
	var body struct {
		ThreadID   string            `json:"thread_id"`
		Epoch      int64             `json:"epoch"`
		FirstIndex int               `json:"first_index"`
		Chunks     []json.RawMessage `json:"chunks"`
		End        *struct {
			Status string `json:"status"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		} `json:"end"`
	}
	if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": "INVALID_ARGUMENT", "message": err.Error()})
		return
	}
	f.mu.Lock()
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pushes++
	n := f.pushes
	if len(body.Chunks) == 0 && body.End == nil {
		f.empty++
	}
	f.maxBatch = max(f.maxBatch, len(body.Chunks))
	if f.before != nil && f.before(n, w, req) {
		return
	}
	id := req.PathValue("run")
	r := f.runs[id]
	if r == nil {
		r = &fakeRun{thread: body.ThreadID, epoch: body.Epoch, status: "running"}
		f.runs[id] = r
	}
	switch {
	case body.Epoch < r.epoch:
		conflict(w, fmt.Sprintf("stale epoch %d: the run is at epoch %d", body.Epoch, r.epoch), nil)
		return
	case body.Epoch > r.epoch:
		r.epoch = body.Epoch
	}
	if body.FirstIndex > len(r.chunks) {
		conflict(w, "gap", map[string]any{"expected_index": len(r.chunks)})
		return
	}
	tail := body.Chunks[min(len(body.Chunks), len(r.chunks)-body.FirstIndex):]
	if r.ended {
		if len(tail) > 0 {
			conflict(w, "the run's stream has ended", nil)
			return
		}
	} else {
		r.chunks = append(r.chunks, tail...)
		if body.End != nil {
			r.ended, r.status = true, body.End.Status
			if body.End.Error != nil {
				r.errMsg = body.End.Error.Message
			}
		}
	}
	f.signalLocked()
	if f.dropAnswer != nil && f.dropAnswer(n) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			f.t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
		return
	}
	writeJSON(w, http.StatusOK, f.answerLocked(id, r))
}

func (f *fakeServer) control(w http.ResponseWriter, req *http.Request) {
	wait, err := time.ParseDuration(req.URL.Query().Get("wait"))
	if err != nil {
		http.Error(w, "wait", http.StatusBadRequest)
		return
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	id := req.PathValue("run")
	f.mu.Lock()
	f.polls++
	f.mu.Unlock()
	for {
		f.mu.Lock()
		r := f.runs[id]
		if r == nil {
			f.mu.Unlock()
			writeJSON(w, http.StatusNotFound, map[string]any{"code": "NOT_FOUND", "message": "no such run"})
			return
		}
		if r.cancel != nil || r.ended {
			writeJSON(w, http.StatusOK, f.answerLocked(id, r))
			f.mu.Unlock()
			return
		}
		changed := f.changed
		f.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			f.mu.Lock()
			writeJSON(w, http.StatusOK, f.answerLocked(id, r))
			f.mu.Unlock()
			return
		case <-req.Context().Done():
			return
		}
	}
}

// requestCancel stores a cancel request on the run, as the cancel endpoint.
func (f *fakeServer) requestCancel(run, action string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[run].cancel = &map[string]string{"action": action, "requested_at": time.Now().UTC().Format(time.RFC3339Nano)}
	f.signalLocked()
}

// loseTail forgets the run's last n chunks, as a store restored from an
// older backup would.
func (f *fakeServer) loseTail(run string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.runs[run]
	r.chunks = r.chunks[:len(r.chunks)-n]
}

// run returns a copy of the run's state.
func (f *fakeServer) run(id string) fakeRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := *f.runs[id]
	r.chunks = append([]json.RawMessage(nil), r.chunks...)
	return r
}

// waitFor waits until cond holds on the server's state.
func (f *fakeServer) waitFor(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		f.mu.Lock()
		ok := cond()
		changed := f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			f.t.Fatalf("waiting for %s: timed out", what)
		}
	}
}

// chunkNumbers decodes the "n" member of each chunk's data.
func chunkNumbers(t *testing.T, chunks []json.RawMessage) []int {
	t.Helper()
	out := make([]int, len(chunks))
	for i, c := range chunks {
		var v struct {
			Event string `json:"event"`
			Data  struct {
				N int `json:"n"`
			} `json:"data"`
		}
		if err := json.Unmarshal(c, &v); err != nil || !strings.HasPrefix(v.Event, "custom") {
			t.Fatalf("chunk %d: %s (%v)", i, c, err)
		}
		out[i] = v.Data.N
	}
	return out
}
