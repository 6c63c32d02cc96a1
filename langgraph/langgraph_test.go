package langgraph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/langgraph"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runchunks"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/sse"
	"github.com/runstream/runstream/threadruns"
	"github.com/runstream/runstream/threadsvc"
)

// clock is a settable Config.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fixture is the service over memory stores, mounted on an httpapi
// server whose caller is the X-Test-User header's user ("local" without
// it).
type fixture struct {
	reads *readRecorder
	svc   *langgraph.Service
	store runchunks.Store
	runs  runevents.RunStore
	clock *clock
	url   string
	// credentialExpires is when the callers' credentials expire, in Unix
	// nanoseconds (0: never): HTTP.Expires.
	credentialExpires atomic.Int64
}

func newFixture(t *testing.T, cfg langgraph.Config) *fixture {
	t.Helper()
	return newKitFixture(t, cfg, httpapi.ThreadKit(), httpapi.StreamConfig{})
}

// newKitFixture is newFixture with the service mounted with kit, on an
// API whose streams streams bounds.
func newKitFixture(t *testing.T, cfg langgraph.Config, kit threadruns.Kit, streams httpapi.StreamConfig) *fixture {
	t.Helper()
	f := &fixture{runs: memory.NewRunStore(), clock: &clock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}}
	f.store = memory.NewChunkStore(f.runs)
	f.reads = &readRecorder{Store: f.store}
	hub := live.New(live.Config{Poll: langgraph.Poller(f.reads, nil)})
	ctx, cancel := context.WithCancel(context.Background())
	go hub.Run(ctx)
	if cfg.Now == nil {
		cfg.Now = f.clock.Now
	}
	f.svc = langgraph.New(f.reads, hub, cfg)
	validator, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	events := memory.NewRunEventStore()
	threads := threadsvc.New(events, events, f.runs, eventlog.NewThreadLog(events, validator, hub, eventlog.ThreadLimits{}), hub, threadsvc.Config{})
	api := httpapi.New(httpapi.Config{Stream: streams, Authenticate: func(r *http.Request) (string, error) {
		if u := r.Header.Get("X-Test-User"); u != "" {
			return u, nil
		}
		return "local", nil
	}}, nil, threads)
	f.svc.Mount(langgraph.HTTP{Mount: api.Mount, User: httpapi.User, WriteError: api.WriteError, StoreOnly: threads.StoreOnlyRun, Kit: kit, AcquireStream: api.AcquireStream,
		Expires: func(*http.Request) time.Time {
			if at := f.credentialExpires.Load(); at != 0 {
				return time.Unix(0, at)
			}
			return time.Time{}
		}})
	srv := httptest.NewServer(api)
	f.url = srv.URL
	t.Cleanup(func() {
		cancel()
		srv.Close()
	})
	t.Cleanup(f.svc.Shutdown) // runs first: open streams abort, so srv.Close does not wait for them
	return f
}

// call sends a JSON request and returns the status and decoded body.
func (f *fixture) call(t *testing.T, method, path, body string, header ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: %d %s: not JSON: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode, out
}

// push pushes chunks "values" {"n": i} for i in [first, first+n), with
// end when given.
func (f *fixture) push(t *testing.T, run string, epoch, first, n int, end string) (int, map[string]any) {
	t.Helper()
	var chunks []string
	for i := first; i < first+n; i++ {
		chunks = append(chunks, fmt.Sprintf(`{"event":"values","data":{"n":%d}}`, i))
	}
	body := fmt.Sprintf(`{"thread_id":"t1","epoch":%d,"first_index":%d,"chunks":[%s]`, epoch, first, strings.Join(chunks, ","))
	if end != "" {
		body += `,"end":` + end
	}
	return f.call(t, "POST", "/api/runs/"+run+"/stream-chunks", body+"}")
}

func (f *fixture) mustPush(t *testing.T, run string, first, n int, end string) map[string]any {
	t.Helper()
	status, body := f.push(t, run, 1, first, n, end)
	if status != http.StatusOK {
		t.Fatalf("push %d+%d: %d %v", first, n, status, body)
	}
	return body
}

// stream is an open join stream.
type stream struct {
	resp *http.Response
	r    *sse.Reader
}

func (f *fixture) join(t *testing.T, run, lastEventID, query string) *stream {
	t.Helper()
	req, err := http.NewRequest("GET", f.url+"/api/threads/t1/runs/"+run+"/stream"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("join: %d %s", resp.StatusCode, raw)
	}
	return &stream{resp: resp, r: sse.NewReader(resp.Body)}
}

// next returns the next event, failing the test on an error.
func (s *stream) next(t *testing.T) sse.Event {
	t.Helper()
	ev, err := s.r.Next()
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	return ev
}

// rest reads events until the body ends and returns them with the error
// that ended it (io.EOF: a clean end).
func (s *stream) rest() ([]sse.Event, error) {
	var out []sse.Event
	for {
		ev, err := s.r.Next()
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

// frames renders events as "event id data" lines, for comparisons.
func frames(events []sse.Event) string {
	var b strings.Builder
	for _, ev := range events {
		id := ""
		if ev.HasID {
			id = ev.ID
		}
		fmt.Fprintf(&b, "%s %s %s\n", ev.Event, id, ev.Data)
	}
	return b.String()
}

func valuesFrames(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "values %d {\"n\":%d}\n", i, i)
	}
	return b.String()
}

const metadataFrame = "metadata  {\"run_id\":\"r1\",\"thread_id\":\"t1\"}\n"

func TestPushRules(t *testing.T) {
	f := newFixture(t, langgraph.Config{})
	if body := f.mustPush(t, "r1", 0, 3, ""); body["next_index"] != 3.0 || body["status"] != "running" || body["cancel"] != nil || body["epoch"] != 1.0 {
		t.Fatalf("first push = %v", body)
	}
	// A retried batch is a duplicate; an overlapping one appends its tail.
	if body := f.mustPush(t, "r1", 0, 3, ""); body["next_index"] != 3.0 {
		t.Fatalf("retry = %v", body)
	}
	if body := f.mustPush(t, "r1", 1, 4, ""); body["next_index"] != 5.0 {
		t.Fatalf("overlap = %v", body)
	}
	// A gap is 409 with the expected index.
	status, body := f.push(t, "r1", 1, 7, 1, "")
	if status != http.StatusConflict || body["expected_index"] != 5.0 || body["code"] != "CONFLICT" {
		t.Fatalf("gap = %d %v", status, body)
	}
	// A newer epoch takes over; the older one is fenced.
	if status, body := f.push(t, "r1", 2, 5, 1, ""); status != http.StatusOK || body["epoch"] != 2.0 {
		t.Fatalf("takeover = %d %v", status, body)
	}
	status, body = f.push(t, "r1", 1, 6, 1, "")
	if status != http.StatusConflict || body["current_epoch"] != 2.0 || !strings.Contains(body["message"].(string), "stale epoch") {
		t.Fatalf("stale epoch = %d %v", status, body)
	}
	// The end, then its retry, then anything new.
	if status, body := f.push(t, "r1", 2, 6, 1, `{"status":"success"}`); status != http.StatusOK || body["status"] != "success" || body["next_index"] != 7.0 {
		t.Fatalf("end = %d %v", status, body)
	}
	if status, body := f.push(t, "r1", 2, 6, 1, `{"status":"success"}`); status != http.StatusOK || body["next_index"] != 7.0 {
		t.Fatalf("retried end = %d %v", status, body)
	}
	if status, body := f.push(t, "r1", 2, 7, 1, ""); status != http.StatusConflict || body["status"] != "success" {
		t.Fatalf("push after the end = %d %v", status, body)
	}
	row, err := f.runs.GetRun(context.Background(), "t1", "r1", runevents.OwnedBy("local"))
	if err != nil || row.Status != runevents.RunSuccess {
		t.Fatalf("run row = %+v, %v", row, err)
	}
	events, err := f.join(t, "r1", "-1", "").rest()
	if !errors.Is(err, io.EOF) || frames(events) != metadataFrame+valuesFrames(0, 7)+"end  null\n" {
		t.Fatalf("join after the pushes (%v):\n%s", err, frames(events))
	}
}

func TestPushRefusesBadInput(t *testing.T) {
	f := newFixture(t, langgraph.Config{MaxChunkBytes: langgraph.MinMaxChunkBytes})
	big := `{"s":"` + strings.Repeat("x", langgraph.MinMaxChunkBytes) + `"}`
	// 3.5 MB of data that its redaction makes 6.75 MB: each "x" under a
	// sensitive key becomes "[REDACTED:key]".
	secrets := `{"a":[` + strings.TrimSuffix(strings.Repeat(`{"token":"x"},`, 250_000), ",") + `]}`
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"no thread", `{"epoch":1,"first_index":0,"chunks":[]}`, 422},
		{"no epoch", `{"thread_id":"t1","first_index":0,"chunks":[]}`, 422},
		{"chunks without first_index", `{"thread_id":"t1","epoch":1,"chunks":[{"event":"values","data":{}}]}`, 422},
		{"reserved event", `{"thread_id":"t1","epoch":1,"first_index":0,"chunks":[{"event":"end","data":null}]}`, 422},
		{"newline in event", `{"thread_id":"t1","epoch":1,"first_index":0,"chunks":[{"event":"a\nb","data":null}]}`, 422},
		{"bad end status", `{"thread_id":"t1","epoch":1,"first_index":0,"chunks":[],"end":{"status":"running"}}`, 422},
		{"end error not an object", `{"thread_id":"t1","epoch":1,"first_index":0,"chunks":[],"end":{"status":"error","error":"x"}}`, 422},
		// The body is read and decoded as every JSON body of the API is
		// (httpapi.ThreadKit): INVALID_JSON (400) for what is not JSON,
		// VALIDATION_FAILED (422) for a member the push does not have.
		{"invalid UTF-8", "{\"thread_id\":\"t1\",\"epoch\":1,\"first_index\":0,\"chunks\":[{\"event\":\"values\",\"data\":\"\xff\"}]}", 400},
		{"unknown member", `{"thread_id":"t1","epoch":1,"first_index":0,"chunks":[],"extra":1}`, 422},
		{"duplicate member", `{"thread_id":"t1","epoch":1,"epoch":9,"first_index":0,"chunks":[]}`, 400},
		{"member in the wrong case", `{"thread_id":"t1","EPOCH":1,"first_index":0,"chunks":[]}`, 422},
		{"trailing text", `{"thread_id":"t1","epoch":1,"first_index":0,"chunks":[]} x`, 400},
		{"chunk too large", `{"thread_id":"t1","epoch":1,"first_index":0,"chunks":[{"event":"values","data":` + big + `}]}`, 413},
		{"chunk too large once redacted", `{"thread_id":"t1","epoch":1,"first_index":0,"chunks":[{"event":"values","data":` + secrets + `}]}`, 413},
	} {
		status, body := f.call(t, "POST", "/api/runs/r1/stream-chunks", tc.body)
		if status != tc.status {
			t.Errorf("%s: %d %v, want %d", tc.name, status, body, tc.status)
		}
	}
	if status, body := f.call(t, "POST", "/api/runs/r1/stream-chunks", `{"thread_id":"t1","epoch":1,"first_index":0,"chunks":[]}`, "Content-Type", "text/plain"); status != http.StatusUnsupportedMediaType {
		t.Errorf("a text/plain push: %d %v, want 415", status, body)
	}
	if _, err := f.store.GetRun(context.Background(), "r1"); err == nil {
		t.Fatal("a refused push created the run")
	}
	// A push of more than MaxBatch chunks is refused whole.
	small := newFixture(t, langgraph.Config{MaxBatch: 2})
	three := `{"thread_id":"t1","epoch":1,"first_index":0,"chunks":[{"event":"values","data":1},{"event":"values","data":2},{"event":"values","data":3}]}`
	if status, body := small.call(t, "POST", "/api/runs/r1/stream-chunks", three); status != 422 || !strings.Contains(fmt.Sprint(body["message"]), "at most 2 chunks") {
		t.Errorf("push over MaxBatch: %d %v, want 422", status, body)
	}
	if _, err := small.store.GetRun(context.Background(), "r1"); err == nil {
		t.Fatal("a push over MaxBatch created the run")
	}
	// A full values state of 4 MiB fits (the body limit is 8 MiB).
	state := `{"messages":[{"content":"` + strings.Repeat("y", langgraph.MinMaxChunkBytes-64) + `"}]}`
	if status, body := f.call(t, "POST", "/api/runs/r1/stream-chunks", `{"thread_id":"t1","epoch":1,"first_index":0,"chunks":[{"event":"values","data":`+state+`}]}`); status != 200 {
		t.Fatalf("4 MiB values state: %d %v", status, body)
	}
}

// A push is read, decoded and answered with the HTTP's Kit when it has
// one: what its reader refuses is answered with the unified error body
// and stores nothing.
func TestPushUsesKit(t *testing.T) {
	var decoded, written int
	kit := threadruns.Kit{
		ReadJSON: func(r *http.Request) ([]byte, error) {
			if r.Header.Get("Content-Type") != "application/json" {
				return nil, runstream.Errorf(runstream.CodeUnsupportedMediaType, "Content-Type must be application/json")
			}
			return io.ReadAll(r.Body)
		},
		Decode: func(raw []byte, v any) error {
			decoded++
			return json.Unmarshal(raw, v)
		},
		WriteJSON: func(w http.ResponseWriter, status int, v any) {
			written++
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(v)
		},
	}
	f := newKitFixture(t, langgraph.Config{}, kit, httpapi.StreamConfig{})
	push := `{"thread_id":"t1","epoch":1,"first_index":0,"chunks":[]}`
	status, body := f.call(t, "POST", "/api/runs/r1/stream-chunks", push, "Content-Type", "text/plain")
	if status != http.StatusUnsupportedMediaType || body["code"] != "UNSUPPORTED_MEDIA_TYPE" {
		t.Fatalf("text/plain push: %d %v", status, body)
	}
	if _, err := f.store.GetRun(context.Background(), "r1"); err == nil {
		t.Fatal("a refused push created the run")
	}
	if status, body := f.call(t, "POST", "/api/runs/r1/stream-chunks", push); status != 200 || decoded != 1 || written != 1 {
		t.Fatalf("push: %d %v, decoded %d, written %d", status, body, decoded, written)
	}
}

func TestPushRedactsCredentialsKeepsReasoning(t *testing.T) {
	f := newFixture(t, langgraph.Config{})
	token := "ghp_" + strings.Repeat("a1B2", 9) // a GitHub token's shape, in an event name
	body := `{"thread_id":"t1","epoch":1,"first_index":0,"chunks":[{"event":"messages","data":
		[{"content":"hello","additional_kwargs":{"reasoning_content":"let me think"}},{"api_key":"sk-live-0123456789abcdefghij"}]},
		{"event":"custom|` + token + `","data":null}]}`
	if status, resp := f.call(t, "POST", "/api/runs/r1/stream-chunks", body); status != 200 {
		t.Fatalf("push: %d %v", status, resp)
	}
	chunks, err := f.store.ReadChunks(context.Background(), "r1", -1, 10, 0)
	if err != nil || len(chunks) != 2 {
		t.Fatalf("chunks = %v, %v", chunks, err)
	}
	data := string(chunks[0].Data)
	if !strings.Contains(data, "let me think") || strings.Contains(data, "sk-live") || strings.Contains(data, "\n") {
		t.Fatalf("stored data = %s", data)
	}
	if ev := chunks[1].Event; ev != "custom|[REDACTED:github_token]" {
		t.Errorf("stored event name = %q, want its token redacted", ev)
	}
}

func TestJoinResumesExactlyAndFollowsLive(t *testing.T) {
	f := newFixture(t, langgraph.Config{})
	f.mustPush(t, "r1", 0, 3, "")
	s := f.join(t, "r1", "1", "")
	if h := s.resp.Header; h.Get("Location") != "/threads/t1/runs/r1/stream" || h.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("headers = %v", h)
	}
	got := []sse.Event{s.next(t), s.next(t)}
	if frames(got) != metadataFrame+valuesFrames(2, 3) {
		t.Fatalf("resume after 1:\n%s", frames(got))
	}
	f.mustPush(t, "r1", 3, 2, "") // live, from the hub
	f.mustPush(t, "r1", 5, 0, `{"status":"success"}`)
	events, err := s.rest()
	if !errors.Is(err, io.EOF) || frames(events) != valuesFrames(3, 5)+"end  null\n" {
		t.Fatalf("live (%v):\n%s", err, frames(events))
	}
	// A cursor past the chunks gets the end.
	events, err = f.join(t, "r1", "99", "").rest()
	if !errors.Is(err, io.EOF) || frames(events) != metadataFrame+"end  null\n" {
		t.Fatalf("cursor past the end (%v):\n%s", err, frames(events))
	}
	f.mustPush(t, "r2", 0, 1, "")
	s2 := f.join(t, "r2", "99", "")
	s2.next(t)                                        // metadata
	f.mustPush(t, "r2", 1, 1, `{"status":"success"}`) // live
	if events, err := s2.rest(); !errors.Is(err, io.EOF) || frames(events) != valuesFrames(1, 2)+"end  null\n" {
		t.Fatalf("live after a cursor past the chunks (%v):\n%s", err, frames(events))
	}
	// Absent Last-Event-ID is the start too.
	events, err = f.join(t, "r1", "", "").rest()
	if !errors.Is(err, io.EOF) || frames(events) != metadataFrame+valuesFrames(0, 5)+"end  null\n" {
		t.Fatalf("from the start (%v):\n%s", err, frames(events))
	}
}

func TestJoinAnswers404And409(t *testing.T) {
	f := newFixture(t, langgraph.Config{})
	if status, _ := f.call(t, "GET", "/api/threads/t1/runs/nope/stream", ""); status != 404 {
		t.Fatalf("unknown run: %d", status)
	}
	f.mustPush(t, "r1", 0, 1, "")
	if status, _ := f.call(t, "GET", "/api/threads/t2/runs/r1/stream", ""); status != 404 {
		t.Fatalf("another thread: %d", status)
	}
	if status, _ := f.call(t, "GET", "/api/threads/t1/runs/r1/stream", "", "X-Test-User", "mallory"); status != 404 {
		t.Fatalf("another user: %d", status)
	}
	// A run runstream only stores (its row, no chunk stream).
	if _, err := f.runs.PutRun(context.Background(), runevents.ThreadRun{ThreadID: "t1", RunID: "stored", OwnerID: "local", Status: runevents.RunSuccess, OperationKind: "run"}); err != nil {
		t.Fatal(err)
	}
	status, body := f.call(t, "GET", "/api/threads/t1/runs/stored/stream", "")
	if status != 409 || !strings.Contains(fmt.Sprint(body["detail"]), "cannot be streamed") {
		t.Fatalf("stored-only run: %d %v", status, body)
	}
	if status, _ := f.call(t, "GET", "/api/threads/t1/runs/r1/stream", "", "Last-Event-ID", "x"); status != 422 {
		t.Fatalf("bad Last-Event-ID: %d", status)
	}
}

func TestJoinFiltersByStreamMode(t *testing.T) {
	f := newFixture(t, langgraph.Config{})
	body := `{"thread_id":"t1","epoch":1,"first_index":0,"chunks":[
		{"event":"values","data":1},{"event":"messages","data":[2,{}]},{"event":"updates|agent:x","data":3},
		{"event":"custom","data":4},{"event":"messages/partial","data":[5]}],"end":{"status":"error","error":{"message":"boom","name":"E"}}}`
	if status, resp := f.call(t, "POST", "/api/runs/r1/stream-chunks", body); status != 200 {
		t.Fatalf("push: %d %v", status, resp)
	}
	for _, tc := range []struct{ query, want string }{
		{`?stream_mode=%5B%22values%22%2C%22messages-tuple%22%5D`, "values 0 1\nmessages 1 [2,{}]\n"},
		{`?stream_mode=updates`, "updates|agent:x 2 3\n"},
		{`?stream_mode=messages&stream_mode=custom`, "messages 1 [2,{}]\ncustom 3 4\nmessages/partial 4 [5]\n"},
		{`?stream_mode=values,custom`, "values 0 1\ncustom 3 4\n"},
	} {
		events, err := f.join(t, "r1", "-1", tc.query).rest()
		want := metadataFrame + tc.want + "error 5 {\"message\":\"boom\",\"name\":\"E\"}\nend  null\n"
		if !errors.Is(err, io.EOF) || frames(events) != want {
			t.Errorf("%s (%v):\n%s\nwant\n%s", tc.query, err, frames(events), want)
		}
	}
	// A mode LangGraph does not know is refused, as LangGraph refuses it,
	// without echoing it.
	for _, query := range []string{`?stream_mode=valuez`, `?stream_mode=values,bogus-secret-mode`, `?stream_mode=%5B%22nope%22%5D`, `?stream_mode=%5Bvalues`} {
		status, body := f.call(t, "GET", "/api/threads/t1/runs/r1/stream"+query, "")
		if status != 422 || strings.Contains(fmt.Sprint(body), "bogus") || !strings.Contains(fmt.Sprint(body), "stream_mode") {
			t.Errorf("%s: %d %v", query, status, body)
		}
	}
}

func TestJoinGapBelowRetention(t *testing.T) {
	f := newFixture(t, langgraph.Config{MaxChunks: 3})
	f.mustPush(t, "r1", 0, 5, "") // keeps 2, 3, 4
	events, err := f.join(t, "r1", "-1", "").rest()
	if !errors.Is(err, io.EOF) || len(events) != 2 || events[1].Event != "gap" {
		t.Fatalf("join from the start (%v):\n%s", err, frames(events))
	}
	var gap map[string]any
	json.Unmarshal([]byte(events[1].Data), &gap)
	want := map[string]any{"code": "stream_replay_gap", "run_id": "r1", "requested_event_id": "-1",
		"earliest_available_event_id": "2", "latest_available_event_id": "4", "recovery": "reload_durable_state"}
	if fmt.Sprint(gap) != fmt.Sprint(want) {
		t.Fatalf("gap = %v, want %v", gap, want)
	}
	// A cursor within what is kept resumes.
	s := f.join(t, "r1", "2", "")
	if got := frames([]sse.Event{s.next(t), s.next(t), s.next(t)}); got != metadataFrame+valuesFrames(3, 5) {
		t.Fatalf("resume after 2:\n%s", got)
	}
}

func TestRetentionExpiredRunEndsAtOnce(t *testing.T) {
	f := newFixture(t, langgraph.Config{ChunkTTL: time.Hour})
	f.mustPush(t, "r1", 0, 2, `{"status":"success"}`)
	if err := f.svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if chunks, _ := f.store.ReadChunks(context.Background(), "r1", -1, 10, 0); len(chunks) != 2 {
		t.Fatalf("chunks within the TTL: %d", len(chunks))
	}
	f.clock.Add(time.Hour + time.Second)
	if err := f.svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if chunks, _ := f.store.ReadChunks(context.Background(), "r1", -1, 10, 0); len(chunks) != 0 {
		t.Fatalf("chunks after the TTL: %d", len(chunks))
	}
	events, err := f.join(t, "r1", "-1", "").rest()
	if !errors.Is(err, io.EOF) || frames(events) != metadataFrame+"end  null\n" {
		t.Fatalf("join of an expired run (%v):\n%s", err, frames(events))
	}
}

func TestLeaseSweeperEndsOrphanedRun(t *testing.T) {
	f := newFixture(t, langgraph.Config{Lease: time.Minute})
	f.mustPush(t, "r1", 0, 1, "")
	s := f.join(t, "r1", "-1", "")
	s.next(t)
	s.next(t)
	f.clock.Add(30 * time.Second)
	f.mustPush(t, "r1", 1, 0, "") // a heartbeat renews the lease
	f.clock.Add(45 * time.Second)
	if err := f.svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if run, _ := f.store.GetRun(context.Background(), "r1"); run.Ended() {
		t.Fatal("the sweeper ended a run whose lease was renewed")
	}
	f.clock.Add(time.Minute)
	if err := f.svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	events, err := s.rest()
	if !errors.Is(err, io.EOF) || len(events) != 2 || events[0].Event != "error" || events[0].ID != "1" || events[1].Event != "end" {
		t.Fatalf("joiner after the sweep (%v):\n%s", err, frames(events))
	}
	var e map[string]string
	if json.Unmarshal([]byte(events[0].Data), &e) != nil || e["name"] == "" || e["message"] == "" {
		t.Fatalf("error chunk = %s", events[0].Data)
	}
	row, err := f.runs.GetRun(context.Background(), "t1", "r1", runevents.OwnedBy("local"))
	if err != nil || row.Status != runevents.RunError {
		t.Fatalf("run row = %+v, %v", row, err)
	}
	if status, body := f.push(t, "r1", 1, 1, 1, ""); status != 409 || body["current_epoch"] != 2.0 {
		t.Fatalf("the orphaned producer's push: %d %v", status, body)
	}
}

// With the cancel it has (cancel_seen), the producer's next long-poll
// waits for news, here the run's end, instead of answering that cancel
// again at once, which made the poll loop until the producer ended.
func TestControlWaitsPastTheCancelItHas(t *testing.T) {
	f := newFixture(t, langgraph.Config{})
	polled := f.pollPastCancel(t, "rollback")
	select {
	case body := <-polled:
		t.Fatalf("the long-poll answered a cancel the producer has: %v", body)
	case <-time.After(200 * time.Millisecond):
	}
	f.mustPush(t, "r1", 1, 0, `{"status":"interrupted"}`)
	if body := <-polled; body["status"] != "interrupted" {
		t.Fatalf("long-poll after the end = %v", body)
	}
	if status, _ := f.call(t, "GET", "/api/runs/r1/stream-control?cancel_seen=yesterday", ""); status != 422 {
		t.Errorf("a malformed cancel_seen: %d, want 422", status)
	}
}

// pollPastCancel pushes run r1's first chunk, cancels it with action,
// reads the cancel from a long-poll and starts the producer's next one,
// which says it has that cancel (cancel_seen); its answer comes on the
// channel.
func (f *fixture) pollPastCancel(t *testing.T, action string) <-chan map[string]any {
	t.Helper()
	f.mustPush(t, "r1", 0, 1, "")
	if status, _ := f.call(t, "POST", "/api/threads/t1/runs/r1/cancel?action="+action, ""); status != 202 {
		t.Fatalf("cancel: %d", status)
	}
	_, body := f.call(t, "GET", "/api/runs/r1/stream-control?wait=30s", "")
	c, _ := body["cancel"].(map[string]any)
	if c == nil || c["action"] != action {
		t.Fatalf("long-poll = %v", body)
	}
	polled := make(chan map[string]any, 1)
	go func() {
		_, body := f.call(t, "GET", "/api/runs/r1/stream-control?wait=30s&cancel_seen="+url.QueryEscape(c["requested_at"].(string)), "")
		polled <- body
	}()
	return polled
}

// A cancel with another action is news to a producer that has the
// first: its long-poll answers it.
func TestControlAnswersAnotherCancelAction(t *testing.T) {
	f := newFixture(t, langgraph.Config{})
	polled := f.pollPastCancel(t, "interrupt")
	waitFor(t, func() bool { return langgraph.ControlWaiters(f.svc, "r1") == 1 })
	f.clock.Add(time.Second)
	if status, _ := f.call(t, "POST", "/api/threads/t1/runs/r1/cancel?action=rollback", ""); status != 202 {
		t.Fatalf("second cancel: %d", status)
	}
	select {
	case body := <-polled:
		if c, _ := body["cancel"].(map[string]any); c == nil || c["action"] != "rollback" {
			t.Fatalf("long-poll after the second cancel = %v", body)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the long-poll did not answer the second cancel's action")
	}
	f.mustPush(t, "r1", 1, 0, `{"status":"interrupted"}`)
}

func TestCancelSeenByProducer(t *testing.T) {
	f := newFixture(t, langgraph.Config{})
	if status, _ := f.call(t, "POST", "/api/threads/t1/runs/r1/cancel", ""); status != 404 {
		t.Fatalf("cancel of an unknown run: %d", status)
	}
	f.mustPush(t, "r1", 0, 1, "")
	// A long-poll returns once the cancel is stored.
	polled := make(chan map[string]any, 1)
	go func() {
		_, body := f.call(t, "GET", "/api/runs/r1/stream-control?wait=30s", "")
		polled <- body
	}()
	if status, _ := f.call(t, "POST", "/api/threads/t1/runs/r1/cancel?action=rollback", ""); status != 202 {
		t.Fatalf("cancel: %d", status)
	}
	if body := <-polled; fmt.Sprint(body["cancel"].(map[string]any)["action"]) != "rollback" {
		t.Fatalf("long-poll = %v", body)
	}
	if body := f.mustPush(t, "r1", 1, 0, ""); body["cancel"].(map[string]any)["action"] != "rollback" {
		t.Fatalf("push answer = %v", body)
	}
	// wait=1 answers 204 once the producer ended the run.
	done := make(chan int, 1)
	go func() {
		status, _ := f.call(t, "POST", "/api/threads/t1/runs/r1/cancel?wait=1&action=interrupt", "")
		done <- status
	}()
	waitFor(t, func() bool {
		run, _ := f.store.GetRun(context.Background(), "r1")
		return run.Cancel != nil && run.Cancel.Action == "interrupt"
	})
	f.mustPush(t, "r1", 1, 0, `{"status":"interrupted"}`)
	if status := <-done; status != 204 {
		t.Fatalf("cancel wait=1: %d", status)
	}
	status, body := f.call(t, "POST", "/api/threads/t1/runs/r1/cancel", "")
	if status != 409 || body["detail"] != "Run r1 is not cancellable (status: interrupted)" {
		t.Fatalf("cancel of an ended run: %d %v", status, body)
	}
	if _, err := f.runs.PutRun(context.Background(), runevents.ThreadRun{ThreadID: "t1", RunID: "stored", OwnerID: "local", Status: runevents.RunSuccess, OperationKind: "run"}); err != nil {
		t.Fatal(err)
	}
	status, body = f.call(t, "POST", "/api/threads/t1/runs/stored/cancel", "")
	if status != 409 || body["detail"] != "Run stored is not cancellable (status: success)" {
		t.Fatalf("cancel of a run without a stream: %d %v", status, body)
	}
	if status, _ := f.call(t, "POST", "/api/threads/t1/runs/r1/cancel?action=explode", ""); status != 422 {
		t.Fatalf("bad action: %d", status)
	}
}

// waitFor polls cond until it holds (the test's own deadline bounds it).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		time.Sleep(5 * time.Millisecond)
	}
}

// Shutdown ends a pending control long-poll at once, whatever its wait,
// with 503 UNAVAILABLE and Retry-After (a producer polls again, elsewhere
// or after the restart), so that the poll does not hold a graceful
// shutdown; a poll after Shutdown is refused alike.
func TestShutdownEndsControlLongPoll(t *testing.T) {
	f := newFixture(t, langgraph.Config{ControlMax: time.Hour})
	f.mustPush(t, "r1", 0, 1, "")
	type answer struct {
		status     int
		retryAfter string
		body       map[string]any
	}
	// Cancelled first at the end: without the fix the poll would hold the
	// server's Close for its hour.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	poll := func() answer {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url+"/api/runs/r1/stream-control?wait=1h", nil)
		if err != nil {
			t.Error(err)
			return answer{}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return answer{status: -1, body: map[string]any{"error": err.Error()}}
		}
		defer resp.Body.Close()
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		return answer{resp.StatusCode, resp.Header.Get("Retry-After"), body}
	}
	polled := make(chan answer, 1)
	go func() { polled <- poll() }()
	waitFor(t, func() bool { return langgraph.ControlWaiters(f.svc, "r1") == 1 })
	f.svc.Shutdown()
	var got answer
	select {
	case got = <-polled:
	case <-time.After(time.Minute): // the poll's wait is an hour
		t.Fatal("the long-poll pending at Shutdown did not end")
	}
	for i, a := range []answer{got, poll()} {
		if a.status != http.StatusServiceUnavailable || a.retryAfter == "" || a.body["code"] != string(runstream.CodeUnavailable) {
			t.Errorf("poll %d during shutdown: %d Retry-After %q %v; want 503 UNAVAILABLE with Retry-After", i, a.status, a.retryAfter, a.body)
		}
	}
}

// Shutdown ends a cancel's wait for the run's end (wait=1) at once with
// 503: the request stays stored for the producer, and the wait does not
// hold the graceful shutdown until the run ends.
func TestShutdownEndsCancelWait(t *testing.T) {
	f := newFixture(t, langgraph.Config{})
	f.mustPush(t, "r1", 0, 1, "")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // first: without the fix the wait would hold the server's Close
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.url+"/api/threads/t1/runs/r1/cancel?wait=1&action=interrupt", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- -1
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	waitFor(t, func() bool {
		run, _ := f.store.GetRun(context.Background(), "r1")
		return run.Cancel != nil
	})
	f.svc.Shutdown()
	select {
	case status := <-done:
		if status != http.StatusServiceUnavailable {
			t.Fatalf("cancel wait=1 during shutdown: %d, want 503", status)
		}
	case <-time.After(time.Minute): // the run never ends
		t.Fatal("the cancel's wait pending at Shutdown did not end")
	}
	if run, err := f.store.GetRun(context.Background(), "r1"); err != nil || run.Cancel == nil || run.Cancel.Action != "interrupt" {
		t.Fatalf("the stored cancel request after the shutdown: %+v, %v", run, err)
	}
}

// The SDK reconnects only when the body breaks: lifetime expiry and
// shutdown must abort the connection, not end the body cleanly.
func TestJoinAbortsOnLifetimeExpiry(t *testing.T) {
	f := newFixture(t, langgraph.Config{MaxLifetime: 50 * time.Millisecond})
	f.mustPush(t, "r1", 0, 1, "")
	events, err := f.join(t, "r1", "-1", "").rest()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("stream ended with %v after\n%s; want an unexpected EOF (aborted)", err, frames(events))
	}
	if frames(events) != metadataFrame+valuesFrames(0, 1) {
		t.Fatalf("events before the abort:\n%s", frames(events))
	}
}

// A join of a caller whose credential expires is aborted then, as on
// lifetime expiry: the client re-authenticates and resumes.
func TestJoinAbortsWhenTheCredentialExpires(t *testing.T) {
	f := newFixture(t, langgraph.Config{})
	f.mustPush(t, "r1", 0, 1, "")
	f.credentialExpires.Store(time.Now().Add(50 * time.Millisecond).UnixNano())
	events, err := f.join(t, "r1", "-1", "").rest()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("stream ended with %v after\n%s; want an unexpected EOF (aborted)", err, frames(events))
	}
	if frames(events) != metadataFrame+valuesFrames(0, 1) {
		t.Fatalf("events before the abort:\n%s", frames(events))
	}
}

func TestJoinAbortsOnShutdown(t *testing.T) {
	f := newFixture(t, langgraph.Config{})
	f.mustPush(t, "r1", 0, 1, "")
	s := f.join(t, "r1", "-1", "")
	s.next(t)
	s.next(t)
	f.svc.Shutdown()
	if events, err := s.rest(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("stream ended with %v after %s; want an unexpected EOF (aborted)", err, frames(events))
	}
	if status, _ := f.call(t, "GET", "/api/threads/t1/runs/r1/stream", ""); status != 503 {
		t.Fatalf("join after shutdown: %d", status)
	}
}

func TestHeartbeatIsOneLineComment(t *testing.T) {
	f := newFixture(t, langgraph.Config{Heartbeat: 10 * time.Millisecond})
	f.mustPush(t, "r1", 0, 1, "")
	s := f.join(t, "r1", "-1", "")
	// Read on past the first heartbeat to the next one, so that what
	// follows a heartbeat (a stray blank line) is seen too.
	buf := make([]byte, 0, 512)
	for bytes.Count(buf, []byte(": heartbeat\n")) < 2 {
		chunk := make([]byte, 256)
		n, err := s.resp.Body.Read(chunk)
		if err != nil {
			t.Fatal(err)
		}
		buf = append(buf, chunk[:n]...)
	}
	if bytes.Contains(buf, []byte(": heartbeat\n\n")) || bytes.Contains(buf, []byte("retry:")) {
		t.Fatalf("stream bytes %q: a heartbeat must be a single-newline comment and no retry: block be sent", buf)
	}
	for _, line := range strings.Split(string(buf), "\n") {
		if strings.HasPrefix(line, ":") && line != ": heartbeat" {
			t.Fatalf("stream bytes %q: comment line %q is not the one-line heartbeat", buf, line)
		}
	}
}

func TestJoinPerUserLimit(t *testing.T) {
	f := newKitFixture(t, langgraph.Config{}, httpapi.ThreadKit(), httpapi.StreamConfig{MaxPerUser: 1})
	f.mustPush(t, "r1", 0, 1, "")
	s := f.join(t, "r1", "-1", "")
	s.next(t)
	if status, body := f.call(t, "GET", "/api/threads/t1/runs/r1/stream", ""); status != 429 || body["code"] != "RATE_LIMITED" {
		t.Fatalf("second stream of the user: %d %v", status, body)
	}
	f.mustPush(t, "r1", 1, 0, `{"status":"success"}`)
	if _, err := s.rest(); !errors.Is(err, io.EOF) {
		t.Fatalf("first stream: %v", err)
	}
	waitFor(t, func() bool { // the first stream's place is free once its handler returned
		resp, err := http.Get(f.url + "/api/threads/t1/runs/r1/stream")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// DeerFlow's stop button: POST …/stream?action=interrupt cancels, then
// streams what is left (or, with wait=1, answers 204 once the run ended).
func TestPostStreamWithActionCancelsThenStreams(t *testing.T) {
	f := newFixture(t, langgraph.Config{})
	f.mustPush(t, "r1", 0, 1, "")
	req, err := http.NewRequest("POST", f.url+"/api/threads/t1/runs/r1/stream?action=interrupt", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	s := &stream{resp: resp, r: sse.NewReader(resp.Body)}
	if got := frames([]sse.Event{s.next(t), s.next(t)}); got != metadataFrame+valuesFrames(0, 1) {
		t.Fatalf("stream after the cancel:\n%s", got)
	}
	body := f.mustPush(t, "r1", 1, 0, "")
	if c, _ := body["cancel"].(map[string]any); c["action"] != "interrupt" {
		t.Fatalf("push answer = %v", body)
	}
	f.mustPush(t, "r1", 1, 0, `{"status":"interrupted"}`)
	if events, err := s.rest(); !errors.Is(err, io.EOF) || frames(events) != "end  null\n" {
		t.Fatalf("rest (%v):\n%s", err, frames(events))
	}
}

// A GET on the same path only joins, whatever its query says: it is safe
// to repeat or prefetch.
func TestGetStreamWithActionDoesNotCancel(t *testing.T) {
	f := newFixture(t, langgraph.Config{})
	f.mustPush(t, "r1", 0, 1, "")
	resp, err := http.Get(f.url + "/api/threads/t1/runs/r1/stream?action=interrupt")
	if err != nil {
		t.Fatal(err)
	}
	s := &stream{resp: resp, r: sse.NewReader(resp.Body)}
	if got := frames([]sse.Event{s.next(t), s.next(t)}); got != metadataFrame+valuesFrames(0, 1) {
		t.Fatalf("stream:\n%s", got)
	}
	resp.Body.Close()
	if body := f.mustPush(t, "r1", 1, 0, ""); body["cancel"] != nil {
		t.Fatalf("a GET with action=interrupt cancelled the run: push answer %v", body)
	}
}

// A cancel whose action or wait is malformed, or given twice, is refused
// and cancels nothing.
func TestCancelRefusesMalformedParameters(t *testing.T) {
	f := newFixture(t, langgraph.Config{})
	f.mustPush(t, "r1", 0, 1, "")
	for _, target := range []string{
		"/api/threads/t1/runs/r1/cancel?action=interrupt&action=bogus",
		"/api/threads/t1/runs/r1/cancel?wait=maybe",
		"/api/threads/t1/runs/r1/stream?action=interrupt&action=bogus",
		"/api/threads/t1/runs/r1/stream?action=interrupt&wait=maybe",
	} {
		if status, body := f.call(t, "POST", target, ""); status != 422 {
			t.Errorf("POST %s: %d %v, want 422", target, status, body)
		}
	}
	if body := f.mustPush(t, "r1", 1, 0, ""); body["cancel"] != nil {
		t.Fatalf("a refused cancel was stored: push answer %v", body)
	}
}

func TestPushRefusesAnotherUsersThread(t *testing.T) {
	var asked []string
	released := 0
	f := newFixture(t, langgraph.Config{Writable: func(_ context.Context, user, threadID string) (func(), error) {
		asked = append(asked, user+"/"+threadID)
		if user != "local" {
			return nil, runstream.Errorf(runstream.CodeNotFound, "thread %s not found", threadID)
		}
		return func() { released++ }, nil
	}})
	body := `{"thread_id":"t1","epoch":1,"first_index":0,"chunks":[]}`
	if status, resp := f.call(t, "POST", "/api/runs/r2/stream-chunks", body, "X-Test-User", "mallory"); status != 404 {
		t.Fatalf("push into another user's thread: %d %v", status, resp)
	}
	if _, err := f.store.GetRun(context.Background(), "r2"); err == nil {
		t.Fatal("the refused push created the run")
	}
	f.mustPush(t, "r1", 0, 1, "")
	f.mustPush(t, "r1", 1, 1, "") // the run exists: not asked again
	if strings.Join(asked, ",") != "mallory/t1,local/t1" || released != 1 {
		t.Fatalf("Writable asked for %v, released %d times; want mallory's refusal and local's claim, released once", asked, released)
	}
}

// A conflict's answer, written by this package for DeerFlow's clients,
// passes its message and details through the same guard as every other
// error answer: a secret-shaped run id does not come back whole.
func TestConflictDoesNotEchoSecrets(t *testing.T) {
	f := newFixture(t, langgraph.Config{})
	const runID = "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56"
	path := "/api/runs/" + runID + "/stream-chunks"
	if status, body := f.call(t, "POST", path, `{"thread_id":"t1","epoch":1,"first_index":0,"chunks":[]}`); status != http.StatusOK {
		t.Fatalf("first push: %d %v", status, body)
	}
	status, body := f.call(t, "POST", path, `{"thread_id":"t2","epoch":1,"first_index":0,"chunks":[]}`)
	if status != http.StatusConflict || body["code"] != "CONFLICT" {
		t.Fatalf("push from another thread: %d %v, want 409", status, body)
	}
	if raw := fmt.Sprint(body); strings.Contains(raw, runID) {
		t.Errorf("the conflict's answer gives the run id back: %s", raw)
	}
}

// readRecorder is a chunk store that records how many bytes of chunks
// each ReadChunks of a join returned.
type readRecorder struct {
	runchunks.Store
	mu    sync.Mutex
	reads []int
}

func (r *readRecorder) ReadChunks(ctx context.Context, runID string, after int64, limit, maxBytes int) ([]runchunks.Chunk, error) {
	chunks, err := r.Store.ReadChunks(ctx, runID, after, limit, maxBytes)
	size := 0
	for _, c := range chunks {
		size += len(c.Data)
	}
	if limit < 500 { // not the hub's poll (Poller), which reads its own pages
		r.mu.Lock()
		r.reads = append(r.reads, size)
		r.mu.Unlock()
	}
	return chunks, err
}

// TestReplayOfLargeChunksIsPaged: a join replaying a run of large chunks
// reads them about 4 MiB at a time, and sends them all, also when small
// chunks come first (a page sized by them would read 64 large ones).
func TestReplayOfLargeChunksIsPaged(t *testing.T) {
	f := newFixture(t, langgraph.Config{})
	const n, size = 32, 512 << 10
	state := `{"s":"` + strings.Repeat("v", size) + `"}`
	for first := 0; first < n; first += 4 {
		var chunks []string
		for range 4 {
			if first < 8 {
				chunks = append(chunks, `{"event":"values","data":{"s":"small"}}`)
				continue
			}
			chunks = append(chunks, `{"event":"values","data":`+state+`}`)
		}
		body := fmt.Sprintf(`{"thread_id":"t1","epoch":1,"first_index":%d,"chunks":[%s]`, first, strings.Join(chunks, ","))
		if first+4 == n {
			body += `,"end":{"status":"success"}`
		}
		if status, resp := f.call(t, "POST", "/api/runs/big/stream-chunks", body+"}"); status != http.StatusOK {
			t.Fatalf("push at %d: %d %v", first, status, resp)
		}
	}
	events, err := f.join(t, "big", "-1", "").rest()
	if !errors.Is(err, io.EOF) || len(events) != n+2 {
		t.Fatalf("the join sent %d events (%v), want metadata, %d chunks and the end", len(events), err, n)
	}
	f.reads.mu.Lock()
	defer f.reads.mu.Unlock()
	for i, got := range f.reads.reads {
		if got > 4<<20+size+1024 {
			t.Errorf("read %d of %d returned %d bytes of chunks", i, len(f.reads.reads), got)
		}
	}
}
