package threadsvc_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
)

// setup returns a thread service over memory stores, driven without HTTP.
func setup(t *testing.T) *threadsvc.Service {
	t.Helper()
	validator, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	events := memory.NewRunEventStore()
	hub := live.New(live.Config{})
	log := eventlog.NewThreadLog(events, validator, hub, eventlog.ThreadLimits{})
	return threadsvc.New(events, events, memory.NewRunStore(), log, hub,
		threadsvc.Config{Idempotency: memory.NewIdempotencyStore()})
}

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

// Under a key, a request runs once: a retry gets its response again, a
// different request under the key is refused, and a write with an unknown
// outcome keeps the key.
func TestIdempotent(t *testing.T) {
	t.Parallel()
	svc := setup(t)
	ctx := t.Context()
	calls := 0
	do := func(context.Context) (int, any, error) {
		calls++
		return 201, map[string]int{"calls": calls}, nil
	}
	keep := func(err error) bool { return threadsvc.IsWriteError(err) }
	nolog := func(slog.Level, string, error) {}
	p := threadsvc.IdempotentParams{User: "alice", Key: "k1", Hash: []byte("h1"), KeepKey: keep}
	first, replayed, err := svc.Idempotent(ctx, p, do, nolog)
	if err != nil || replayed || first.Status != 201 || string(first.Body) != `{"calls":1}` {
		t.Fatalf("first = %+v replayed %v, %v", first, replayed, err)
	}
	again, replayed, err := svc.Idempotent(ctx, p, do, nolog)
	if err != nil || !replayed || again.Status != 201 || string(again.Body) != string(first.Body) || calls != 1 {
		t.Errorf("retry = %+v replayed %v (%d calls), %v; want the first response", again, replayed, calls, err)
	}
	p.Hash = []byte("h2")
	if _, _, err := svc.Idempotent(ctx, p, do, nolog); runstream.ErrorCodeOf(err) != runstream.CodeValidationFailed {
		t.Errorf("another request under the key: %v, want VALIDATION_FAILED", err)
	}
	unknown := func(context.Context) (int, any, error) {
		return 0, nil, threadsvc.WriteError{Err: errors.New("the commit may have happened")}
	}
	p = threadsvc.IdempotentParams{User: "alice", Key: "k2", Hash: []byte("h"), KeepKey: keep}
	if _, _, err := svc.Idempotent(ctx, p, unknown, nolog); err == nil {
		t.Fatal("the failed write succeeded")
	}
	if _, _, err := svc.Idempotent(ctx, p, do, nolog); runstream.ErrorCodeOf(err) != runstream.CodeConflict {
		t.Errorf("retry after an unknown outcome: %v, want CONFLICT", err)
	}
	p.Key = "bad\x01key"
	if _, _, err := svc.Idempotent(ctx, p, do, nolog); runstream.ErrorCodeOf(err) != runstream.CodeValidationFailed {
		t.Errorf("a key with a control character: %v, want VALIDATION_FAILED", err)
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
