package threadsvc_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/internal/threadtest"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
)

// setup returns a thread service over memory stores, driven without HTTP.
func setup(t *testing.T) *threadsvc.Service { return threadtest.Service(t) }

func startEvent() runevents.NewEvent {
	return runevents.NewEvent{ThreadID: "t1", RunID: "r1", EventType: runevents.EventRunStart,
		Content: json.RawMessage(`{"chain":null}`), Metadata: json.RawMessage(`{"caller":"lead_agent"}`)}
}

// A thread is its writers': another user neither reads it nor writes to it.
func TestThreadIsItsOwners(t *testing.T) {
	t.Parallel()
	svc := setup(t)
	ctx := t.Context()
	recs, err := svc.Append(ctx, "alice", "t1", []runevents.NewEvent{startEvent()})
	if err != nil || len(recs) != 1 || recs[0].UserID != "alice" {
		t.Fatalf("alice's append = %+v, %v", recs, err)
	}
	if err := svc.RequireThread(ctx, "alice", "t1"); err != nil {
		t.Errorf("alice's thread: %v", err)
	}
	if err := svc.RequireThread(ctx, "bob", "t1"); runstream.ErrorCodeOf(err) != runstream.CodeNotFound {
		t.Errorf("bob reads alice's thread: %v, want NOT_FOUND", err)
	}
	if _, err := svc.Append(ctx, "bob", "t1", []runevents.NewEvent{startEvent()}); runstream.ErrorCodeOf(err) != runstream.CodeNotFound {
		t.Errorf("bob writes to alice's thread: %v, want NOT_FOUND", err)
	}
	if _, err := svc.Append(ctx, "bob", "t2", []runevents.NewEvent{{ThreadID: "t2", RunID: "r1", EventType: "nope"}}); !threadsvc.IsWriteError(err) {
		t.Errorf("a refused append is %v, want a WriteError", err)
	}
}

// Under a key, a batch is appended once: a retry gets the first response
// again (the records' seqs) and appends nothing, a different request under
// the key is refused, and an invalid key is refused before anything.
func TestAppendIdempotent(t *testing.T) {
	t.Parallel()
	svc := setup(t)
	ctx := t.Context()
	builds := 0
	p := threadsvc.IdempotentParams{User: "alice", ThreadID: "t1", Key: "k1", Hash: []byte("h1"),
		Events: []runevents.NewEvent{startEvent()},
		Response: func(recs []runevents.Record, _ bool) (threadsvc.Response, error) {
			builds++
			return threadsvc.Response{Status: 201, Body: []byte(fmt.Sprintf(`{"seq":%d}`, recs[0].Seq))}, nil
		}}
	first, replayed, err := svc.AppendIdempotent(ctx, p)
	if err != nil || replayed || first.Status != 201 || string(first.Body) != `{"seq":1}` {
		t.Fatalf("first = %+v replayed %v, %v", first, replayed, err)
	}
	if got, err := svc.Replay(ctx, "alice", "k1", []byte("h1")); err != nil || got == nil || string(got.Body) != `{"seq":1}` {
		t.Errorf("Replay = %+v, %v; want the first response", got, err)
	}
	again, replayed, err := svc.AppendIdempotent(ctx, p)
	if err != nil || !replayed || string(again.Body) != string(first.Body) {
		t.Errorf("retry = %+v replayed %v, %v; want the first response", again, replayed, err)
	}
	if recs, err := svc.RunEvents(ctx, "alice", runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Limit: 10}); err != nil || len(recs) != 1 {
		t.Errorf("%d rows after the retry (%v); want the batch once", len(recs), err)
	}
	p.Hash = []byte("h2")
	if _, _, err := svc.AppendIdempotent(ctx, p); runstream.ErrorCodeOf(err) != runstream.CodeValidationFailed {
		t.Errorf("another request under the key: %v, want VALIDATION_FAILED", err)
	}
	p.Key = "bad\x01key"
	if _, _, err := svc.AppendIdempotent(ctx, p); runstream.ErrorCodeOf(err) != runstream.CodeValidationFailed {
		t.Errorf("a key with a control character: %v, want VALIDATION_FAILED", err)
	}
	p = threadsvc.IdempotentParams{User: "bob", ThreadID: "t1", Key: "k1", Hash: []byte("h1"), Events: p.Events, Response: p.Response}
	if _, _, err := svc.AppendIdempotent(ctx, p); runstream.ErrorCodeOf(err) != runstream.CodeNotFound {
		t.Errorf("a key of bob's on alice's thread: %v, want NOT_FOUND", err)
	}
}

func TestPutRunChecksTheRow(t *testing.T) {
	t.Parallel()
	svc := setup(t)
	p := threadsvc.RunParams{ThreadID: "t1", RunID: "r1", User: "alice", Status: "finished"}
	if _, err := svc.PutRun(t.Context(), p); runstream.ErrorCodeOf(err) != runstream.CodeValidationFailed {
		t.Errorf("unknown status: %v, want VALIDATION_FAILED", err)
	}
	p.Status = runevents.RunSuccess
	p.Usage.TotalTokens = -1
	if _, err := svc.PutRun(t.Context(), p); runstream.ErrorCodeOf(err) != runstream.CodeValidationFailed {
		t.Errorf("negative tokens: %v, want VALIDATION_FAILED", err)
	}
	p.Usage.TotalTokens = 7
	run, err := svc.PutRun(t.Context(), p)
	if err != nil || run.OperationKind != "run" || run.OwnerID != "alice" {
		t.Fatalf("PutRun = %+v, %v", run, err)
	}
	usage, err := svc.TokenUsage(t.Context(), "alice", "t1", false)
	if err != nil || usage.TotalTokens != 7 || usage.TotalRuns != 1 || usage.ByModel["unknown"].Tokens != 7 {
		t.Errorf("TokenUsage = %+v, %v", usage, err)
	}
}
