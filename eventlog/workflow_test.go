package eventlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/streams"
	"github.com/runstream/runstream/workflow"
)

type setupResult struct {
	store *memory.WorkflowStore
	hub   *live.Hub
	log   *eventlog.WorkflowLog
	run   workflow.Run
	sub   *live.Subscription
}

func setup(t *testing.T, store workflow.Store) setupResult {
	t.Helper()
	mem := memory.NewWorkflowStore()
	if store == nil {
		store = mem
	}
	v, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	hub := live.New(live.Config{})
	log := eventlog.NewWorkflowLog(store, v, hub, nil)
	ctx := t.Context()
	wf, ver, err := mem.CreateWorkflow(ctx, workflow.Workflow{ID: "wf_1", OwnerID: "u"}, workflow.Version{ID: "wv_1", Definition: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	sub := hub.Subscribe(streams.WorkflowStreamKey("run_1"), 0)
	t.Cleanup(sub.Close)
	run, _, err := log.CreateRun(ctx, workflow.Run{ID: "run_1", WorkflowID: wf.ID, VersionID: ver.ID, OwnerID: "u"},
		[]workflow.NewEvent{{Event: workflow.EventRunCreated, Data: json.RawMessage(`{"version":1,"versionId":"wv_1"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	return setupResult{store: mem, hub: hub, log: log, run: run, sub: sub}
}

func published(sub *live.Subscription) []string {
	events, _ := sub.Take()
	var out []string
	for _, e := range events {
		out = append(out, string(e.Frame))
	}
	return out
}

func TestAppendPublishesAfterCommit(t *testing.T) {
	t.Parallel()
	s := setup(t, nil)
	if got := published(s.sub); len(got) != 1 || !strings.HasPrefix(got[0], "id: 1\nevent: run.created\ndata: {\"schemaVersion\":\"1.0\"") {
		t.Fatalf("CreateRun published %q", got)
	}
	stored, err := s.log.Append(t.Context(), workflow.AppendParams{RunID: "run_1", Events: []workflow.NewEvent{
		{Event: workflow.EventRunStarted, Data: json.RawMessage(`{"startedAt":"2026-11-29T10:00:00+00:00"}`)},
		{Event: workflow.EventNodeOutputDelta, NodeID: "n1", NodeRunID: "nr1", Data: json.RawMessage(`{"channel":"text","delta":"hi"}`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := published(s.sub)
	if len(got) != 2 || len(stored) != 2 || stored[1].Seq != 3 {
		t.Fatalf("published %d frames for %d stored events", len(got), len(stored))
	}
	envJSON, _ := json.Marshal(stored[1])
	if want := "id: 3\nevent: node.output.delta\ndata: " + string(envJSON) + "\n\n"; got[1] != want {
		t.Errorf("frame\n%q\nwant\n%q", got[1], want)
	}
}

// failingStore refuses every append.
type failingStore struct{ workflow.Store }

func (failingStore) Append(context.Context, workflow.AppendParams) ([]workflow.Envelope, error) {
	return nil, runstream.Wrap(errors.New("disk full"), runstream.CodeUnavailable, "append")
}

func TestNothingIsPublishedWhenTheAppendFails(t *testing.T) {
	t.Parallel()
	s := setup(t, nil)
	published(s.sub)
	failing := eventlog.NewWorkflowLog(failingStore{s.store}, mustValidator(t), s.hub, nil)
	_, err := failing.Append(t.Context(), workflow.AppendParams{RunID: "run_1", Events: []workflow.NewEvent{
		{Event: workflow.EventRunQueued, Data: json.RawMessage(`{"queue":"q"}`)},
	}})
	if runstream.ErrorCodeOf(err) != runstream.CodeUnavailable {
		t.Fatalf("err = %v", err)
	}
	if got := published(s.sub); len(got) != 0 {
		t.Errorf("a failed append published %q", got)
	}
}

func mustValidator(t *testing.T) *contracts.Validator {
	v, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestInvalidEventsAreRefusedWhole(t *testing.T) {
	t.Parallel()
	s := setup(t, nil)
	published(s.sub)
	for _, tc := range []struct {
		name  string
		event workflow.NewEvent
		path  string
	}{
		{"missing required field", workflow.NewEvent{Event: workflow.EventNodeOutputDelta, NodeID: "n", Data: json.RawMessage(`{"channel":"text"}`)}, "/delta"},
		{"wrong type", workflow.NewEvent{Event: workflow.EventNodeStarted, NodeID: "n", Data: json.RawMessage(`{"attempt":"one"}`)}, "/attempt"},
		{"unknown field", workflow.NewEvent{Event: workflow.EventRunResumed, NodeID: "n", Data: json.RawMessage(`{"action":"ok","extra":1}`)}, ""},
		{"unknown event", workflow.NewEvent{Event: "run.exploded", Data: json.RawMessage(`{}`)}, ""},
		{"node event without node", workflow.NewEvent{Event: workflow.EventNodeProgress, Data: json.RawMessage(`{"phase":"p","message":"m"}`)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good := workflow.NewEvent{Event: workflow.EventRunQueued, Data: json.RawMessage(`{"queue":"q"}`)}
			_, err := s.log.Append(t.Context(), workflow.AppendParams{RunID: "run_1", Events: []workflow.NewEvent{good, tc.event}})
			e := runstream.AsError(err)
			if e == nil || e.Code != runstream.CodeInvalidArgument {
				t.Fatalf("err = %v, want INVALID_ARGUMENT", err)
			}
			if tc.path != "" {
				problems, _ := e.Details["problems"].([]contracts.Problem)
				if len(problems) == 0 || problems[0].Path != tc.path {
					t.Errorf("problems = %+v, want path %s", e.Details["problems"], tc.path)
				}
			}
			if events, _ := s.store.ListEvents(t.Context(), "run_1", 0, 100); len(events) != 1 {
				t.Errorf("%d events stored, want only run.created", len(events))
			}
			if got := published(s.sub); len(got) != 0 {
				t.Errorf("published %q", got)
			}
		})
	}
}

func TestEventsAreRedactedButTheResumeTokenStays(t *testing.T) {
	t.Parallel()
	s := setup(t, nil)
	secret := "sk-" + strings.Repeat("Ab3", 16)
	token := "rt_" + strings.Repeat("Zq9", 15)
	stored, err := s.log.Append(t.Context(), workflow.AppendParams{RunID: "run_1", Events: []workflow.NewEvent{
		{Event: workflow.EventNodeToolStarted, NodeID: "n", NodeRunID: "nr", Data: json.RawMessage(
			`{"toolCallId":"c1","name":"http_get","inputSummary":{"url":"https://api.example.com","headers":{"Authorization":"Bearer ` + secret + `"},"note":"key ` + secret + `"}}`)},
		{Event: workflow.EventRunAwaitingInput, NodeID: "n", NodeRunID: "nr", Data: json.RawMessage(
			`{"formSchema":{"type":"object","properties":{"password":{"type":"string"}}},"actions":["approve"],"resumeToken":"` + token + `"}`)},
	}, ResumeToken: &workflow.ResumeToken{RunID: "run_1", Hash: []byte("h"), Actions: []string{"approve"}, ExpiresAt: time.Now().Add(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	tool := string(stored[0].Data)
	if strings.Contains(tool, secret) || !strings.Contains(tool, "[REDACTED:") {
		t.Errorf("tool data not redacted: %s", tool)
	}
	if !strings.Contains(string(stored[1].Data), `"resumeToken":"`+token+`"`) {
		t.Errorf("the resume token was removed: %s", stored[1].Data)
	}
	if !strings.Contains(string(stored[1].Data), `"properties":{"password":{"type":"string"}}`) {
		t.Errorf("the form schema was redacted: %s", stored[1].Data)
	}
	events, _ := s.store.ListEvents(t.Context(), "run_1", 0, 100)
	for _, e := range events {
		if strings.Contains(string(e.Data), secret) {
			t.Errorf("stored event %d holds the secret", e.Seq)
		}
	}
	for _, frame := range published(s.sub) {
		if strings.Contains(frame, secret) {
			t.Errorf("a published frame holds the secret")
		}
	}
}

func TestStoredDataIsCompact(t *testing.T) {
	t.Parallel()
	s := setup(t, nil)
	stored, err := s.log.Append(t.Context(), workflow.AppendParams{RunID: "run_1", Events: []workflow.NewEvent{
		{Event: workflow.EventRunQueued, Data: json.RawMessage("{ \"queue\" :\n \"a b\" }")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(stored[0].Data); got != `{"queue":"a b"}` {
		t.Errorf("stored data %q, want it compact", got)
	}
	ev, err := streams.WorkflowFrame(stored[0])
	if err != nil || strings.Count(string(ev.Frame), "\n") != 4 {
		t.Errorf("frame %q (%v): want id, event, data lines and the blank line", ev.Frame, err)
	}
}

// unframableStore stores appends, then returns them with an event type no
// frame has, as a store that does not round-trip an envelope would.
type unframableStore struct{ workflow.Store }

func (s unframableStore) Append(ctx context.Context, p workflow.AppendParams) ([]workflow.Envelope, error) {
	stored, err := s.Store.Append(ctx, p)
	if err == nil {
		stored[len(stored)-1].Event = "run.exploded"
	}
	return stored, err
}

// TestUnframableEventIsLogged: a stored envelope the log cannot render for
// the hub is logged with its run and seq, not dropped silently; its
// followers read it from the store.
func TestUnframableEventIsLogged(t *testing.T) {
	t.Parallel()
	s := setup(t, nil)
	var logs bytes.Buffer
	hub := live.New(live.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	log := eventlog.NewWorkflowLog(unframableStore{s.store}, mustValidator(t), hub, nil)
	if _, err := log.Append(t.Context(), workflow.AppendParams{RunID: "run_1", Events: []workflow.NewEvent{
		{Event: workflow.EventRunQueued, Data: json.RawMessage(`{"queue":"q"}`)},
	}}); err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); !strings.Contains(got, "level=ERROR") || !strings.Contains(got, "run_id=run_1") || !strings.Contains(got, "seq=2") {
		t.Errorf("log = %q, want an error with run_id=run_1 and seq=2", got)
	}
}

// TestOversizedWorkflowEventsAreRefused: an event whose data exceeds the
// log's bound (256 KiB by default) is refused with PAYLOAD_TOO_LARGE and
// nothing of its batch is stored or published.
func TestOversizedWorkflowEventsAreRefused(t *testing.T) {
	t.Parallel()
	s := setup(t, nil)
	published(s.sub)
	progress := func(n int) workflow.NewEvent {
		return workflow.NewEvent{Event: workflow.EventNodeProgress, NodeID: "n", NodeRunID: "nr_1",
			Data: json.RawMessage(`{"phase":"p","message":"` + strings.Repeat("m", n) + `","percent":null}`)}
	}
	for _, tc := range []struct {
		limit, size int
	}{{0, workflow.DefaultMaxEventBytes}, {1000, 1000}} {
		s.log.MaxEventBytes = tc.limit
		_, err := s.log.Append(t.Context(), workflow.AppendParams{RunID: "run_1", Events: []workflow.NewEvent{progress(10), progress(tc.size)}})
		if runstream.ErrorCodeOf(err) != runstream.CodePayloadTooLarge {
			t.Errorf("limit %d: err = %v, want PAYLOAD_TOO_LARGE", tc.limit, err)
		}
		if events, _ := s.store.ListEvents(t.Context(), "run_1", 0, 100); len(events) != 1 {
			t.Errorf("limit %d: %d events stored, want only run.created", tc.limit, len(events))
		}
		if got := published(s.sub); len(got) != 0 {
			t.Errorf("limit %d: published %q", tc.limit, got)
		}
	}
}

// TestDeltaRedactedAsContinuation: a node.output.delta continues the text
// before it, so a name at its start is prose, while the secrets in it are
// redacted as anywhere.
func TestDeltaRedactedAsContinuation(t *testing.T) {
	t.Parallel()
	s := setup(t, nil)
	secret := "sk-" + strings.Repeat("Ab3", 16)
	prose := "password: go to settings and click reset."
	stored, err := s.log.Append(t.Context(), workflow.AppendParams{RunID: "run_1", Events: []workflow.NewEvent{
		{Event: workflow.EventNodeOutputDelta, NodeID: "n", NodeRunID: "nr", Data: json.RawMessage(`{"channel":"text","delta":"` + prose + `"}`)},
		{Event: workflow.EventNodeOutputDelta, NodeID: "n", NodeRunID: "nr", Data: json.RawMessage(`{"channel":"text","delta":"key ` + secret + `\npassword: hunter2\n"}`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(stored[0].Data); got != `{"channel":"text","delta":"`+prose+`"}` {
		t.Errorf("prose stored as %s", got)
	}
	if got := string(stored[1].Data); got != `{"channel":"text","delta":"key [REDACTED:openai_key]\npassword: [REDACTED:key]\n"}` {
		t.Errorf("secrets stored as %s", got)
	}
	// A member given twice is stored once, as decoded and redacted.
	stored, err = s.log.Append(t.Context(), workflow.AppendParams{RunID: "run_1", Events: []workflow.NewEvent{
		{Event: workflow.EventNodeOutputDelta, NodeID: "n", NodeRunID: "nr", Data: json.RawMessage(`{"channel":"text","delta":"key ` + secret + `","delta":"ok"}`)},
	}})
	if err == nil && string(stored[0].Data) != `{"channel":"text","delta":"ok"}` {
		t.Errorf("a delta given twice stored as %s", stored[0].Data)
	}
}
