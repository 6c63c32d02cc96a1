package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/streams"
)

const (
	startJSON    = `{"event_type":"run.start","content":{"chain":null},"metadata":{"caller":"lead_agent"}}`
	aiJSON       = `{"event_type":"llm.ai.response","category":"message","content":{"type":"ai","content":"hi","tool_calls":[]},"metadata":{"caller":"lead_agent","usage":{},"latency_ms":3,"llm_call_index":1},"created_at":"2026-05-01T10:00:00.5+02:00"}`
	deliveryJSON = `{"event_type":"run.delivery","content":{"presented":0,"paths":[],"by_tool":{}}}`
	eventsPath   = "/api/threads/t1/runs/r1/events"
)

func batch(events ...string) string { return `{"events":[` + strings.Join(events, ",") + `]}` }

func TestIngestStoresAndPublishes(t *testing.T) {
	forEachThreadBackend(t, testIngestStoresAndPublishes)
}

func testIngestStoresAndPublishes(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	sub := env.hub.Subscribe(streams.ThreadStreamKey("t1"), 0)
	defer sub.Close()
	rec := env.do(t, "POST", eventsPath, batch(startJSON, aiJSON))
	if rec.Code != http.StatusCreated {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	got := decodeAs[struct {
		Events  []wireRow `json:"events"`
		Created *bool     `json:"created"`
	}](t, rec)
	if len(got.Events) != 2 || got.Created != nil {
		t.Fatalf("response %s", rec.Body)
	}
	first, second := got.Events[0], got.Events[1]
	if first.Seq != 1 || first.Category != "trace" || first.UserID != "alice" || first.RunID != "r1" || first.ThreadID != "t1" {
		t.Errorf("first record %+v", first)
	}
	if second.Seq != 2 || second.Category != "message" {
		t.Errorf("second record %+v", second)
	}
	stored, _ := env.events.ListEvents(t.Context(), runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Owner: runevents.OwnedBy("alice"), Limit: 10})
	if len(stored) != 2 || stored[1].CreatedAt.Format(runevents.CreatedAtLayout) != "2026-05-01T10:00:00.500000+02:00" {
		t.Fatalf("stored %v", stored)
	}
	body, _ := json.Marshal(stored)
	if want := `{"events":` + string(body) + "}\n"; rec.Body.String() != want {
		t.Errorf("response\n%s\nwant the stored records\n%s", rec.Body, want)
	}
	if events := published(t, sub); len(events) != 2 || events[1].Seq != 2 {
		t.Errorf("published %d frames", len(events))
	}
}

// published waits until the hub hands sub events and takes them: a store
// publishes what a group committed once its writers are answered, so an
// append's answer may come first.
func published(t *testing.T, sub *live.Subscription) []live.Event {
	t.Helper()
	select {
	case <-sub.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("nothing published 10 s after the append was answered")
	}
	events, _ := sub.Take()
	return events
}

func TestIngestRefusals(t *testing.T) { forEachThreadBackend(t, testIngestRefusals) }

func testIngestRefusals(t *testing.T, b threadBackend) {
	t.Parallel()
	huge := `"` + strings.Repeat("x", 256<<10) + `"`
	many := make([]string, 101)
	for i := range many {
		many[i] = startJSON
	}
	for _, tc := range []struct {
		name, path, body string
		header           []string
		status           int
		code             runstream.ErrorCode
		problem          string
	}{
		{"bad thread id", "/api/threads/t.1/runs/r1/events", batch(startJSON), nil, 422, runstream.CodeValidationFailed, ""},
		{"long run id", "/api/threads/t1/runs/" + strings.Repeat("r", 65) + "/events", batch(startJSON), nil, 422, runstream.CodeValidationFailed, ""},
		{"no content type", eventsPath, "", nil, 415, runstream.CodeUnsupportedMediaType, ""},
		{"invalid JSON", eventsPath, `{"events":[`, nil, 400, runstream.CodeInvalidJSON, ""},
		{"duplicate keys", eventsPath, `{"events":[],"events":[]}`, nil, 400, runstream.CodeInvalidJSON, ""},
		{"not an object", eventsPath, `[1]`, nil, 422, runstream.CodeValidationFailed, ""},
		{"no events", eventsPath, `{}`, nil, 422, runstream.CodeValidationFailed, "/events"},
		{"empty batch", eventsPath, batch(), nil, 422, runstream.CodeValidationFailed, "/events"},
		{"unknown member", eventsPath, `{"events":[{"event_type":"run.start","seq":4}]}`, nil, 422, runstream.CodeValidationFailed, "/events/0/seq"},
		{"member name in another case", eventsPath, batch(`{"event_type":"run.start","EVENT_TYPE":"llm.error","content":{"chain":null},"metadata":{"caller":"x"}}`), nil, 422, runstream.CodeValidationFailed, "/events/0/EVENT_TYPE"},
		{"events in another case", eventsPath, `{"events":[` + startJSON + `],"Events":[` + startJSON + `,` + startJSON + `]}`, nil, 422, runstream.CodeValidationFailed, ""},
		{"lone surrogate", eventsPath, batch(`{"event_type":"run.start","content":{"chain":"\ud800"},"metadata":{"caller":"x"}}`), nil, 400, runstream.CodeInvalidJSON, ""},
		{"missing event type", eventsPath, batch(`{"content":"x"}`), nil, 422, runstream.CodeValidationFailed, "/events/0/event_type"},
		{"wrong member type", eventsPath, batch(`{"event_type":5}`), nil, 422, runstream.CodeValidationFailed, "/events/0/event_type"},
		{"unknown event type", eventsPath, batch(startJSON, `{"event_type":"llm.reply","content":{}}`), nil, 422, runstream.CodeValidationFailed, "/events/1/event_type"},
		{"legacy alias of a human message", eventsPath, batch(strings.Replace(strings.Replace(aiJSON, "llm.ai.response", "ai_message", 1), `"type":"ai"`, `"type":"human"`, 1)), nil, 422, runstream.CodeValidationFailed, "/events/0/content/type"},
		{"category mismatch", eventsPath, batch(strings.Replace(aiJSON, `"message"`, `"trace"`, 1)), nil, 422, runstream.CodeValidationFailed, "/events/0/category"},
		{"schema", eventsPath, batch(startJSON, `{"event_type":"run.start","content":{},"metadata":{"caller":"x"}}`), nil, 422, runstream.CodeValidationFailed, "/events/1/content/chain"},
		{"bad created_at", eventsPath, batch(strings.Replace(aiJSON, "2026-05-01T10:00:00.5+02:00", "2026-05-01 10:00", 1)), nil, 422, runstream.CodeValidationFailed, "/events/0/created_at"},
		{"created_at without zone", eventsPath, batch(strings.Replace(aiJSON, "+02:00", "", 1)), nil, 422, runstream.CodeValidationFailed, "/events/0/created_at"},
		{"zero created_at", eventsPath, batch(strings.Replace(aiJSON, "2026-05-01T10:00:00.5+02:00", "0001-01-01T00:00:00Z", 1)), nil, 422, runstream.CodeValidationFailed, "/events/0/created_at"},
		{"101 events", eventsPath, batch(many...), nil, 413, runstream.CodePayloadTooLarge, ""},
		{"event too large", eventsPath, batch(`{"event_type":"run.error","content":` + huge + `,"metadata":{"error_type":"E"}}`), nil, 413, runstream.CodePayloadTooLarge, ""},
		{"singleton of two", eventsPath + "?if_absent=true", batch(deliveryJSON, deliveryJSON), nil, 422, runstream.CodeValidationFailed, ""},
		{"bad if_absent", eventsPath + "?if_absent=maybe", batch(deliveryJSON), nil, 422, runstream.CodeValidationFailed, ""},
		{"malformed query", eventsPath + "?if_absent=%zztrue", batch(deliveryJSON), nil, 400, runstream.CodeInvalidArgument, ""},
		{"semicolon in query", eventsPath + "?if_absent=true;", batch(deliveryJSON), nil, 400, runstream.CodeInvalidArgument, ""},
		{"long idempotency key", eventsPath, batch(startJSON), []string{IdempotencyKeyHeader, strings.Repeat("k", 256)}, 422, runstream.CodeValidationFailed, ""},
		{"control in idempotency key", eventsPath, batch(startJSON), []string{IdempotencyKeyHeader, "a\x01b"}, 422, runstream.CodeValidationFailed, ""},
		{"two idempotency keys", eventsPath, batch(startJSON), []string{IdempotencyKeyHeader, "a", IdempotencyKeyHeader, "b"}, 422, runstream.CodeValidationFailed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newThreadEnvOn(t, b)
			sub := env.hub.Subscribe(streams.ThreadStreamKey("t1"), 0)
			defer sub.Close()
			rec := env.do(t, "POST", tc.path, tc.body, tc.header...)
			body := wantError(t, rec, tc.status, tc.code)
			if tc.problem != "" {
				problems, _ := body.Details["problems"].([]any)
				first, _ := problemAt(problems, 0)
				if first != tc.problem {
					t.Errorf("first problem at %q, want %q (%+v)", first, tc.problem, body.Details)
				}
			}
			if env.snapshot(t, "t1") != "null" {
				t.Errorf("rows stored by a refused request: %s", env.snapshot(t, "t1"))
			}
			if events, _ := sub.Take(); len(events) != 0 {
				t.Errorf("%d frames published by a refused request", len(events))
			}
		})
	}
}

func problemAt(problems []any, i int) (string, bool) {
	if i >= len(problems) {
		return "", false
	}
	p, _ := problems[i].(map[string]any)
	path, ok := p["path"].(string)
	return path, ok
}

func TestIngestIfAbsentUnder50Callers(t *testing.T) {
	forEachThreadBackend(t, testIngestIfAbsentUnder50Callers)
}

func testIngestIfAbsentUnder50Callers(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	sub := env.hub.Subscribe(streams.ThreadStreamKey("t1"), 0)
	defer sub.Close()
	type answer struct {
		status  int
		seq     int64
		created bool
	}
	answers := make([]answer, 50)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			rec := env.do(t, "POST", eventsPath+"?if_absent=true", batch(deliveryJSON))
			var body struct {
				Events  []wireRow `json:"events"`
				Created bool      `json:"created"`
			}
			json.Unmarshal(rec.Body.Bytes(), &body)
			answers[i] = answer{status: rec.Code}
			if len(body.Events) == 1 {
				answers[i].seq, answers[i].created = body.Events[0].Seq, body.Created
			}
		})
	}
	wg.Wait()
	created := 0
	for i, a := range answers {
		switch {
		case a.status == 201 && a.created:
			created++
		case a.status == 200 && !a.created:
		default:
			t.Errorf("caller %d: %+v", i, a)
		}
		if a.seq != 1 {
			t.Errorf("caller %d got seq %d, want the one row's 1", i, a.seq)
		}
	}
	if created != 1 {
		t.Errorf("%d callers created the row, want 1", created)
	}
	rows, _ := env.events.ListEvents(t.Context(), runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Owner: runevents.AnyOwner, Limit: 100})
	if len(rows) != 1 {
		t.Errorf("%d rows stored, want 1", len(rows))
	}
	if events := published(t, sub); len(events) != 1 {
		t.Errorf("%d frames published, want 1", len(events))
	}
}

func TestIngestIdempotencyKey(t *testing.T) { forEachThreadBackend(t, testIngestIdempotencyKey) }

func testIngestIdempotencyKey(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	key := []string{IdempotencyKeyHeader, "retry-1"}
	first := env.do(t, "POST", eventsPath, batch(startJSON, aiJSON), key...)
	if first.Code != 201 {
		t.Fatalf("first = %d %s", first.Code, first.Body)
	}
	again := env.do(t, "POST", eventsPath, batch(startJSON, aiJSON), key...)
	if again.Code != 201 || again.Body.String() != first.Body.String() || again.Header().Get("Idempotency-Replayed") != "true" {
		t.Errorf("retry = %d %s (replayed %q); want the first response", again.Code, again.Body, again.Header().Get("Idempotency-Replayed"))
	}
	if rows, _ := env.events.ListEvents(t.Context(), runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Owner: runevents.AnyOwner, Limit: 100}); len(rows) != 2 {
		t.Errorf("%d rows after a retry, want 2", len(rows))
	}
	wantError(t, env.do(t, "POST", eventsPath, batch(startJSON), key...), 422, runstream.CodeValidationFailed)
	wantError(t, env.do(t, "POST", "/api/threads/t1/runs/r2/events", batch(startJSON, aiJSON), key...), 422, runstream.CodeValidationFailed)
	// Another user's key space is their own.
	if rec := env.do(t, "POST", "/api/threads/tb/runs/r1/events", batch(startJSON), IdempotencyKeyHeader, "retry-1", testUserHeader, "bob"); rec.Code != 201 {
		t.Errorf("bob with alice's key = %d %s", rec.Code, rec.Body)
	}

	// A failed request is not remembered: the corrected retry goes through.
	bad := env.do(t, "POST", eventsPath, batch(`{"event_type":"nope"}`), IdempotencyKeyHeader, "retry-2")
	wantError(t, bad, 422, runstream.CodeValidationFailed)
	if rec := env.do(t, "POST", eventsPath, batch(startJSON), IdempotencyKeyHeader, "retry-2"); rec.Code != 201 {
		t.Errorf("retry after a failure = %d %s", rec.Code, rec.Body)
	}
}

// busyKeyStore answers every idempotent call as a store whose key another
// request holds.
type busyKeyStore struct{ *memory.RunEventStore }

func (busyKeyStore) AppendIdempotent(context.Context, runevents.IdempotentAppend) (runevents.IdempotentResult, error) {
	return runevents.IdempotentResult{}, runevents.ErrIdempotencyInProgress()
}

func (busyKeyStore) LookupIdempotent(context.Context, string, string, []byte) (*runevents.IdempotentResponse, error) {
	return nil, runevents.ErrIdempotencyInProgress()
}

// A key in progress is a retryable answer with Retry-After, so that a
// producer retries instead of giving up (or resending without the key).
func TestIngestKeyInProgressIsRetryable(t *testing.T) {
	t.Parallel()
	store := busyKeyStore{memory.NewRunEventStore()}
	env := newThreadEnv(t, func(c *envConfig) {
		c.RunEvents = store
		c.ThreadLog = eventlog.NewThreadLog(store, testValidator, c.Hub, eventlog.ThreadLimits{})
	})
	rec := env.do(t, "POST", eventsPath, batch(startJSON), IdempotencyKeyHeader, "k")
	body := wantError(t, rec, 503, runstream.CodeUnavailable)
	if !body.Retryable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("key in progress: retryable %v, Retry-After %q; want a retryable answer with Retry-After", body.Retryable, rec.Header().Get("Retry-After"))
	}
}

// lostAnswerStore commits every idempotent append, then answers as a
// store whose connection broke before the commit's acknowledgement: the
// outcome is unknown to the caller.
type lostAnswerStore struct{ *memory.RunEventStore }

func (s lostAnswerStore) AppendIdempotent(ctx context.Context, a runevents.IdempotentAppend) (runevents.IdempotentResult, error) {
	if _, err := s.RunEventStore.AppendIdempotent(ctx, a); err != nil {
		return runevents.IdempotentResult{}, err
	}
	return runevents.IdempotentResult{}, runstream.Errorf(runstream.CodeUnavailable, "the commit may have happened")
}

// A write whose answer was lost committed its response with it: the retry
// with the key gets that response (the seqs of the rows) and writes
// nothing.
func TestIngestRetryAfterALostAnswerReplays(t *testing.T) {
	t.Parallel()
	store := lostAnswerStore{memory.NewRunEventStore()}
	env := newThreadEnv(t, func(c *envConfig) {
		c.RunEvents = store
		c.ThreadLog = eventlog.NewThreadLog(store, testValidator, c.Hub, eventlog.ThreadLimits{})
	})
	wantError(t, env.do(t, "POST", eventsPath, batch(startJSON, aiJSON), IdempotencyKeyHeader, "k"), 503, runstream.CodeUnavailable)
	again := env.do(t, "POST", eventsPath, batch(startJSON, aiJSON), IdempotencyKeyHeader, "k")
	if again.Code != 201 || again.Header().Get("Idempotency-Replayed") != "true" {
		t.Fatalf("retry = %d %s; want the first response, replayed", again.Code, again.Body)
	}
	var resp struct{ Events []runevents.Record }
	if err := json.Unmarshal(again.Body.Bytes(), &resp); err != nil || len(resp.Events) != 2 || resp.Events[0].Seq != 1 || resp.Events[1].Seq != 2 {
		t.Fatalf("replayed body %s (%v); want seqs 1 and 2", again.Body, err)
	}
	rows, err := store.ListEvents(t.Context(), runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Owner: runevents.AnyOwner, Limit: 10})
	if err != nil || len(rows) != 2 {
		t.Errorf("%d rows after the retry (%v); want the batch once", len(rows), err)
	}
}

// plainStore hides every capability of a store but runevents.Store.
type plainStore struct{ runevents.Store }

// flakyThreadReader fails its first fails reads with UNAVAILABLE, as a
// busy database does.
type flakyThreadReader struct {
	runevents.ThreadReader
	fails atomic.Int32
}

func (f *flakyThreadReader) ListThreadEvents(ctx context.Context, p runevents.ListThreadEventsParams) ([]runevents.Record, error) {
	if f.fails.Add(-1) >= 0 {
		return nil, runstream.Errorf(runstream.CodeUnavailable, "the database is busy")
	}
	return f.ThreadReader.ListThreadEvents(ctx, p)
}

// A server-side failure before the write (here the thread check) wrote
// nothing: the key is released and a retry with it writes the batch.
func TestIngestKeyReleasedAfterAFailureBeforeTheWrite(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t, func(c *envConfig) {
		reader := &flakyThreadReader{ThreadReader: c.RunEvents.(runevents.ThreadReader)}
		reader.fails.Store(1)
		c.Threads = reader
	})
	wantError(t, env.do(t, "POST", eventsPath, batch(startJSON), IdempotencyKeyHeader, "k"), 503, runstream.CodeUnavailable)
	if rec := env.do(t, "POST", eventsPath, batch(startJSON), IdempotencyKeyHeader, "k"); rec.Code != 201 {
		t.Errorf("retry after a failed check (nothing written): %d %s; want 201", rec.Code, rec.Body)
	}
}

func TestIngestConcurrentSameKey(t *testing.T) { forEachThreadBackend(t, testIngestConcurrentSameKey) }

func testIngestConcurrentSameKey(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	bodies := make([]string, 50)
	codes := make([]int, 50)
	var wg sync.WaitGroup
	for i := range bodies {
		wg.Go(func() {
			rec := env.do(t, "POST", eventsPath, batch(startJSON), IdempotencyKeyHeader, "k")
			codes[i], bodies[i] = rec.Code, rec.Body.String()
		})
	}
	wg.Wait()
	var created string
	for i, code := range codes {
		switch code {
		case 201:
			if created != "" && bodies[i] != created {
				t.Errorf("caller %d got another 201 body", i)
			}
			created = bodies[i]
		default:
			t.Errorf("caller %d: %d %s", i, code, bodies[i])
		}
	}
	if rows, _ := env.events.ListEvents(t.Context(), runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Owner: runevents.AnyOwner, Limit: 100}); len(rows) != 1 {
		t.Errorf("%d rows stored by 50 requests with one key, want 1", len(rows))
	}
}

func TestIngestIntoAnotherUsersThread(t *testing.T) {
	forEachThreadBackend(t, testIngestIntoAnotherUsersThread)
}

func testIngestIntoAnotherUsersThread(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	if rec := env.do(t, "POST", eventsPath, batch(startJSON)); rec.Code != 201 {
		t.Fatalf("alice: %d %s", rec.Code, rec.Body)
	}
	unknown := env.do(t, "DELETE", "/api/threads/t-none/events", "", testUserHeader, "bob")
	for name, rec := range map[string]*httptest.ResponseRecorder{
		"events":    env.do(t, "POST", eventsPath, batch(startJSON), testUserHeader, "bob"),
		"run row":   env.do(t, "PUT", "/api/threads/t1/runs/r9", `{"status":"running"}`, testUserHeader, "bob"),
		"singleton": env.do(t, "POST", "/api/threads/t1/runs/r2/events?if_absent=1", batch(deliveryJSON), testUserHeader, "bob"),
	} {
		if rec.Code != 404 || !sameErrorShape(rec.Body.Bytes(), unknown.Body.Bytes()) {
			t.Errorf("bob writing %s into alice's thread: %d %s; want 404 like an unknown thread", name, rec.Code, rec.Body)
		}
	}
	if rows := env.snapshot(t, "t1"); strings.Count(rows, `"seq"`) != 1 {
		t.Errorf("bob's refused writes stored rows: %s", rows)
	}
}

// sameErrorShape reports whether two error bodies have the same code and
// message shape (thread ids replaced), requestId aside.
func sameErrorShape(a, b []byte) bool {
	var x, y errorBody
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	norm := func(e errorBody) string {
		return fmt.Sprintf("%s|%v|%s", e.Code, e.Retryable, strings.NewReplacer("t-none", "T", "t1", "T").Replace(e.Message))
	}
	return norm(x) == norm(y)
}

func TestIngestUnavailable(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t, func(c *envConfig) { c.ThreadLog = nil })
	wantError(t, env.do(t, "POST", eventsPath, batch(startJSON)), 503, runstream.CodeUnavailable)
	// A store without idempotent appends refuses keyed requests
	// rather than apply them without the guarantee.
	env = newThreadEnv(t, func(c *envConfig) {
		store := plainStore{c.RunEvents}
		c.ThreadLog = eventlog.NewThreadLog(store, testValidator, c.Hub, eventlog.ThreadLimits{})
	})
	wantError(t, env.do(t, "POST", eventsPath, batch(startJSON), IdempotencyKeyHeader, "k"), 503, runstream.CodeUnavailable)
	if rec := env.do(t, "POST", eventsPath, batch(startJSON)); rec.Code != 201 {
		t.Errorf("without a key the capability is not needed: %d", rec.Code)
	}
}

func TestIngestRedacts(t *testing.T) { forEachThreadBackend(t, testIngestRedacts) }

func testIngestRedacts(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	secret := "sk-" + strings.Repeat("Zx7", 16)
	rec := env.do(t, "POST", eventsPath, batch(`{"event_type":"llm.tool.result","content":{"type":"tool","content":"`+secret+`"},"metadata":{"api_key":"abc123"}}`))
	if rec.Code != 201 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	for what, text := range map[string]string{"response": rec.Body.String(), "store": env.snapshot(t, "t1")} {
		if strings.Contains(text, secret) || strings.Contains(text, "abc123") {
			t.Errorf("%s holds a secret: %s", what, text)
		}
	}
}
