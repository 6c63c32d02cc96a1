package workflow_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// TestParamsValidate covers the checks every backend shares through the
// params' Validate methods, CheckNewRun and CheckEventPage: each case names
// the text of the refusal, or "" for arguments that pass.
func TestParamsValidate(t *testing.T) {
	t.Parallel()
	alice := runstream.OwnedBy("alice")
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	resumed := []workflow.NewEvent{{Event: workflow.EventRunResumed, NodeID: "ask"}}
	type validateCase struct {
		name    string
		params  interface{ Validate() error }
		wantErr string
	}
	tests := []validateCase{
		{"workflows", workflow.ListWorkflowsParams{Owner: alice, Limit: 1}, ""},
		{"workflows at the largest limit", workflow.ListWorkflowsParams{Owner: runstream.AnyOwner, Limit: workflow.MaxListLimit}, ""},
		{"workflows without owner", workflow.ListWorkflowsParams{Limit: 10}, "an owner is required"},
		{"workflows with limit 0", workflow.ListWorkflowsParams{Owner: alice}, "limit 0 is outside 1..1000"},
		{"workflows over the largest limit", workflow.ListWorkflowsParams{Owner: alice, Limit: workflow.MaxListLimit + 1}, "limit 1001 is outside"},
		{"runs", workflow.ListRunsParams{Owner: alice, Limit: 10, Status: workflow.StatusAwaitingInput}, ""},
		{"runs without owner", workflow.ListRunsParams{Limit: 10}, "an owner is required"},
		{"runs with a negative limit", workflow.ListRunsParams{Owner: alice, Limit: -1}, "limit -1 is outside"},
		{"runs with an unknown status", workflow.ListRunsParams{Owner: alice, Limit: 10, Status: "sleeping"}, `unknown status "sleeping"`},
		{"resume", workflow.ResumeParams{RunID: "run_1", Owner: alice, Now: now, Events: resumed}, ""},
		{"resume without owner", workflow.ResumeParams{RunID: "run_1", Now: now}, "an owner is required"},
		{"resume without time", workflow.ResumeParams{RunID: "run_1", Owner: alice}, "the time of the request is required"},
		{"resume with an unknown event", workflow.ResumeParams{RunID: "run_1", Owner: alice, Now: now, Events: []workflow.NewEvent{{Event: "run.paused"}}}, "run.paused"},
		{"resume with an invalid node output", workflow.ResumeParams{RunID: "run_1", Owner: alice, Now: now, Events: resumed, NodeOutputs: map[string]json.RawMessage{"ask": json.RawMessage(`{`)}}, "ask"},
	}
	pages := []struct {
		afterSeq int64
		limit    int
		wantErr  string
	}{
		{0, 1, ""},
		{41, workflow.MaxEventPageLimit, ""},
		{-1, 10, "afterSeq -1 is negative"},
		{0, 0, "limit 0 is outside 1..1000"},
		{0, workflow.MaxEventPageLimit + 1, "limit 1001 is outside"},
	}
	for _, p := range pages {
		tests = append(tests, validateCase{fmt.Sprintf("event page after %d limit %d", p.afterSeq, p.limit), eventPage{p.afterSeq, p.limit}, p.wantErr})
	}
	run := workflow.Run{ID: "run_1", WorkflowID: "wf_1", VersionID: "ver_1", OwnerID: "alice"}
	created := []workflow.NewEvent{{Event: workflow.EventRunCreated}}
	long := strings.Repeat("x", workflow.MaxIDBytes+1)
	for _, c := range []struct {
		name    string
		edit    func(r *workflow.Run)
		events  []workflow.NewEvent
		wantErr string
	}{
		{"new run", func(*workflow.Run) {}, created, ""},
		{"new run without events", func(*workflow.Run) {}, nil, ""},
		{"new run with a status", func(r *workflow.Run) { r.Status = workflow.StatusRunning }, created, ""},
		{"new run without id", func(r *workflow.Run) { r.ID = "" }, created, "create run: id is required"},
		{"new run without owner", func(r *workflow.Run) { r.OwnerID = "" }, created, "create run: owner is required"},
		{"new run with a long id", func(r *workflow.Run) { r.ID = long }, created, "create run: id is longer than 128 bytes"},
		{"new run with a long owner", func(r *workflow.Run) { r.OwnerID = long }, created, "create run: owner is longer than 128 bytes"},
		{"new run with an unknown status", func(r *workflow.Run) { r.Status = "sleeping" }, created, `create run: unknown status "sleeping"`},
		{"new run with an unknown event", func(*workflow.Run) {}, []workflow.NewEvent{{Event: "run.paused"}}, "run.paused"},
	} {
		r := run
		c.edit(&r)
		tests = append(tests, validateCase{c.name, newRun{r, c.events}, c.wantErr})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.params.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if runstream.ErrorCodeOf(err) != runstream.CodeInvalidArgument || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want INVALID_ARGUMENT containing %q", err, tt.wantErr)
			}
		})
	}
}

// newRun puts workflow.CheckNewRun behind Validate for the table.
type newRun struct {
	run    workflow.Run
	events []workflow.NewEvent
}

func (n newRun) Validate() error { return workflow.CheckNewRun(n.run, n.events) }

// eventPage puts workflow.CheckEventPage behind Validate for the table.
type eventPage struct {
	afterSeq int64
	limit    int
}

func (p eventPage) Validate() error { return workflow.CheckEventPage(p.afterSeq, p.limit) }
