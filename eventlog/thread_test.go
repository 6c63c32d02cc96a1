package eventlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/streams"
)

type threadEnv struct {
	store *memory.RunEventStore
	hub   *live.Hub
	log   *eventlog.ThreadLog
}

func newThreadEnv(t *testing.T, limits eventlog.ThreadLimits) threadEnv {
	t.Helper()
	store := memory.NewRunEventStore()
	hub := live.New(live.Config{})
	return threadEnv{store: store, hub: hub, log: eventlog.NewThreadLog(store, mustValidator(t), hub, limits)}
}

// follow subscribes to a view of thread t1.
func (env threadEnv) follow(t *testing.T, s streams.ThreadStream) *live.Subscription {
	t.Helper()
	s.ThreadID = "t1"
	sub := env.hub.Subscribe(s.Key(), 0)
	t.Cleanup(sub.Close)
	return sub
}

func (env threadEnv) rows(t *testing.T) []runevents.Record {
	t.Helper()
	recs, err := env.store.ListThreadEvents(t.Context(), runevents.ListThreadEventsParams{ThreadID: "t1", Owner: runevents.AnyOwner, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func newEvent(run string, typ runevents.EventType, content, metadata string) runevents.NewEvent {
	e := runevents.NewEvent{ThreadID: "t1", RunID: run, EventType: typ}
	if content != "" {
		e.Content = json.RawMessage(content)
	}
	if metadata != "" {
		e.Metadata = json.RawMessage(metadata)
	}
	return e
}

func aiEvent(run string) runevents.NewEvent {
	return newEvent(run, runevents.EventLLMAIResponse, `{"type":"ai","content":"hi","tool_calls":[]}`,
		`{"caller":"lead_agent","usage":{},"latency_ms":5,"llm_call_index":1}`)
}

func startEvent(run string) runevents.NewEvent {
	return newEvent(run, runevents.EventRunStart, `{"chain":null}`, `{"caller":"lead_agent"}`)
}

// shown keeps the events that view shows.
func shown(events []live.Event, view streams.ThreadStream) []live.Event {
	var out []live.Event
	for _, ev := range events {
		if view.Shows(ev) {
			out = append(out, ev)
		}
	}
	return out
}

func seqsOf(events []live.Event) []int64 {
	var out []int64
	for _, e := range events {
		out = append(out, e.Seq)
	}
	return out
}

// TestThreadAppendStoresAndPublishesEveryView: every row is published once,
// under its thread's key, with the attributes every view filters on.
func TestThreadAppendStoresAndPublishesEveryView(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t, eventlog.ThreadLimits{})
	views := map[string]streams.ThreadStream{
		"all":            {},
		"alice":          {UserID: "alice"},
		"alice ra":       {UserID: "alice", RunID: "ra"},
		"alice messages": {UserID: "alice", Category: runevents.CategoryMessage},
		"alice rb trace": {UserID: "alice", RunID: "rb", Category: runevents.CategoryTrace},
		"any rb":         {RunID: "rb"},
		"bob":            {UserID: "bob"},
	}
	subs := map[string]*live.Subscription{}
	for name, v := range views {
		subs[name] = env.follow(t, v)
	}
	recs, err := env.log.Append(t.Context(), "alice", []runevents.NewEvent{startEvent("ra"), aiEvent("ra"), startEvent("rb"), aiEvent("rb")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.log.Append(t.Context(), "", []runevents.NewEvent{startEvent("rb")}); err != nil {
		t.Fatal(err)
	}
	for i, rec := range recs {
		if rec.UserID != "alice" || rec.Seq != int64(i+1) {
			t.Errorf("record %d: owner %q seq %d", i, rec.UserID, rec.Seq)
		}
	}
	if recs[1].Category != runevents.CategoryMessage || recs[0].Category != runevents.CategoryTrace {
		t.Errorf("categories %s, %s; want them filled from the catalogue", recs[0].Category, recs[1].Category)
	}
	want := map[string][]int64{
		"all": {1, 2, 3, 4, 5}, "alice": {1, 2, 3, 4}, "alice ra": {1, 2}, "alice messages": {2, 4},
		"alice rb trace": {3}, "any rb": {3, 4, 5}, "bob": nil,
	}
	for name, sub := range subs {
		events, cut := sub.Take()
		events = shown(events, views[name])
		if cut || fmt.Sprint(seqsOf(events)) != fmt.Sprint(want[name]) {
			t.Errorf("view %s got seqs %v (cut %v), want %v", name, seqsOf(events), cut, want[name])
		}
		for _, ev := range events {
			data, _ := recs[0].MarshalJSON()
			if ev.Seq == 1 && string(ev.Frame) != "id: 1\nevent: run.start\ndata: "+string(data)+"\n\n" {
				t.Errorf("view %s: frame %q", name, ev.Frame)
			}
		}
	}
}

// fixtureEvents returns an event for every run-event fixture, keyed by the
// fixture's event type.
func fixtureEvents(t *testing.T) map[runevents.EventType]runevents.NewEvent {
	t.Helper()
	out := map[runevents.EventType]runevents.NewEvent{}
	err := fs.WalkDir(contracts.FS(), "fixtures/run_events", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		raw, err := fs.ReadFile(contracts.FS(), path)
		if err != nil {
			return err
		}
		var rec runevents.Record
		if err := json.Unmarshal(raw, &rec); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		out[rec.EventType] = runevents.NewEvent{ThreadID: "t1", RunID: "r1", EventType: rec.EventType, Content: rec.Content, Metadata: rec.Metadata}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestThreadAppendAcceptsEveryCataloguedFixture(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t, eventlog.ThreadLimits{})
	fixtures := fixtureEvents(t)
	for typ, e := range fixtures { // the legacy alias's too
		recs, err := env.log.Append(t.Context(), "u", []runevents.NewEvent{e})
		if err != nil {
			t.Errorf("fixture %s: %v", typ, err)
			continue
		}
		if want, _ := runevents.Lookup(typ); recs[0].Category != want {
			t.Errorf("fixture %s stored in category %s, want %s", typ, recs[0].Category, want)
		}
	}
	if len(fixtures) < len(runevents.Catalogue())+1 {
		t.Errorf("%d fixtures, want one per catalogued type and the middleware pattern", len(fixtures))
	}
}

func TestThreadAppendRefusesInvalidBatchesWhole(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 22)
	mw := `{"name":"n","hook":"h","action":"a","changes":{}}`
	for _, tc := range []struct {
		name  string
		event runevents.NewEvent
		path  string
	}{
		{"unknown type", newEvent("r1", "llm.ai.reply", `{}`, ""), "/events/1/event_type"},
		{"legacy alias content", newEvent("r1", runevents.EventLegacyAIMessage, `{"type":"human","content":"x","tool_calls":[]}`, `{}`), "/events/1/content/type"},
		{"legacy alias category", func() runevents.NewEvent {
			e := newEvent("r1", runevents.EventLegacyAIMessage, `{"type":"ai","content":"x","tool_calls":[]}`, `{}`)
			e.Category = runevents.CategoryTrace
			return e
		}(), "/events/1/category"},
		{"AI row without usage", newEvent("r1", runevents.EventLLMAIResponse, `{"type":"ai","content":"x","tool_calls":[]}`, `{"caller":"lead_agent"}`), "/events/1/metadata/latency_ms"},
		{"middleware tag too long", newEvent("r1", runevents.EventType("middleware:"+long), mw, ""), "/events/1/event_type"},
		{"middleware without tag", newEvent("r1", "middleware:", mw, ""), "/events/1/event_type"},
		{"line break in the tag", newEvent("r1", "middleware:a\nb", mw, ""), "/events/1/event_type"},
		{"wrong category", func() runevents.NewEvent { e := aiEvent("r1"); e.Category = runevents.CategoryTrace; return e }(), "/events/1/category"},
		{"content schema", newEvent("r1", runevents.EventLLMAIResponse, `{"type":"ai","content":"x"}`, `{"caller":"c","usage":{},"latency_ms":1,"llm_call_index":1}`), "/events/1/content/tool_calls"},
		{"metadata schema", newEvent("r1", runevents.EventLLMAIResponse, `{"type":"ai","content":"x","tool_calls":[]}`, `{"caller":"c","usage":{},"latency_ms":-1,"llm_call_index":1}`), "/events/1/metadata/latency_ms"},
		{"metadata not an object", newEvent("r1", runevents.EventLLMToolResult, `{"type":"tool","content":"x"}`, `[1]`), "/events/1/metadata"},
		{"missing content", newEvent("r1", runevents.EventRunStart, "", `{"caller":"c"}`), "/events/1/content"},
		{"bad run id", func() runevents.NewEvent { e := aiEvent("r1"); e.RunID = "r 1"; return e }(), "/events/1/run_id"},
		{"other thread", func() runevents.NewEvent { e := aiEvent("r1"); e.ThreadID = "t2"; return e }(), "/events/1/thread_id"},
		{"invalid JSON content", newEvent("r1", runevents.EventRunError, `"unterminated`, `{"error_type":"E"}`), "/events/1/content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newThreadEnv(t, eventlog.ThreadLimits{})
			sub := env.follow(t, streams.ThreadStream{})
			_, err := env.log.Append(t.Context(), "u", []runevents.NewEvent{aiEvent("r1"), tc.event, aiEvent("r1")})
			e := runstream.AsError(err)
			if e == nil || e.Code != runstream.CodeValidationFailed {
				t.Fatalf("err = %v, want VALIDATION_FAILED", err)
			}
			problems, _ := e.Details["problems"].([]contracts.Problem)
			if len(problems) == 0 || problems[0].Path != tc.path {
				t.Errorf("problems = %+v, want the first at %s", e.Details["problems"], tc.path)
			}
			if rows := env.rows(t); len(rows) != 0 {
				t.Errorf("%d rows stored", len(rows))
			}
			if events, _ := sub.Take(); len(events) != 0 {
				t.Errorf("%d frames published", len(events))
			}
		})
	}
}

func TestThreadAppendMiddlewareTags(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t, eventlog.ThreadLimits{})
	mw := `{"name":"n","hook":"h","action":"a","changes":{}}`
	for _, tag := range []string{"x", "title", strings.Repeat("t", 21)} {
		recs, err := env.log.Append(t.Context(), "u", []runevents.NewEvent{newEvent("r1", runevents.EventType("middleware:"+tag), mw, "")})
		if err != nil || recs[0].Category != runevents.CategoryMiddleware {
			t.Errorf("middleware:%s: %v", tag, err)
		}
	}
}

func TestThreadAppendProblemsOfEveryEvent(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t, eventlog.ThreadLimits{})
	_, err := env.log.Append(t.Context(), "u", []runevents.NewEvent{
		newEvent("r1", "nope", "", ""), aiEvent("r1"), newEvent("r1", "ai_tool_call", "", ""),
	})
	problems, _ := runstream.AsError(err).Details["problems"].([]contracts.Problem)
	var paths []string
	for _, p := range problems {
		paths = append(paths, p.Path)
	}
	if fmt.Sprint(paths) != "[/events/0/event_type /events/2/event_type]" {
		t.Errorf("problem paths %v, want one per bad event", paths)
	}
}

func TestThreadAppendLimits(t *testing.T) {
	t.Parallel()
	big := func(n int) runevents.NewEvent {
		return newEvent("r1", runevents.EventRunError, `"`+strings.Repeat("x", n-2)+`"`, `{"error_type":"E"}`)
	}
	meta := len(`{"error_type":"E"}`)
	repeat := func(e runevents.NewEvent, n int) []runevents.NewEvent {
		out := make([]runevents.NewEvent, n)
		for i := range out {
			out[i] = e
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		limits eventlog.ThreadLimits
		batch  []runevents.NewEvent
		code   runstream.ErrorCode
	}{
		{"event at the limit", eventlog.ThreadLimits{}, []runevents.NewEvent{big(256<<10 - meta)}, ""},
		{"event over the limit", eventlog.ThreadLimits{}, []runevents.NewEvent{big(256<<10 - meta + 1)}, runstream.CodePayloadTooLarge},
		{"100 events", eventlog.ThreadLimits{}, repeat(big(10), 100), ""},
		{"101 events", eventlog.ThreadLimits{}, repeat(big(10), 101), runstream.CodePayloadTooLarge},
		{"batch over 4 MiB", eventlog.ThreadLimits{}, repeat(big(250<<10), 17), runstream.CodePayloadTooLarge},
		{"batch at 4 MiB", eventlog.ThreadLimits{}, repeat(big(256<<10-meta), 16), ""},
		{"configured event limit", eventlog.ThreadLimits{MaxEventBytes: 100}, []runevents.NewEvent{big(100 - meta + 1)}, runstream.CodePayloadTooLarge},
		{"configured count", eventlog.ThreadLimits{MaxBatchEvents: 2}, repeat(big(10), 3), runstream.CodePayloadTooLarge},
		{"configured batch bytes", eventlog.ThreadLimits{MaxBatchBytes: 100}, repeat(big(50-meta), 3), runstream.CodePayloadTooLarge},
		{"empty batch", eventlog.ThreadLimits{}, nil, runstream.CodeValidationFailed},
		// A trace's content counts up to what the store keeps of it.
		{"trace over the event limit", eventlog.ThreadLimits{}, []runevents.NewEvent{
			newEvent("r1", runevents.EventLLMError, `"`+strings.Repeat("x", 300<<10)+`"`, `{}`)}, ""},
		{"trace whose metadata is over the event limit", eventlog.ThreadLimits{MaxEventBytes: 20 << 10}, []runevents.NewEvent{
			newEvent("r1", runevents.EventLLMError, `"x"`, `{"m":"`+strings.Repeat("x", 20<<10)+`"}`)}, runstream.CodePayloadTooLarge},
		// What is stored of a trace counts: the first 1,000 bytes of its
		// text, as a JSON string of six bytes per control character.
		{"trace stored over the event limit", eventlog.ThreadLimits{MaxEventBytes: 2000, MaxTraceContent: 1000}, []runevents.NewEvent{
			newEvent("r1", runevents.EventLLMError, `"`+strings.Repeat(`\u0001`, 10000)+`"`, `{}`)}, runstream.CodePayloadTooLarge},
		{"trace stored under the event limit", eventlog.ThreadLimits{MaxEventBytes: 2000, MaxTraceContent: 1000}, []runevents.NewEvent{
			newEvent("r1", runevents.EventLLMError, `"`+strings.Repeat("x", 10000)+`"`, `{}`)}, ""},
		{"trace over a batch's bytes", eventlog.ThreadLimits{MaxBatchBytes: 100 << 10}, []runevents.NewEvent{
			newEvent("r1", runevents.EventLLMError, `"`+strings.Repeat("x", 200<<10)+`"`, `{}`)}, runstream.CodePayloadTooLarge},
		// Under the limit as sent, over it once each "a" is a redaction marker.
		{"event over the limit once redacted", eventlog.ThreadLimits{MaxEventBytes: 2000}, []runevents.NewEvent{
			newEvent("r1", runevents.EventRunError, `""`, `{"error_type":"E","l":[`+strings.Repeat(`{"password":"a"},`, 100)+`{}]}`)}, runstream.CodePayloadTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newThreadEnv(t, tc.limits)
			_, err := env.log.Append(t.Context(), "u", tc.batch)
			if got := runstream.ErrorCodeOf(err); got != tc.code {
				t.Fatalf("code %q (%v), want %q", got, err, tc.code)
			}
			if n := len(env.rows(t)); (err == nil && n != len(tc.batch)) || (err != nil && n != 0) {
				t.Errorf("%d rows stored", n)
			}
		})
	}
}

// TestThreadAppendTruncatesLongTraces: a trace event above the event limit
// is stored with its content truncated to the store's trace limit and the
// truncation in its metadata, as DeerFlow stores it; its secrets are
// redacted before the content is cut, so a cut cannot keep part of one.
func TestThreadAppendTruncatesLongTraces(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t, eventlog.ThreadLimits{})
	secret := "sk-" + strings.Repeat("Ab3", 16)
	at := runevents.DefaultMaxTraceContent - 10 // the cut falls inside the secret
	content := `"` + strings.Repeat("x", at-5) + " key " + secret + " " + strings.Repeat("y", 300<<10) + `"`
	recs, err := env.log.Append(t.Context(), "u", []runevents.NewEvent{newEvent("r1", runevents.EventLLMError, content, `{}`)})
	if err != nil {
		t.Fatal(err)
	}
	var text string
	var meta map[string]any
	if err := json.Unmarshal(recs[0].Content, &text); err != nil || json.Unmarshal(recs[0].Metadata, &meta) != nil {
		t.Fatalf("stored %.80s / %s: %v", recs[0].Content, recs[0].Metadata, err)
	}
	if len(text) > runevents.DefaultMaxTraceContent || meta["content_truncated"] != true {
		t.Errorf("stored %d bytes of content, metadata %s; want at most %d and content_truncated", len(text), recs[0].Metadata, runevents.DefaultMaxTraceContent)
	}
	if strings.Contains(text, secret[:8]) || strings.Contains(text, "Ab3Ab3") {
		t.Errorf("the stored content keeps part of the secret: %q", text[max(0, at-20):])
	}
}

func TestThreadAppendRedacts(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t, eventlog.ThreadLimits{})
	sub := env.follow(t, streams.ThreadStream{})
	secret := "sk-" + strings.Repeat("Ab3", 16)
	e := newEvent("r1", runevents.EventLLMToolResult, `{"type":"tool","content":"key `+secret+`"}`, `{"auth_token":"tok-123456","caller":"lead_agent"}`)
	in := string(e.Content)
	recs, err := env.log.Append(t.Context(), "u", []runevents.NewEvent{e})
	if err != nil {
		t.Fatal(err)
	}
	if string(e.Content) != in {
		t.Errorf("the caller's event was modified")
	}
	stored := env.rows(t)
	frames, _ := sub.Take()
	for what, text := range map[string]string{
		"returned": string(recs[0].Content) + string(recs[0].Metadata), "stored": string(stored[0].Content) + string(stored[0].Metadata),
		"published": string(frames[0].Frame),
	} {
		if strings.Contains(text, secret) || strings.Contains(text, "tok-123456") || !strings.Contains(text, "[REDACTED:") {
			t.Errorf("%s record not redacted: %s", what, text)
		}
	}
}

func TestThreadAppendIfAbsent(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t, eventlog.ThreadLimits{})
	sub := env.follow(t, streams.ThreadStream{UserID: "u"})
	delivery := newEvent("r1", runevents.EventRunDelivery, `{"presented":0,"paths":[],"by_tool":{}}`, "")
	first, created, err := env.log.AppendIfAbsent(t.Context(), "u", delivery)
	if err != nil || !created || first.Category != runevents.CategoryOutputs || first.UserID != "u" {
		t.Fatalf("first = %+v created %v, %v", first, created, err)
	}
	again, created, err := env.log.AppendIfAbsent(t.Context(), "u", delivery)
	if err != nil || created || again.Seq != first.Seq {
		t.Fatalf("second = seq %d created %v, %v; want the first row", again.Seq, created, err)
	}
	if events, _ := sub.Take(); fmt.Sprint(seqsOf(events)) != "[1]" {
		t.Errorf("published %v, want only the created row", seqsOf(events))
	}
	_, _, err = env.log.AppendIfAbsent(t.Context(), "u", newEvent("r1", "ai_tool_call", "", ""))
	if runstream.ErrorCodeOf(err) != runstream.CodeValidationFailed {
		t.Errorf("singleton of an unknown type: %v", err)
	}
}

// failingRunEvents refuses every write.
type failingRunEvents struct{ *memory.RunEventStore }

func (failingRunEvents) PutBatch(context.Context, []runevents.NewEvent) ([]runevents.Record, error) {
	return nil, runstream.Wrap(errors.New("disk full"), runstream.CodeUnavailable, "append")
}

func TestThreadNothingPublishedWhenTheAppendFails(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t, eventlog.ThreadLimits{})
	log := eventlog.NewThreadLog(failingRunEvents{env.store}, mustValidator(t), env.hub, eventlog.ThreadLimits{})
	sub := env.follow(t, streams.ThreadStream{})
	if _, err := log.Append(t.Context(), "u", []runevents.NewEvent{aiEvent("r1")}); runstream.ErrorCodeOf(err) != runstream.CodeUnavailable {
		t.Fatalf("err = %v", err)
	}
	if events, _ := sub.Take(); len(events) != 0 {
		t.Errorf("a failed append published %v", seqsOf(events))
	}
}

func TestStreamPollerReadsThreadViews(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t, eventlog.ThreadLimits{})
	ctx := t.Context()
	if _, err := env.log.Append(ctx, "alice", []runevents.NewEvent{startEvent("ra"), aiEvent("ra"), aiEvent("rb")}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.log.Append(ctx, "bob", []runevents.NewEvent{aiEvent("rb")}); err != nil {
		t.Fatal(err)
	}
	poll := streams.StreamPoller(memory.NewWorkflowStore(), env.store)
	for _, tc := range []struct {
		view  streams.ThreadStream
		after int64
		want  string
	}{
		{streams.ThreadStream{ThreadID: "t1"}, 0, "[1 2 3 4]"},
		{streams.ThreadStream{ThreadID: "t1"}, 2, "[3 4]"},
		{streams.ThreadStream{ThreadID: "t1", UserID: "alice"}, 0, "[1 2 3]"},
		{streams.ThreadStream{ThreadID: "t1", UserID: "bob"}, 0, "[4]"},
		{streams.ThreadStream{ThreadID: "t1", UserID: "alice", Category: runevents.CategoryMessage}, 0, "[2 3]"},
		{streams.ThreadStream{ThreadID: "t1", RunID: "rb"}, 0, "[3 4]"},
		{streams.ThreadStream{ThreadID: "t2"}, 0, "[]"},
	} {
		events, err := poll(ctx, tc.view.Key(), tc.after)
		events = shown(events, tc.view)
		if err != nil || fmt.Sprint(seqsOf(events)) != tc.want && !(tc.want == "[]" && len(events) == 0) {
			t.Errorf("poll %s after %d = %v, %v; want %s", tc.view.Key(), tc.after, seqsOf(events), err, tc.want)
		}
	}
	if _, err := poll(ctx, "thread:t1?user=alice", 0); err == nil {
		t.Error("poll of a malformed thread key succeeded")
	}
	if _, err := streams.Poller(memory.NewWorkflowStore())(ctx, "thread:t1", 0); err == nil {
		t.Error("the workflow-only poller served a thread key")
	}
}

// unframableRunEvents stores batches, then returns their last record with
// an event type no frame has.
type unframableRunEvents struct{ *memory.RunEventStore }

func (s unframableRunEvents) PutBatch(ctx context.Context, events []runevents.NewEvent) ([]runevents.Record, error) {
	recs, err := s.RunEventStore.PutBatch(ctx, events)
	if err == nil {
		recs[len(recs)-1].EventType = "bad\ntype"
	}
	return recs, err
}

// TestThreadUnframableRecordIsLogged: a stored record the log cannot
// render for the hub is logged with its thread, run and seq, and the
// others of its batch are published.
func TestThreadUnframableRecordIsLogged(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	store := memory.NewRunEventStore()
	hub := live.New(live.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	env := threadEnv{store: store, hub: hub}
	log := eventlog.NewThreadLog(unframableRunEvents{store}, mustValidator(t), hub, eventlog.ThreadLimits{})
	sub := env.follow(t, streams.ThreadStream{})
	if _, err := log.Append(t.Context(), "u", []runevents.NewEvent{startEvent("r1"), aiEvent("r1")}); err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); !strings.Contains(got, "level=ERROR") || !strings.Contains(got, "thread_id=t1") ||
		!strings.Contains(got, "run_id=r1") || !strings.Contains(got, "seq=2") {
		t.Errorf("log = %q, want an error with thread_id=t1, run_id=r1 and seq=2", got)
	}
	if events, _ := sub.Take(); fmt.Sprint(seqsOf(events)) != "[1]" {
		t.Errorf("published %v, want [1]", seqsOf(events))
	}
}

// callerLeavesStore cancels its caller's context while it commits, then
// answers as sqlite's group commit does to a caller whose context ended:
// with the context's error, although the rows committed.
type callerLeavesStore struct {
	*memory.RunEventStore
	leave context.CancelFunc
}

func (s callerLeavesStore) PutBatch(ctx context.Context, events []runevents.NewEvent) ([]runevents.Record, error) {
	s.leave()
	recs, err := s.RunEventStore.PutBatch(ctx, events)
	if err == nil && ctx.Err() != nil {
		return nil, runstream.Wrap(ctx.Err(), runstream.CodeUnavailable, "the call was cancelled")
	}
	return recs, err
}

func (s callerLeavesStore) AppendIdempotent(ctx context.Context, a runevents.IdempotentAppend) (runevents.IdempotentResult, error) {
	s.leave()
	res, err := s.RunEventStore.AppendIdempotent(ctx, a)
	if err == nil && ctx.Err() != nil {
		return runevents.IdempotentResult{}, runstream.Wrap(ctx.Err(), runstream.CodeUnavailable, "the call was cancelled")
	}
	return res, err
}

// An append whose caller leaves during the commit still runs to its
// outcome: it is answered with its records and published.
func TestThreadAppendOutlivesItsCaller(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t, eventlog.ThreadLimits{})
	sub := env.follow(t, streams.ThreadStream{})

	ctx, cancel := context.WithCancel(t.Context())
	log := eventlog.NewThreadLog(callerLeavesStore{env.store, cancel}, mustValidator(t), env.hub, eventlog.ThreadLimits{})
	recs, err := log.Append(ctx, "u", []runevents.NewEvent{aiEvent("r1")})
	if err != nil || len(recs) != 1 {
		t.Fatalf("Append whose caller left during the commit = %v, %v; want its record", recs, err)
	}
	ctx, cancel = context.WithCancel(t.Context())
	log = eventlog.NewThreadLog(callerLeavesStore{env.store, cancel}, mustValidator(t), env.hub, eventlog.ThreadLimits{})
	res, err := log.AppendIdempotent(ctx, runevents.IdempotentAppend{UserID: "u", Key: "k", RequestHash: []byte{1},
		Events: []runevents.NewEvent{aiEvent("r1")},
		Response: func([]runevents.Record, bool) (runevents.IdempotentResponse, error) {
			return runevents.IdempotentResponse{Status: 201, Body: []byte(`{}`)}, nil
		}})
	if err != nil || len(res.Appended) != 1 {
		t.Fatalf("AppendIdempotent whose caller left during the commit = %+v, %v; want its record", res, err)
	}
	if events, _ := sub.Take(); fmt.Sprint(seqsOf(events)) != "[1 2]" {
		t.Errorf("published %v; want [1 2]: a committed append is always published", seqsOf(events))
	}
	// A caller gone before the append starts writes nothing.
	gone, cancelGone := context.WithCancel(t.Context())
	cancelGone()
	if _, err := env.log.Append(gone, "u", []runevents.NewEvent{aiEvent("r1")}); runstream.ErrorCodeOf(err) != runstream.CodeUnavailable {
		t.Errorf("Append with an ended context: %v; want UNAVAILABLE", err)
	}
	if rows := env.rows(t); len(rows) != 2 {
		t.Errorf("%d rows; want 2", len(rows))
	}
}

// groupingStore is a store that hands its commits to OnGroupCommit, as
// SQLite's does; here the test decides what a commit holds.
type groupingStore struct {
	*memory.RunEventStore
	committed func(recs []runevents.Record)
}

func (s *groupingStore) OnGroupCommit(f func(recs []runevents.Record)) { s.committed = f }

// With a store that hands its group commits over, the log publishes what
// the store hands it, each thread's records under the thread's key in seq
// order, and no longer publishes an append itself.
func TestThreadAppendPublishesTheStoresGroupCommits(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t, eventlog.ThreadLimits{})
	store := &groupingStore{RunEventStore: env.store}
	log := eventlog.NewThreadLog(store, mustValidator(t), env.hub, eventlog.ThreadLimits{})
	if store.committed == nil {
		t.Fatal("NewThreadLog did not register with the store's group commits")
	}
	t1 := env.follow(t, streams.ThreadStream{})
	t2 := env.hub.Subscribe(streams.ThreadStream{ThreadID: "t2"}.Key(), 0)
	defer t2.Close()

	var recs []runevents.Record
	for _, thread := range []string{"t1", "t2", "t1"} {
		e := startEvent("r1")
		e.ThreadID = thread
		got, err := log.Append(t.Context(), "u", []runevents.NewEvent{e})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, got...)
	}
	if events, _ := t1.Take(); len(events) != 0 {
		t.Errorf("the appends published %v themselves", seqsOf(events))
	}
	store.committed(recs) // the three appends committed as one group
	if events, _ := t1.Take(); !reflect.DeepEqual(seqsOf(events), []int64{1, 2}) {
		t.Errorf("t1 received %v, want [1 2]", seqsOf(events))
	}
	if events, _ := t2.Take(); !reflect.DeepEqual(seqsOf(events), []int64{1}) {
		t.Errorf("t2 received %v, want [1]", seqsOf(events))
	}
}
