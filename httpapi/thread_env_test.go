package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/internal/backendtest"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
)

// testUserHeader names the caller in thread tests; the default is alice.
const testUserHeader = "X-Test-User"

// threadEnv is a server over the thread stores of one backend with a hub,
// whose Authenticate reads the caller from testUserHeader.
type threadEnv struct {
	events backendtest.EventStore
	runs   runevents.RunStore
	idem   runevents.IdempotencyStore
	hub    *live.Hub
	log    *eventlog.ThreadLog
	api    *Server
}

func testAuthenticate(r *http.Request) (string, error) {
	if user := r.Header.Get(testUserHeader); user != "" {
		return user, nil
	}
	return "alice", nil
}

// newThreadEnv is newThreadEnvOn the memory backend.
func newThreadEnv(t testing.TB, mutate ...func(*envConfig)) *threadEnv {
	t.Helper()
	return newThreadEnvOn(t, memoryBackend, mutate...)
}

// newThreadEnvOn returns a server over new, empty stores of backend b.
func newThreadEnvOn(t testing.TB, b threadBackend, mutate ...func(*envConfig)) *threadEnv {
	t.Helper()
	env := &threadEnv{hub: live.New(live.Config{})}
	stores := b.Open(t)
	env.events, env.runs, env.idem = stores.Events, stores.Runs, stores.Idempotency
	env.log = eventlog.NewThreadLog(env.events, testValidator, env.hub, eventlog.ThreadLimits{})
	cfg := envConfig{
		Config: Config{Authenticate: testAuthenticate}, Hub: env.hub, Workflows: memory.NewWorkflowStore(),
		RunEvents: env.events, Runs: env.runs, ThreadLog: env.log,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	env.api = cfg.newServer()
	return env
}

// do sends a request; body "" sends none, else JSON. header holds
// name/value pairs.
func (env *threadEnv) do(t *testing.T, method, target, body string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	var req *http.Request
	if body == "" {
		req = httptest.NewRequestWithContext(t.Context(), method, target, nil)
	} else {
		req = httptest.NewRequestWithContext(t.Context(), method, target, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	env.api.ServeHTTP(rec, req)
	return rec
}

// get sends a GET as user ("" for alice) and fails unless it answers 200.
func (env *threadEnv) get(t *testing.T, target, user string) *httptest.ResponseRecorder {
	t.Helper()
	var header []string
	if user != "" {
		header = []string{testUserHeader, user}
	}
	rec := env.do(t, "GET", target, "", header...)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s as %q = %d %s", target, user, rec.Code, rec.Body)
	}
	return rec
}

// decodeAs decodes a response body.
func decodeAs[T any](t *testing.T, rec *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, rec.Body)
	}
	return v
}

// wantError fails unless rec is the unified error body with status and code.
func wantError(t *testing.T, rec *httptest.ResponseRecorder, status int, code runstream.ErrorCode) errorBody {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status %d, want %d: %s", rec.Code, status, rec.Body)
	}
	body := decodeError(t, rec)
	if body.Code != code {
		t.Fatalf("code %s, want %s: %+v", body.Code, code, body)
	}
	return body
}

// seed writes rows straight to the store (no catalogue checks), as alice
// unless a row names another owner.
func (env *threadEnv) seed(t *testing.T, events ...runevents.NewEvent) []runevents.Record {
	t.Helper()
	for i := range events {
		if events[i].ThreadID == "" {
			events[i].ThreadID = "t1"
		}
		if events[i].UserID == "" {
			events[i].UserID = "alice"
		}
	}
	recs, err := env.events.PutBatch(t.Context(), events)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// putRun stores a run row of alice in t1 (unless r says otherwise) created
// at a fixed time plus minute, and updated seconds later.
func (env *threadEnv) putRun(t *testing.T, r runevents.ThreadRun, minute, seconds int) runevents.ThreadRun {
	t.Helper()
	if r.ThreadID == "" {
		r.ThreadID = "t1"
	}
	if r.OwnerID == "" {
		r.OwnerID = "alice"
	}
	if r.Status == "" {
		r.Status = runevents.RunSuccess
	}
	r.CreatedAt = time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(minute) * time.Minute)
	r.UpdatedAt = r.CreatedAt.Add(time.Duration(seconds) * time.Second)
	stored, err := env.runs.PutRun(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	return stored
}

// Message rows as the journal writes them.

func row(run string, typ runevents.EventType, cat runevents.Category, content, meta string) runevents.NewEvent {
	return runevents.NewEvent{RunID: run, EventType: typ, Category: cat, Content: json.RawMessage(content), Metadata: json.RawMessage(meta)}
}

func humanRow(run, id string) runevents.NewEvent {
	return row(run, runevents.EventLLMHumanInput, runevents.CategoryMessage, fmt.Sprintf(`{"type":"human","id":%q,"content":"q"}`, id), `{"caller":"lead_agent"}`)
}

func aiRow(run, id string) runevents.NewEvent {
	return row(run, runevents.EventLLMAIResponse, runevents.CategoryMessage, fmt.Sprintf(`{"type":"ai","id":%q,"content":"a","tool_calls":[]}`, id),
		`{"caller":"lead_agent","usage":{},"latency_ms":1,"llm_call_index":1}`)
}

func callerAIRow(run, id, caller string) runevents.NewEvent {
	e := aiRow(run, id)
	e.Metadata = json.RawMessage(fmt.Sprintf(`{"caller":%q}`, caller))
	return e
}

func toolRow(run, id, meta string) runevents.NewEvent {
	return row(run, runevents.EventLLMToolResult, runevents.CategoryMessage, fmt.Sprintf(`{"type":"tool","id":%q,"content":"r","tool_call_id":"c1"}`, id), meta)
}

func traceRow(run string) runevents.NewEvent {
	return row(run, runevents.EventRunStart, runevents.CategoryTrace, `{"chain":null}`, `{"caller":"lead_agent"}`)
}

// wireRow is a row as the consumer endpoints return it.
type wireRow struct {
	ThreadID  string          `json:"thread_id"`
	RunID     string          `json:"run_id"`
	Seq       int64           `json:"seq"`
	EventType string          `json:"event_type"`
	Category  string          `json:"category"`
	Content   json.RawMessage `json:"content"`
	Metadata  json.RawMessage `json:"metadata"`
	Feedback  json.RawMessage `json:"feedback"`
	UserID    string          `json:"user_id"`
}

func wireSeqs(rows []wireRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.Seq
	}
	return out
}

// contentID returns content.id of a row.
func contentID(r wireRow) string {
	var c struct {
		ID string `json:"id"`
	}
	json.Unmarshal(r.Content, &c)
	return c.ID
}

// turnDuration returns content.additional_kwargs.turn_duration, or -1.
func turnDuration(r wireRow) int64 {
	var c struct {
		Kwargs struct {
			TurnDuration *int64 `json:"turn_duration"`
		} `json:"additional_kwargs"`
	}
	json.Unmarshal(r.Content, &c)
	if c.Kwargs.TurnDuration == nil {
		return -1
	}
	return *c.Kwargs.TurnDuration
}

// snapshot returns every stored row of a thread, encoded, to prove the
// handlers never modify them.
func (env *threadEnv) snapshot(t *testing.T, thread string) string {
	t.Helper()
	recs, err := env.events.ListThreadEvents(t.Context(), runevents.ListThreadEventsParams{ThreadID: thread, Owner: runevents.AnyOwner, Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(recs)
	return string(b)
}
