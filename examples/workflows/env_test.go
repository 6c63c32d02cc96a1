package workflows_test

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/runstream/runstream/engine/enginetest"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/engine/nodeset"
	"github.com/runstream/runstream/engine/sqlnode"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/sse"
	"github.com/runstream/runstream/workflow"
)

// server is the public HTTP API over a memory store with every node type
// (nodeset) and artifact storage, and the engines that run its runs. The
// tests talk to it over HTTP only; engines are started and killed as
// instances of a deployment would be.
type server struct {
	url   string
	store *memory.WorkflowStore
	log   *eventlog.WorkflowLog
	reg   *engine.Registry
	blobs *engine.MemoryBlobs

	mu      sync.Mutex
	engines []*engine.Engine
}

func newServer(t *testing.T, dbs *sqlnode.Databases) *server {
	t.Helper()
	validator, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := nodeset.Registry(nodeset.Config{SQL: dbs})
	if err != nil {
		t.Fatal(err)
	}
	s := &server{store: memory.NewWorkflowStore(), reg: reg, blobs: engine.NewMemoryBlobs()}
	hub := live.New(live.Config{Poll: eventlog.Poller(s.store), PollInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	go hub.Run(ctx)
	s.log = eventlog.NewWorkflowLog(s.store, validator, hub, nil)
	api := httpapi.New(httpapi.Config{
		Workflows: s.store, Hub: hub, Log: s.log, Definitions: reg, Artifacts: s.blobs,
		Notify: func(runID string) {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, e := range s.engines {
				e.Notify(runID)
			}
		},
	})
	srv := httptest.NewServer(api)
	s.url = srv.URL
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		cancel()
		s.store.Close()
	})
	return s
}

// startEngine starts an instance's engine; cancelling ctx kills it.
func (s *server) startEngine(t *testing.T, ctx context.Context, edit func(*engine.Config)) *engine.Engine {
	t.Helper()
	cfg := engine.Config{Store: s.store, Log: s.log, Registry: s.reg, Artifacts: s.blobs, PollInterval: 25 * time.Millisecond, LeaseDuration: 3 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.engines = append(s.engines, eng)
	s.mu.Unlock()
	t.Cleanup(func() { eng.Stop(context.Background()) })
	return eng
}

// request sends a request and returns the status, the headers and the
// body.
func (s *server) request(t *testing.T, method, path, contentType string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, s.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, raw
}

// call sends a JSON body (or none) and decodes the JSON answer, failing
// unless its status is want.
func (s *server) call(t *testing.T, method, path, body string, want int) map[string]any {
	t.Helper()
	contentType := ""
	if body != "" {
		contentType = "application/json"
	}
	status, _, raw := s.request(t, method, path, contentType, []byte(body))
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil || status != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, status, raw, want)
	}
	return out
}

// publishExample publishes the example file name as YAML, as it is.
func (s *server) publishExample(t *testing.T, name string) string {
	t.Helper()
	yaml, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	status, _, raw := s.request(t, "POST", "/api/workflows", "application/yaml", yaml)
	var body struct{ WorkflowID string }
	if err := json.Unmarshal(raw, &body); err != nil || status != http.StatusCreated {
		t.Fatalf("publish %s: %d %s", name, status, raw)
	}
	return body.WorkflowID
}

func (s *server) startRun(t *testing.T, workflowID, input string) string {
	t.Helper()
	body := s.call(t, "POST", "/api/workflows/"+workflowID+"/runs", `{"input":`+input+`}`, http.StatusCreated)
	return body["runId"].(string)
}

// stream reads a run's SSE stream in the background.
type stream struct {
	events chan streamEvent
	got    []workflow.Envelope
}

type streamEvent struct {
	env workflow.Envelope
	err error
}

// follow opens the run's stream. Every frame must carry an id and an
// event name that match its envelope.
func (s *server) follow(t *testing.T, runID string) *stream {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", s.url+"/api/workflows/runs/"+runID+"/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: status %d", resp.StatusCode)
	}
	st := &stream{events: make(chan streamEvent, 64)}
	go func() {
		defer resp.Body.Close()
		defer close(st.events)
		rd := sse.NewReader(resp.Body)
		for {
			ev, err := rd.Next()
			if err != nil {
				if err != io.EOF {
					st.events <- streamEvent{err: err}
				}
				return
			}
			var env workflow.Envelope
			err = json.Unmarshal([]byte(ev.Data), &env)
			if err == nil && (!ev.HasID || ev.ID != strconv.FormatInt(env.Seq, 10) || ev.Type() != string(env.Event)) {
				err = io.ErrUnexpectedEOF
			}
			st.events <- streamEvent{env: env, err: err}
		}
	}()
	return st
}

// until reads events until one of type typ (and node) and returns it.
func (st *stream) until(t *testing.T, typ workflow.EventType, node string) workflow.Envelope {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-st.events:
			if !ok {
				t.Fatalf("stream closed before %s %s; got:\n%s", typ, node, strings.Join(enginetest.Sequence(st.got), "\n"))
			}
			if ev.err != nil {
				t.Fatalf("stream: %v", ev.err)
			}
			st.got = append(st.got, ev.env)
			if ev.env.Event == typ && (node == "" || ev.env.NodeID == node) {
				return ev.env
			}
		case <-timeout:
			t.Fatalf("no %s %s within 30 s; got:\n%s", typ, node, strings.Join(enginetest.Sequence(st.got), "\n"))
		}
	}
}

// rest reads the stream to its end (the server closes it after the
// terminal event) and returns every event read.
func (st *stream) rest(t *testing.T) []workflow.Envelope {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev, ok := <-st.events:
			if !ok {
				return st.got
			}
			if ev.err != nil {
				t.Fatalf("stream: %v", ev.err)
			}
			st.got = append(st.got, ev.env)
		case <-timeout:
			t.Fatalf("stream not closed within 60 s; got:\n%s", strings.Join(enginetest.Sequence(st.got), "\n"))
		}
	}
}

// coverage records the event types the examples' asserted sequences hold.
type coverage struct {
	mu   sync.Mutex
	seen map[workflow.EventType]bool
}

// checkSequence fails unless the events are want (see sequence), with
// seqs 1..N, the last one terminal, no synthesised frame, and attempts
// that count from 1 per node; it records the types in cov.
// checkSequence is enginetest.CheckSequence, but with consecutive
// node.progress events of one node merged (with real waits their count
// depends on timing); it records the event types of a run that passed.
func (cov *coverage) checkSequence(t *testing.T, envs []workflow.Envelope, want ...string) {
	t.Helper()
	ok := enginetest.CheckRun(t, envs)
	if !enginetest.SameSequence(t, mergeProgress(enginetest.Sequence(envs)), want) || !ok {
		return
	}
	cov.mu.Lock()
	defer cov.mu.Unlock()
	for _, e := range envs {
		cov.seen[e.Event] = true
	}
}

// mergeProgress merges consecutive equal node.progress entries of a
// sequence.
func mergeProgress(seq []string) []string {
	var out []string
	for _, s := range seq {
		if strings.HasPrefix(s, "node.progress:") && len(out) > 0 && out[len(out)-1] == s {
			continue
		}
		out = append(out, s)
	}
	return out
}
