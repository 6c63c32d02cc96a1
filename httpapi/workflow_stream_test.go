package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/internal/apitest"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/sse"
	"github.com/runstream/runstream/streams"
	"github.com/runstream/runstream/workflow"
	"github.com/runstream/runstream/workflowsvc"
)

var testValidator = func() *contracts.Validator {
	v, err := contracts.NewValidator()
	if err != nil {
		panic(err)
	}
	return v
}()

// workflowEnv is a server with a memory workflow store, a hub and the event
// log, and one run owned by the local user.
type workflowEnv struct {
	store *memory.WorkflowStore
	hub   *live.Hub
	log   *eventlog.WorkflowLog
	api   *Server
	srv   *apitest.Server
	run   workflow.Run
}

func newWorkflowEnv(t testing.TB, stream StreamConfig) *workflowEnv {
	t.Helper()
	env := &workflowEnv{store: memory.NewWorkflowStore()}
	env.hub = live.New(live.Config{Poll: streams.Poller(env.store), PollInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	go env.hub.Run(ctx)
	env.log = eventlog.NewWorkflowLog(env.store, testValidator, env.hub, nil)
	env.api = New(Config{Stream: stream}, readOnlyWorkflows(env.store, env.hub), nil)
	t.Cleanup(cancel)
	env.srv = apitest.Serve(t, env.api, env.api)
	env.run = env.createRun(t, "run_"+strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	return env
}

func (env *workflowEnv) createRun(t testing.TB, id string) workflow.Run {
	t.Helper()
	ctx := t.Context()
	wf, v, err := env.store.CreateWorkflow(ctx, workflow.Workflow{ID: "wf_" + id, OwnerID: LocalUser, Name: "test"},
		workflow.Version{ID: "wv_" + id, Definition: json.RawMessage(`{"name":"test","nodes":[]}`)})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := env.log.CreateRun(ctx, workflow.Run{ID: id, WorkflowID: wf.ID, VersionID: v.ID, OwnerID: LocalUser, Input: json.RawMessage(`{}`)},
		[]workflow.NewEvent{
			{Event: workflow.EventRunCreated, Data: json.RawMessage(`{"version":1,"versionId":"` + v.ID + `"}`)},
			{Event: workflow.EventRunQueued, Data: json.RawMessage(`{"queue":"default"}`)},
		})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// progress appends n node.progress events and returns the last seq.
func (env *workflowEnv) progress(t *testing.T, n int) int64 {
	t.Helper()
	var last int64
	for i := 0; i < n; i++ {
		stored, err := env.log.Append(context.Background(), workflow.AppendParams{RunID: env.run.ID, Events: []workflow.NewEvent{{
			Event: workflow.EventNodeProgress, NodeID: "n1", NodeRunID: "nr1",
			Data: json.RawMessage(fmt.Sprintf(`{"phase":"work","message":"step %d","percent":null}`, i)),
		}}})
		if err != nil {
			t.Error(err)
			return last
		}
		last = stored[0].Seq
	}
	return last
}

func (env *workflowEnv) complete(t testing.TB) int64 {
	t.Helper()
	stored, err := env.log.Append(context.Background(), workflow.AppendParams{RunID: env.run.ID, Events: []workflow.NewEvent{{
		Event: workflow.EventRunCompleted, Data: json.RawMessage(`{"output":{"ok":true},"artifacts":[]}`),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return stored[0].Seq
}

type streamConn struct {
	resp   *http.Response
	reader *sse.Reader
}

func (env *workflowEnv) open(t *testing.T, query string, header ...string) *streamConn {
	t.Helper()
	resp := apitest.Get(t, env.srv.URL+"/api/workflows/runs/"+env.run.ID+"/stream"+query, header...)
	return &streamConn{resp: resp, reader: sse.NewReader(resp.Body)}
}

// next reads the next event frame.
func (c *streamConn) next(t *testing.T) (sse.Event, workflow.Envelope) {
	t.Helper()
	ev, err := c.reader.Next()
	if err != nil {
		t.Fatalf("read frame: %v", err)
	}
	var env workflow.Envelope
	if err := json.Unmarshal([]byte(ev.Data), &env); err != nil {
		t.Fatalf("frame data is not an envelope: %v\n%s", err, ev.Data)
	}
	if ev.HasID && ev.ID != strconv.FormatInt(env.Seq, 10) {
		t.Fatalf("id %q does not match seq %d", ev.ID, env.Seq)
	}
	if ev.Type() != string(env.Event) {
		t.Fatalf("event %q does not match envelope event %q", ev.Type(), env.Event)
	}
	return ev, env
}

// seqs reads n frames and returns their seqs.
func (c *streamConn) seqs(t *testing.T, n int) []int64 {
	t.Helper()
	out := make([]int64, 0, n)
	for len(out) < n {
		_, env := c.next(t)
		out = append(out, env.Seq)
	}
	return out
}

// expectEOF asserts the server closes the stream without another frame.
func (c *streamConn) expectEOF(t *testing.T) {
	t.Helper()
	ev, err := c.reader.Next()
	if err != io.EOF {
		t.Fatalf("want the stream closed, got %+v, %v", ev, err)
	}
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func equalSeqs(a, b []int64) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func TestStreamReplayAndCursorPrecedence(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{ReplayPage: 3})
	env.progress(t, 8) // seqs 3..10
	last := env.complete(t)
	for _, tc := range []struct {
		name   string
		query  string
		header []string
		from   int64
	}{
		{"from zero", "", nil, 1},
		{"after", "?after=4", nil, 5},
		{"after zero", "?after=0", nil, 1},
		{"Last-Event-ID", "", []string{"Last-Event-ID", "7"}, 8},
		{"Last-Event-ID beats after", "?after=2", []string{"Last-Event-ID", "9"}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := env.open(t, tc.query, tc.header...)
			if c.resp.StatusCode != 200 {
				t.Fatalf("status %d", c.resp.StatusCode)
			}
			got := c.seqs(t, int(last-tc.from+1))
			if want := seqRange(tc.from, last); !equalSeqs(got, want) {
				t.Fatalf("seqs = %v, want %v", got, want)
			}
			c.expectEOF(t)
			if c.reader.Retry() != 3*time.Second {
				t.Errorf("retry hint = %v, want 3s", c.reader.Retry())
			}
		})
	}
}

func TestStreamHeaders(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{})
	c := env.open(t, "")
	h := c.resp.Header
	for key, want := range map[string]string{
		"Content-Type":          "text/event-stream",
		"Cache-Control":         "no-cache",
		"X-Accel-Buffering":     "no",
		"X-Workflow-Run-Status": "queued",
	} {
		if got := h.Get(key); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	if enc := h.Get("Content-Encoding"); enc != "" {
		t.Errorf("Content-Encoding = %q, want none", enc)
	}
	// The first bytes arrive before any event: the retry hint, flushed at once.
	if got := c.seqs(t, 2); !equalSeqs(got, []int64{1, 2}) {
		t.Errorf("seqs = %v", got)
	}
}

func TestStreamLiveAfterReplayWithoutDuplicates(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{ReplayPage: 2})
	env.progress(t, 20)
	c := env.open(t, "")
	// Events committed while the follower replays and after it is live.
	var wg sync.WaitGroup
	wg.Go(func() { env.progress(t, 50) })
	got := c.seqs(t, 22)
	wg.Wait()
	last := env.complete(t)
	got = append(got, c.seqs(t, int(last)-22)...)
	if want := seqRange(1, last); !equalSeqs(got, want) {
		t.Fatalf("seqs = %v, want %v", got, want)
	}
	c.expectEOF(t)
}

func TestStreamResumeAfterDroppedConnection(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{})
	env.progress(t, 5) // 3..7
	c := env.open(t, "")
	got := c.seqs(t, 4)
	c.resp.Body.Close() // the connection drops after seq 4
	env.progress(t, 5)  // 8..12, committed while disconnected
	last := env.complete(t)
	c2 := env.open(t, "", "Last-Event-ID", strconv.FormatInt(got[len(got)-1], 10))
	rest := c2.seqs(t, int(last-4))
	if want := seqRange(5, last); !equalSeqs(rest, want) {
		t.Fatalf("after resume: %v, want %v", rest, want)
	}
	c2.expectEOF(t)
}

func TestStreamTerminalCursorsClose(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{})
	last := env.complete(t)
	c := env.open(t, "?after="+strconv.FormatInt(last, 10))
	if c.resp.Header.Get("X-Workflow-Run-Status") != "completed" {
		t.Errorf("status header = %q", c.resp.Header.Get("X-Workflow-Run-Status"))
	}
	c.expectEOF(t)
}

// A cursor past the run's last event is no id the stream sent: it is
// refused before any byte, naming the last seq, on a finished run and on
// a live one (whose follower would otherwise skip the events up to the
// cursor, the terminal one included, and never close). A cursor at the
// last event is taken.
func TestStreamCursorPastTheEnd(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{})
	live := env.run.LastSeq
	for _, header := range [][]string{{"Last-Event-ID", strconv.FormatInt(live+1, 10)}, {"Last-Event-ID", "9223372036854775807"}} {
		c := env.open(t, "", header...)
		var body errorBody
		if err := json.NewDecoder(c.resp.Body).Decode(&body); err != nil || c.resp.StatusCode != 400 || body.Code != runstream.CodeWorkflowInvalidCursor ||
			fmt.Sprint(body.Details["last_seq"]) != strconv.FormatInt(live, 10) {
			t.Errorf("live run, %s: %d %+v (%v); want 400 WORKFLOW_INVALID_CURSOR with last_seq %d", header[1], c.resp.StatusCode, body, err, live)
		}
		if strings.Contains(body.Message, header[1]) {
			t.Errorf("live run, %s: the message %q gives the caller's cursor back", header[1], body.Message)
		}
	}
	if c := env.open(t, "", "Last-Event-ID", strconv.FormatInt(live, 10)); c.resp.StatusCode != 200 {
		t.Errorf("a cursor at the last event: %d", c.resp.StatusCode)
	}
	last := env.complete(t)
	if c := env.open(t, "?after="+strconv.FormatInt(last+10, 10)); c.resp.StatusCode != 400 {
		t.Errorf("finished run, a cursor past its end: %d, want 400", c.resp.StatusCode)
	}
}

// The event page takes the stream's cursors: one past the run's last
// event is refused with its last seq, one at it answers an empty page,
// and one past a stale read of the run is checked against a fresh one.
func TestEventPageCursorPastTheEnd(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{})
	last := env.run.LastSeq
	page := func(after int64) (*http.Response, errorBody) {
		t.Helper()
		resp, err := http.Get(env.srv.URL + "/api/workflows/runs/" + env.run.ID + "/events?after=" + strconv.FormatInt(after, 10))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body errorBody
		json.NewDecoder(resp.Body).Decode(&body)
		return resp, body
	}
	if resp, body := page(last + 1); resp.StatusCode != 400 || body.Code != runstream.CodeWorkflowInvalidCursor ||
		fmt.Sprint(body.Details["last_seq"]) != strconv.FormatInt(last, 10) {
		t.Errorf("after the last seq + 1: %d %+v; want 400 WORKFLOW_INVALID_CURSOR with last_seq %d", resp.StatusCode, body, last)
	}
	if resp, _ := page(last); resp.StatusCode != 200 {
		t.Errorf("after the last seq: %d, want 200", resp.StatusCode)
	}
	env.progress(t, 1)
	store := &staleFirstRead{Store: env.store}
	env.api.workflows = workflowsvc.New(store, nil, env.hub, workflowsvc.Config{})
	if resp, body := page(last + 1); resp.StatusCode != 200 {
		t.Errorf("after the last seq, past a stale read of the run: %d %+v, want 200", resp.StatusCode, body)
	}
}

// staleFirstRead is a store whose first GetRun answers the run as it was
// before its last event, as a read shared by streams opening at once may,
// when it started before the event a client resumes after was committed.
type staleFirstRead struct {
	workflow.Store
	reads atomic.Int32
}

func (s *staleFirstRead) GetRun(ctx context.Context, id string, owner runstream.Owner) (workflow.Run, error) {
	run, err := s.Store.GetRun(ctx, id, owner)
	if s.reads.Add(1) == 1 {
		run.LastSeq--
	}
	return run, err
}

// A cursor past a stale read of the run is checked against a fresh one:
// a client resuming after the run's last event is not refused.
func TestStreamCursorPastAStaleRead(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{})
	env.progress(t, 1)
	last := env.run.LastSeq + 1
	store := &staleFirstRead{Store: env.store}
	env.api.workflows = workflowsvc.New(store, nil, env.hub, workflowsvc.Config{})
	if c := env.open(t, "", "Last-Event-ID", strconv.FormatInt(last, 10)); c.resp.StatusCode != 200 {
		t.Errorf("a cursor at the last event, past a stale read of the run: %d, want 200", c.resp.StatusCode)
	}
	if n := store.reads.Load(); n < 2 {
		t.Errorf("%d reads of the run, want the stale one and a fresh one", n)
	}
}

func TestStreamSynthesisedTerminal(t *testing.T) {
	t.Parallel()
	for _, status := range []workflow.RunStatus{workflow.StatusFailed, workflow.StatusCancelled, workflow.StatusCompleted} {
		t.Run(string(status), func(t *testing.T) {
			t.Parallel()
			env := newWorkflowEnv(t, StreamConfig{})
			art := workflow.Artifact{ID: "art_1", RunID: env.run.ID, NodeID: "n1", Name: "report.md", MimeType: "text/markdown", SizeBytes: 5,
				SHA256: strings.Repeat("ab", 32), CreatedAt: time.Now()}
			created, _ := json.Marshal(workflow.ArtifactCreated{ArtifactID: art.ID, Name: art.Name, MimeType: art.MimeType, SizeBytes: art.SizeBytes, SHA256: art.SHA256})
			if _, err := env.log.Append(t.Context(), workflow.AppendParams{RunID: env.run.ID, Artifacts: []workflow.Artifact{art},
				Events: []workflow.NewEvent{{Event: workflow.EventArtifactCreated, NodeID: "n1", NodeRunID: "nr1", Data: created}}}); err != nil {
				t.Fatal(err)
			}
			// The run is terminal in the store without a terminal event, as
			// after a crash between the status change and the event.
			store := terminalWithoutEvent{Store: env.store, status: status}
			if status == workflow.StatusFailed {
				// The run's stored error names the node that failed.
				store.err = json.RawMessage(`{"code":"` + string(runstream.CodeWorkflowNodeTimeout) + `","message":"n1 timed out","retryable":true,"nodeId":"n1"}`)
			}
			env.api.workflows = workflowsvc.New(store, nil, env.hub, workflowsvc.Config{})
			c := env.open(t, "")
			c.seqs(t, 3)
			ev, envl := c.next(t)
			if ev.HasID {
				t.Errorf("synthesised frame has an id line %q", ev.ID)
			}
			want, _ := workflow.TerminalEventFor(status)
			// Seq 4, after the stored ones: a client that drops seqs it
			// applied (the web UI) takes it.
			if envl.Event != want || envl.Seq != 4 {
				t.Errorf("synthesised %s seq %d, want %s seq 4", envl.Event, envl.Seq, want)
			}
			var data map[string]any
			json.Unmarshal(envl.Data, &data)
			if data["synthesised"] != true {
				t.Errorf("data = %s, want synthesised true", envl.Data)
			}
			if status == workflow.StatusFailed && data["failedNodeId"] != "n1" {
				t.Errorf("data = %s, want failedNodeId n1, the node its error names", envl.Data)
			}
			// A completed run lists the artifact its events announced, as
			// the engine's run.completed would.
			if want := `[{"artifactId":"art_1","mimeType":"text/markdown","name":"report.md","nodeId":"n1","sha256":"` + art.SHA256 + `","sizeBytes":5}]`; status == workflow.StatusCompleted && string(mustMarshal(t, data["artifacts"])) != want {
				t.Errorf("artifacts = %s, want %s", mustMarshal(t, data["artifacts"]), want)
			}
			if err := testValidator.ValidateWorkflowData(string(envl.Event), envl.Data); err != nil {
				t.Errorf("synthesised data breaks the contract: %v", err)
			}
			c.expectEOF(t)
			if stored, _ := env.store.ListEvents(t.Context(), env.run.ID, 0, 100); len(stored) != 3 {
				t.Errorf("the synthesised frame was stored: %d events", len(stored))
			}
		})
	}
}

// terminalWithoutEvent reports its runs in a terminal status that no stored
// event put them in.
type terminalWithoutEvent struct {
	workflow.Store
	status workflow.RunStatus
	err    json.RawMessage // the run's error, when set
}

func (s terminalWithoutEvent) GetRun(ctx context.Context, id string, owner runstream.Owner) (workflow.Run, error) {
	run, err := s.Store.GetRun(ctx, id, owner)
	run.Status = s.status
	if s.err != nil {
		run.Error = s.err
	}
	return run, err
}

func TestStreamErrorsBeforeAnyBytes(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{})
	cases := []struct {
		name   string
		query  string
		header []string
		status int
		code   runstream.ErrorCode
	}{
		{"negative", "?after=-1", nil, 400, runstream.CodeWorkflowInvalidCursor},
		{"letters", "?after=abc", nil, 400, runstream.CodeWorkflowInvalidCursor},
		{"exponent", "?after=1e3", nil, 400, runstream.CodeWorkflowInvalidCursor},
		{"leading space", "?after=%2012", nil, 400, runstream.CodeWorkflowInvalidCursor},
		{"leading zero", "?after=012", nil, 400, runstream.CodeWorkflowInvalidCursor},
		{"plus", "?after=%2B5", nil, 400, runstream.CodeWorkflowInvalidCursor},
		{"empty", "?after=", nil, 400, runstream.CodeWorkflowInvalidCursor},
		{"overflow", "?after=9223372036854775808", nil, 400, runstream.CodeWorkflowInvalidCursor},
		{"too long", "?after=" + strings.Repeat("1", 65), nil, 400, runstream.CodeWorkflowInvalidCursor},
		{"bad Last-Event-ID", "", []string{"Last-Event-ID", "x1"}, 400, runstream.CodeWorkflowInvalidCursor},
		{"bad Last-Event-ID good after", "?after=1", []string{"Last-Event-ID", "-3"}, 400, runstream.CodeWorkflowInvalidCursor},
		{"two afters", "?after=1&after=2", nil, 400, runstream.CodeWorkflowInvalidCursor},
		{"after and after_seq", "?after=1&after_seq=2", nil, 400, runstream.CodeWorkflowInvalidCursor},
		{"bad after_seq", "?after_seq=x", nil, 400, runstream.CodeWorkflowInvalidCursor},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := env.open(t, tc.query, tc.header...)
			if c.resp.StatusCode != tc.status || !strings.HasPrefix(c.resp.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("status %d %s", c.resp.StatusCode, c.resp.Header.Get("Content-Type"))
			}
			var body errorBody
			if err := json.NewDecoder(c.resp.Body).Decode(&body); err != nil || body.Code != tc.code {
				t.Errorf("body %+v (%v), want %s", body, err, tc.code)
			}
		})
	}
	t.Run("unknown run", func(t *testing.T) {
		resp, err := http.Get(env.srv.URL + "/api/workflows/runs/run_nope/stream")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body errorBody
		json.NewDecoder(resp.Body).Decode(&body)
		if resp.StatusCode != 404 || body.Code != runstream.CodeWorkflowRunNotFound {
			t.Errorf("status %d body %+v", resp.StatusCode, body)
		}
	})
	t.Run("max cursor parses", func(t *testing.T) {
		// It is past the run's end (TestStreamCursorPastTheEnd), not out
		// of range.
		c := env.open(t, "?after=9223372036854775807")
		var body errorBody
		if err := json.NewDecoder(c.resp.Body).Decode(&body); err != nil || c.resp.StatusCode != 400 || body.Details["last_seq"] == nil {
			t.Errorf("status %d body %+v (%v), want the cursor refused as past the end", c.resp.StatusCode, body, err)
		}
	})
}

func TestEventPages(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{})
	env.progress(t, 248) // 250 events
	get := func(query string) (int, eventPage, errorBody) {
		resp, err := http.Get(env.srv.URL + "/api/workflows/runs/" + env.run.ID + "/events" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var page eventPage
		var e errorBody
		if resp.StatusCode == 200 {
			if err := json.Unmarshal(raw, &page); err != nil {
				t.Fatal(err)
			}
		} else {
			json.Unmarshal(raw, &e)
		}
		return resp.StatusCode, page, e
	}
	code, page, _ := get("")
	if code != 200 || len(page.Events) != 100 || !page.HasMore || page.NextAfter != 100 || page.Events[0].Seq != 1 {
		t.Fatalf("default page: %d, %d events, hasMore %v, nextAfter %d", code, len(page.Events), page.HasMore, page.NextAfter)
	}
	var seen []int64
	after := int64(0)
	for {
		_, page, _ := get(fmt.Sprintf("?after=%d&limit=70", after))
		for _, e := range page.Events {
			seen = append(seen, e.Seq)
		}
		after = page.NextAfter
		if !page.HasMore {
			break
		}
	}
	if !equalSeqs(seen, seqRange(1, 250)) {
		t.Errorf("paging saw %v", seen)
	}
	if _, page, _ := get("?after=250"); len(page.Events) != 0 || page.HasMore || page.NextAfter != 250 {
		t.Errorf("past the end: %+v", page)
	}
	// after_seq is the protocol's other name of after; not both at once.
	if code, page, _ := get("?after_seq=245"); code != 200 || len(page.Events) != 5 || page.Events[0].Seq != 246 {
		t.Errorf("?after_seq=245: %d, %+v", code, page)
	}
	if code, _, e := get("?after=1&after_seq=2"); code != 400 || e.Code != runstream.CodeWorkflowInvalidCursor {
		t.Errorf("after and after_seq: %d %s", code, e.Code)
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?limit=x", "?limit=-1"} {
		if code, _, e := get(q); code != 400 || e.Code != runstream.CodeInvalidArgument {
			t.Errorf("%s: %d %s", q, code, e.Code)
		}
	}
	if code, _, e := get("?after=-1"); code != 400 || e.Code != runstream.CodeWorkflowInvalidCursor {
		t.Errorf("bad after: %d %s", code, e.Code)
	}
	if code, _, _ := get("?limit=1000"); code != 200 {
		t.Errorf("limit 1000: %d", code)
	}
}

func TestRunViewNeverContainsTheResumeToken(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{})
	const token = "rt_very_secret_resume_token_value_0123456789"
	_, err := env.log.Append(t.Context(), workflow.AppendParams{RunID: env.run.ID, Events: []workflow.NewEvent{{
		Event: workflow.EventRunAwaitingInput, NodeID: "approve", NodeRunID: "nr_a",
		Data: json.RawMessage(`{"formSchema":{"type":"object"},"actions":["approve","reject"],"resumeToken":"` + token + `"}`),
	}}, ResumeToken: &workflow.ResumeToken{RunID: env.run.ID, NodeID: "approve", Hash: []byte("h"), Actions: []string{"approve", "reject"}, ExpiresAt: time.Now().Add(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(env.srv.URL + "/api/workflows/runs/" + env.run.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(raw), `"status":"awaiting_input"`) {
		t.Fatalf("run view: %d %s", resp.StatusCode, raw)
	}
	if strings.Contains(string(raw), token) {
		t.Errorf("the run view contains the resume token: %s", raw)
	}
	// The token is in the event stream, and only there.
	c := env.open(t, "?after=2")
	if _, e := c.next(t); !strings.Contains(string(e.Data), token) {
		t.Errorf("run.awaiting_input lost its resume token: %s", e.Data)
	}
}

// TestRepeatedCatchUpsKeepFramesIntact: a follower that catches up from the
// store a second time (here after being cut) reads pages into one buffer
// while it writes the previous page from another; the frames must arrive
// whole and in order.
func TestRepeatedCatchUpsKeepFramesIntact(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{ReplayPage: 4})
	env.progress(t, 10) // seqs 3..12: the first catch-up reads pages of 4
	c := env.open(t, "")
	if got := c.seqs(t, 12); !equalSeqs(got, seqRange(1, 12)) {
		t.Fatalf("first catch-up: %v", got)
	}
	// 300 events the hub never saw, then one it sees: its poll brings the
	// 300 at once, more than the subscription holds, so the follower is
	// cut and catches up from the store again, page by page.
	for i := 0; i < 300; i++ {
		if _, err := env.store.Append(t.Context(), workflow.AppendParams{RunID: env.run.ID, Events: []workflow.NewEvent{{
			Event: workflow.EventNodeProgress, NodeID: "n1", NodeRunID: "nr1", Data: json.RawMessage(`{"phase":"p","message":"unpublished"}`),
		}}}); err != nil {
			t.Fatal(err)
		}
	}
	last := env.complete(t)
	if got := c.seqs(t, int(last-12)); !equalSeqs(got, seqRange(13, last)) {
		t.Fatalf("second catch-up: %d events, want 13..%d", len(got), last)
	}
	c.expectEOF(t)
}

// mustMarshal returns v's JSON.
func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
