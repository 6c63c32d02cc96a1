package workflowtest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

var runTests = []test{
	{"Create", func(t *testing.T, s workflow.Store) {
		w, v := newWorkflow(t, s, alice)
		r := workflow.Run{ID: newID("run"), WorkflowID: w.ID, VersionID: v.ID, OwnerID: alice, Input: json.RawMessage(`{"b":1,"a":"x"}`)}
		before := time.Now()
		got, envs, err := s.CreateRun(t.Context(), r, initialEvents())
		after := time.Now()
		if err != nil {
			t.Fatalf("CreateRun: %v", err)
		}
		checkDefaultTime(t, "run CreatedAt", got.CreatedAt, before, after)
		want := r
		want.Status, want.LastSeq, want.CreatedAt = workflow.StatusQueued, 2, got.CreatedAt
		if len(envs) == 2 {
			want.UpdatedAt = envs[1].Timestamp
		}
		sameRun(t, "CreateRun returned", got, want)
		sameRun(t, "GetRun", getRun(t, s, r.ID), want)
		if got := seqsOf(envs); len(got) != 2 || got[0] != 1 || got[1] != 2 {
			t.Fatalf("initial events have seqs %v, want [1 2]", got)
		}
		for i, typ := range []workflow.EventType{workflow.EventRunCreated, workflow.EventRunQueued} {
			if envs[i].Event != typ || envs[i].RunID != r.ID || envs[i].WorkflowID != w.ID || envs[i].VersionID != v.ID {
				t.Errorf("envelope %d: %s of run %s, workflow %s, version %s; want %s of %s, %s, %s",
					i, envs[i].Event, envs[i].RunID, envs[i].WorkflowID, envs[i].VersionID, typ, r.ID, w.ID, v.ID)
			}
			checkDefaultTime(t, "initial event timestamp", envs[i].Timestamp, before, after)
		}
		sameEnvelopes(t, "ListEvents", allEvents(t, s, r.ID), envs)
	}},
	{"Status", func(t *testing.T, s workflow.Store) {
		cases := []struct {
			name   string
			given  workflow.RunStatus
			events []workflow.NewEvent
			want   workflow.RunStatus
		}{
			{"default", "", []workflow.NewEvent{runEvent(workflow.EventRunCreated, "")}, workflow.StatusQueued},
			{"given", workflow.StatusRunning, []workflow.NewEvent{runEvent(workflow.EventRunCreated, "")}, workflow.StatusRunning},
			{"implied by the events", "", []workflow.NewEvent{runEvent(workflow.EventRunCreated, ""), runEvent(workflow.EventRunStarted, "")}, workflow.StatusRunning},
		}
		w, v := newWorkflow(t, s, alice)
		for _, c := range cases {
			r := workflow.Run{ID: newID("run"), WorkflowID: w.ID, VersionID: v.ID, OwnerID: alice, Status: c.given}
			got, _, err := s.CreateRun(t.Context(), r, c.events)
			if err != nil {
				t.Fatalf("%s: CreateRun: %v", c.name, err)
			}
			if got.Status != c.want || getRun(t, s, r.ID).Status != c.want {
				t.Errorf("%s: status %s (stored %s), want %s", c.name, got.Status, getRun(t, s, r.ID).Status, c.want)
			}
		}
	}},
	{"CreateWithoutEvents", func(t *testing.T, s workflow.Store) {
		w, v := newWorkflow(t, s, alice)
		r := workflow.Run{ID: newID("run"), WorkflowID: w.ID, VersionID: v.ID, OwnerID: alice, CreatedAt: base}
		got, envs, err := s.CreateRun(t.Context(), r, nil)
		if err != nil {
			t.Fatalf("CreateRun without events: %v", err)
		}
		want := r
		want.Status, want.UpdatedAt = workflow.StatusQueued, base
		sameRun(t, "CreateRun without events", got, want)
		if len(envs) != 0 || len(allEvents(t, s, r.ID)) != 0 {
			t.Errorf("CreateRun without events: %d envelopes returned, %d stored; want none", len(envs), len(allEvents(t, s, r.ID)))
		}
		first := appendEvents(t, s, workflow.AppendParams{RunID: r.ID, Events: initialEvents()})
		if got := seqsOf(first); got[0] != 1 || got[1] != 2 {
			t.Errorf("first appended seqs %v, want [1 2]", got)
		}
	}},
	{"CreateRefused", func(t *testing.T, s workflow.Store) {
		w, v := newWorkflow(t, s, alice)
		w2, v2 := newWorkflow(t, s, alice)
		wb, vb := newWorkflow(t, s, bob)
		existing := newRunOf(t, s, w, v, nil)
		existingEvents := allEvents(t, s, existing.ID)
		run := func(edit func(*workflow.Run)) workflow.Run {
			r := workflow.Run{ID: newID("run"), WorkflowID: w.ID, VersionID: v.ID, OwnerID: alice}
			edit(&r)
			return r
		}
		cases := []struct {
			name   string
			r      workflow.Run
			events []workflow.NewEvent
			code   runstream.ErrorCode
		}{
			{"no id", run(func(r *workflow.Run) { r.ID = "" }), initialEvents(), runstream.CodeInvalidArgument},
			{"no owner", run(func(r *workflow.Run) { r.OwnerID = "" }), initialEvents(), runstream.CodeInvalidArgument},
			{"unknown status", run(func(r *workflow.Run) { r.Status = "paused" }), initialEvents(), runstream.CodeInvalidArgument},
			{"invalid event", run(func(*workflow.Run) {}), []workflow.NewEvent{runEvent(workflow.EventRunCreated, ""), runEvent(workflow.EventNodeProgress, "")}, runstream.CodeInvalidArgument},
			{"unknown workflow", run(func(r *workflow.Run) { r.WorkflowID = newID("wf") }), initialEvents(), runstream.CodeWorkflowNotFound},
			{"another owner's workflow", run(func(r *workflow.Run) { r.WorkflowID, r.VersionID = wb.ID, vb.ID }), initialEvents(), runstream.CodeWorkflowNotFound},
			{"unknown version", run(func(r *workflow.Run) { r.VersionID = newID("wv") }), initialEvents(), runstream.CodeWorkflowVersionNotFound},
			{"no version", run(func(r *workflow.Run) { r.VersionID = "" }), initialEvents(), runstream.CodeWorkflowVersionNotFound},
			{"another workflow's version", run(func(r *workflow.Run) { r.VersionID = v2.ID }), initialEvents(), runstream.CodeWorkflowVersionNotFound},
			{"used run id", run(func(r *workflow.Run) { r.ID, r.WorkflowID, r.VersionID = existing.ID, w2.ID, v2.ID }), initialEvents(), runstream.CodeConflict},
		}
		for _, c := range cases {
			_, _, err := s.CreateRun(t.Context(), c.r, c.events)
			wantCode(t, err, c.code, c.name)
			if c.r.ID != "" && c.r.ID != existing.ID {
				_, err := s.GetRun(t.Context(), c.r.ID, runstream.AnyOwner)
				wantCode(t, err, runstream.CodeWorkflowRunNotFound, c.name+": GetRun of the refused run")
			}
		}
		unchanged(t, s, "existing run after a refused duplicate", existing, existingEvents)
		got, err := s.ListRuns(t.Context(), workflow.ListRunsParams{Owner: runstream.AnyOwner, Limit: 100})
		if err != nil || len(got) != 1 {
			t.Errorf("ListRuns after refused creates: %v, %v; want only %s", runIDs(got), err, existing.ID)
		}
	}},
	{"Owner", func(t *testing.T, s workflow.Store) {
		r := newRun(t, s, nil)
		_, err := s.GetRun(t.Context(), r.ID, asBob)
		wantCode(t, err, runstream.CodeWorkflowRunNotFound, "GetRun of another owner's run")
		_, err = s.GetRun(t.Context(), newID("run"), runstream.AnyOwner)
		wantCode(t, err, runstream.CodeWorkflowRunNotFound, "GetRun of an unknown run")
		_, err = s.GetRun(t.Context(), r.ID, runstream.Owner{})
		wantCode(t, err, runstream.CodeInvalidArgument, "GetRun with the zero owner")
		got, err := s.GetRun(t.Context(), r.ID, asAlice)
		if err != nil {
			t.Fatalf("GetRun as alice: %v", err)
		}
		sameRun(t, "GetRun as alice", got, r)
		sameRun(t, "GetRun as AnyOwner", getRun(t, s, r.ID), r)
	}},
}
