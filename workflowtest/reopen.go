package workflowtest

import (
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// snapshot is everything the reopen step compares.
type snapshot struct {
	workflows []workflow.Workflow
	versions  []workflow.Version
	runs      []workflow.Run
	events    map[string][]workflow.Envelope
	token     workflow.ResumeToken
	artifact  workflow.Artifact
}

func takeSnapshot(t *testing.T, s workflow.Store, paused workflow.Run, versions []workflow.Version) snapshot {
	t.Helper()
	ws, err := s.ListWorkflows(t.Context(), workflow.ListWorkflowsParams{Owner: runstream.AnyOwner, Limit: 1000})
	if err != nil {
		t.Fatalf("ListWorkflows: %v", err)
	}
	runs, err := s.ListRuns(t.Context(), workflow.ListRunsParams{Owner: runstream.AnyOwner, Limit: 1000})
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	snap := snapshot{workflows: ws, runs: runs, events: map[string][]workflow.Envelope{}}
	for _, v := range versions {
		got, err := s.GetVersion(t.Context(), v.WorkflowID, v.ID, runstream.AnyOwner)
		if err != nil {
			t.Fatalf("GetVersion(%s): %v", v.ID, err)
		}
		snap.versions = append(snap.versions, got)
	}
	for _, r := range runs {
		snap.events[r.ID] = allEvents(t, s, r.ID)
	}
	if snap.token, err = s.PendingResumeToken(t.Context(), paused.ID); err != nil {
		t.Fatalf("PendingResumeToken: %v", err)
	}
	snap.artifact = getArtifact(t, s, paused.ID, "a1")
	return snap
}

func testReopen(t *testing.T, h Harness) {
	if h.OpenReopenable == nil {
		t.Log("Harness.OpenReopenable is nil: the backend keeps nothing, reopen not tested")
		return
	}
	s, reopen := h.OpenReopenable(t)
	if s == nil || reopen == nil {
		t.Fatal("workflowtest: Harness.OpenReopenable returned nil")
	}
	cur := s
	t.Cleanup(func() {
		if err := cur.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})

	w, v1 := newWorkflow(t, s, alice)
	v2, err := s.AddVersion(t.Context(), workflow.Version{ID: newID("wv"), WorkflowID: w.ID, Definition: []byte(`{"rev":2}`)}, asAlice)
	if err != nil {
		t.Fatalf("AddVersion: %v", err)
	}
	wb, vb := newWorkflow(t, s, bob)
	zone := time.FixedZone("", -5*3600)

	paused := newRunOf(t, s, w, v2, nil)
	appendEvents(t, s, workflow.AppendParams{RunID: paused.ID, Events: []workflow.NewEvent{
		{Event: workflow.EventRunStarted, Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 678901000, zone)},
	}})
	storeArtifacts(t, s, paused.ID, report("a1"))
	pause(t, s, paused.ID, "secret")

	done := newRunOf(t, s, w, v1, nil)
	appendEvents(t, s, workflow.AppendParams{RunID: done.ID, LeaseOwner: lessee, Events: []workflow.NewEvent{
		runEvent(workflow.EventRunStarted, ""), runEvent(workflow.EventRunCompleted, `{"output":{"ok":true}}`),
	}})
	failed := newRunOf(t, s, wb, vb, nil)
	appendEvents(t, s, workflow.AppendParams{RunID: failed.ID, Events: []workflow.NewEvent{
		runEvent(workflow.EventRunFailed, `{"error":{"code":"X"}}`),
	}})
	queued := newRunOf(t, s, w, v2, nil)

	before := takeSnapshot(t, s, paused, []workflow.Version{v1, v2, vb})
	s = reopen()
	if s == nil {
		t.Fatal("workflowtest: reopen returned nil")
	}
	cur = s
	after := takeSnapshot(t, s, paused, []workflow.Version{v1, v2, vb})

	if len(after.workflows) != len(before.workflows) {
		t.Fatalf("after reopen: %d workflows, want %d", len(after.workflows), len(before.workflows))
	}
	for i := range before.workflows {
		sameWorkflow(t, "workflow after reopen", after.workflows[i], before.workflows[i])
	}
	for i := range before.versions {
		sameVersion(t, "version after reopen", after.versions[i], before.versions[i])
	}
	sameRuns(t, "runs after reopen", after.runs, before.runs)
	for id, events := range before.events {
		sameEnvelopes(t, "events of "+id+" after reopen", after.events[id], events)
	}
	sameToken(t, "pending token after reopen", after.token, before.token)
	sameArtifact(t, "artifact after reopen", after.artifact, before.artifact)

	// The reopened store goes on where the first one stopped.
	if got := appendEvents(t, s, workflow.AppendParams{RunID: queued.ID, LeaseOwner: lessee, Events: []workflow.NewEvent{progress(1)}}); got[0].Seq != 3 {
		t.Errorf("append after reopen: seq %d, want 3", got[0].Seq)
	}
	_, err = s.Append(t.Context(), workflow.AppendParams{RunID: done.ID, Events: []workflow.NewEvent{progress(1)}})
	wantCode(t, err, runstream.CodeConflict, "append to a completed run after reopen")
	_, err = s.Append(t.Context(), workflow.AppendParams{RunID: queued.ID, LeaseOwner: "worker-2", Events: []workflow.NewEvent{progress(2)}})
	wantCode(t, err, runstream.CodeConflict, "fenced append after reopen")
	_, err = s.Resume(t.Context(), resumeParams(paused.ID, "guess"))
	wantCode(t, err, runstream.CodeWorkflowResumeTokenInvalid, "resume with a wrong token after reopen")
	last := before.events[paused.ID][len(before.events[paused.ID])-1].Seq
	if got := resume(t, s, resumeParams(paused.ID, "secret")); got[0].Seq != last+1 {
		t.Errorf("resume after reopen: seq %d, want %d", got[0].Seq, last+1)
	}
	_, err = s.Resume(t.Context(), resumeParams(paused.ID, "secret"))
	wantCode(t, err, runstream.CodeWorkflowResumeTokenUsed, "second resume after reopen")
	if v3, err := s.AddVersion(t.Context(), workflow.Version{ID: newID("wv"), WorkflowID: w.ID}, asAlice); err != nil || v3.Number != 3 {
		t.Errorf("AddVersion after reopen: number %d, %v; want 3", v3.Number, err)
	}
	_, _, err = s.CreateWorkflow(t.Context(), workflow.Workflow{ID: w.ID, OwnerID: alice}, workflow.Version{ID: newID("wv")})
	wantCode(t, err, runstream.CodeConflict, "CreateWorkflow with a used id after reopen")
	_, _, err = s.CreateRun(t.Context(), workflow.Run{ID: done.ID, WorkflowID: w.ID, VersionID: v1.ID, OwnerID: alice}, initialEvents())
	wantCode(t, err, runstream.CodeConflict, "CreateRun with a used id after reopen")
	_, err = s.GetRun(t.Context(), failed.ID, asAlice)
	wantCode(t, err, runstream.CodeWorkflowRunNotFound, "another owner's run after reopen")
}
