package workflowsvc_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/workflow"
	"github.com/runstream/runstream/workflowsvc"
)

const waiter = `{"name":"waiter","inputSchema":{"type":"object","properties":{"n":{"type":"integer"}}},` +
	`"nodes":[{"id":"wait","type":"delay","config":{"ms":1}}]}`

// setup returns a workflow service over a memory store, driven without
// HTTP, with the runs it notified.
func setup(t *testing.T) (*workflowsvc.Service, *memory.WorkflowStore, *[]string) {
	t.Helper()
	validator, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	store := memory.NewWorkflowStore()
	t.Cleanup(func() { store.Close() })
	hub := live.New(live.Config{})
	var notified []string
	svc := workflowsvc.New(store, eventlog.NewWorkflowLog(store, validator, hub, nil), hub,
		workflowsvc.Config{Notify: func(_ context.Context, runID string) { notified = append(notified, runID) }})
	return svc, store, &notified
}

func TestStartAndCancelARun(t *testing.T) {
	t.Parallel()
	svc, store, notified := setup(t)
	ctx := t.Context()
	wf, v, err := svc.Publish(ctx, "alice", workflowsvc.Definition{Definition: json.RawMessage(waiter)})
	if err != nil || wf.Name != "waiter" || v.Number != 1 {
		t.Fatalf("Publish = %+v %+v, %v", wf, v, err)
	}
	if _, err := svc.StartRun(ctx, workflowsvc.StartRunParams{User: "alice", WorkflowID: wf.ID, Input: json.RawMessage(`{"n":"one"}`)}); err == nil {
		t.Error("a run with input against the inputSchema started")
	}
	if _, err := svc.StartRun(ctx, workflowsvc.StartRunParams{User: "bob", WorkflowID: wf.ID}); runstream.ErrorCodeOf(err) != runstream.CodeWorkflowNotFound {
		t.Errorf("bob starts alice's workflow: %v, want WORKFLOW_NOT_FOUND", err)
	}
	run, err := svc.StartRun(ctx, workflowsvc.StartRunParams{User: "alice", WorkflowID: wf.ID, Input: json.RawMessage(`{ "n": 2 }`)})
	if err != nil || run.Status != workflow.StatusQueued || string(run.Input) != `{"n":2}` {
		t.Fatalf("StartRun = %+v, %v", run, err)
	}
	cancelled, err := svc.CancelRun(ctx, "alice", run.ID)
	if err != nil || cancelled.Status != workflow.StatusCancelled {
		t.Fatalf("CancelRun of a queued run = %s, %v; want cancelled at once", cancelled.Status, err)
	}
	if _, err := svc.CancelRun(ctx, "alice", run.ID); runstream.ErrorCodeOf(err) != runstream.CodeWorkflowRunAlreadyTerminal {
		t.Errorf("second cancel: %v, want WORKFLOW_RUN_ALREADY_TERMINAL", err)
	}
	events, err := store.ListEvents(ctx, run.ID, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var types []workflow.EventType
	for _, e := range events {
		types = append(types, e.Event)
	}
	want := []workflow.EventType{workflow.EventRunCreated, workflow.EventRunQueued, workflow.EventRunCancelRequested, workflow.EventRunCancelled}
	if len(types) != len(want) || types[0] != want[0] || types[1] != want[1] || types[2] != want[2] || types[3] != want[3] {
		t.Errorf("events %v, want %v", types, want)
	}
	if len(*notified) != 2 || (*notified)[0] != run.ID {
		t.Errorf("notified %v, want the run on start and on cancel", *notified)
	}
}

func TestReadOnlyServiceWritesNoRun(t *testing.T) {
	t.Parallel()
	store := memory.NewWorkflowStore()
	t.Cleanup(func() { store.Close() })
	svc := workflowsvc.New(store, nil, live.New(live.Config{}), workflowsvc.Config{})
	wf, _, err := svc.Publish(t.Context(), "alice", workflowsvc.Definition{Definition: json.RawMessage(waiter)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.StartRun(t.Context(), workflowsvc.StartRunParams{User: "alice", WorkflowID: wf.ID}); runstream.ErrorCodeOf(err) != runstream.CodeUnavailable {
		t.Errorf("StartRun without a log: %v, want UNAVAILABLE", err)
	}
	if _, err := svc.ResumeRun(t.Context(), workflowsvc.ResumeParams{User: "alice", RunID: "run_x", Token: "t"}); runstream.ErrorCodeOf(err) != runstream.CodeUnavailable {
		t.Errorf("ResumeRun without a log: %v, want UNAVAILABLE", err)
	}
}

// TestStartRunRefusesNumbersOutOfRange: an input number float64 cannot
// hold is VALIDATION_FAILED naming its path, before the run exists, for
// callers without HTTP too (runstream run).
func TestStartRunRefusesNumbersOutOfRange(t *testing.T) {
	t.Parallel()
	svc, _, _ := setup(t)
	ctx := t.Context()
	wf, _, err := svc.Publish(ctx, "alice", workflowsvc.Definition{Definition: json.RawMessage(waiter)})
	if err != nil {
		t.Fatal(err)
	}
	for input, path := range map[string]string{
		`{"x":1e999}`:               "/input/x",
		`{"a/b":[1,{"c":-1E+400}]}`: "/input/a~1b/1/c",
		`1e999`:                     "/input",
	} {
		_, err := svc.StartRun(ctx, workflowsvc.StartRunParams{User: "alice", WorkflowID: wf.ID, Input: json.RawMessage(input)})
		if err == nil {
			t.Errorf("StartRun(%s) started a run", input)
			continue
		}
		e := runstream.AsError(err)
		if e.Code != runstream.CodeValidationFailed || !strings.HasPrefix(e.Message, path+": number out of range") || strings.Contains(e.Message, "e999") {
			t.Errorf("StartRun(%s) = %v, want VALIDATION_FAILED naming %s", input, err, path)
		}
	}
	if _, err := svc.StartRun(ctx, workflowsvc.StartRunParams{User: "alice", WorkflowID: wf.ID, Input: json.RawMessage(`{"n":2,"tiny":1e-999}`)}); err != nil {
		t.Errorf("StartRun with numbers in range: %v", err)
	}
}
