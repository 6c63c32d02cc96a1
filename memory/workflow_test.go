package memory_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/workflow"
	"github.com/runstream/runstream/workflowtest"
)

func TestWorkflowStore(t *testing.T) {
	workflowtest.Run(t, workflowtest.Harness{
		Open: func(*testing.T) workflow.Store { return memory.NewWorkflowStore() },
	})
}

// newWorkflowRun stores a workflow and a run of alice with run.created.
func newWorkflowRun(t *testing.T, s *memory.WorkflowStore) (workflow.Run, []workflow.Envelope) {
	t.Helper()
	w, v, err := s.CreateWorkflow(t.Context(), workflow.Workflow{ID: "wf-1", OwnerID: "alice"}, workflow.Version{ID: "wv-1"})
	if err != nil {
		t.Fatalf("CreateWorkflow: %v", err)
	}
	r, envs, err := s.CreateRun(t.Context(), workflow.Run{ID: "run-1", WorkflowID: w.ID, VersionID: v.ID, OwnerID: "alice"},
		[]workflow.NewEvent{{Event: workflow.EventRunCreated}})
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	return r, envs
}

func TestWorkflowStoreClock(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 8, 26, 18, 0, 0, 123456789, time.FixedZone("", 8*3600))
	want := time.Date(2026, 8, 26, 10, 0, 0, 123456000, time.UTC)
	s := memory.NewWorkflowStore(memory.WithClock(func() time.Time { return now }))
	t.Cleanup(func() { s.Close() })
	r, envs := newWorkflowRun(t, s)
	for name, got := range map[string]time.Time{"run CreatedAt": r.CreatedAt, "run UpdatedAt": r.UpdatedAt, "event timestamp": envs[0].Timestamp} {
		if !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("%s %s, want the clock in UTC truncated to microseconds, %s", name, got, want)
		}
	}
}

func TestWorkflowStoreClosed(t *testing.T) {
	t.Parallel()
	s := memory.NewWorkflowStore()
	r, _ := newWorkflowRun(t, s)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx, alice := t.Context(), runstream.OwnedBy("alice")
	events := []workflow.NewEvent{{Event: workflow.EventRunStarted}}
	calls := map[string]func() error{
		"CreateWorkflow": func() error {
			_, _, err := s.CreateWorkflow(ctx, workflow.Workflow{ID: "wf-2", OwnerID: "alice"}, workflow.Version{ID: "wv-2"})
			return err
		},
		"GetWorkflow": func() error { _, err := s.GetWorkflow(ctx, r.WorkflowID, alice); return err },
		"ListWorkflows": func() error {
			_, err := s.ListWorkflows(ctx, workflow.ListWorkflowsParams{Owner: alice, Limit: 1})
			return err
		},
		"AddVersion": func() error {
			_, err := s.AddVersion(ctx, workflow.Version{ID: "wv-3", WorkflowID: r.WorkflowID}, alice)
			return err
		},
		"GetVersion": func() error { _, err := s.GetVersion(ctx, r.WorkflowID, r.VersionID, alice); return err },
		"CreateRun": func() error {
			_, _, err := s.CreateRun(ctx, workflow.Run{ID: "run-2", WorkflowID: r.WorkflowID, VersionID: r.VersionID, OwnerID: "alice"}, events)
			return err
		},
		"GetRun":     func() error { _, err := s.GetRun(ctx, r.ID, alice); return err },
		"ListRuns":   func() error { _, err := s.ListRuns(ctx, workflow.ListRunsParams{Owner: alice, Limit: 1}); return err },
		"Append":     func() error { _, err := s.Append(ctx, workflow.AppendParams{RunID: r.ID, Events: events}); return err },
		"ListEvents": func() error { _, err := s.ListEvents(ctx, r.ID, 0, 10); return err },
		"Resume": func() error {
			_, err := s.Resume(ctx, workflow.ResumeParams{RunID: r.ID, Owner: alice, Hash: []byte("h"), Now: time.Now(), Events: events})
			return err
		},
		"PendingResumeToken": func() error { _, err := s.PendingResumeToken(ctx, r.ID); return err },
		"GetArtifact":        func() error { _, err := s.GetArtifact(ctx, r.ID, "a1"); return err },
	}
	for name, call := range calls {
		if code := runstream.ErrorCodeOf(call()); code != runstream.CodeUnavailable {
			t.Errorf("%s after Close: code %q, want %s", name, code, runstream.CodeUnavailable)
		}
	}
}

// BenchmarkWorkflowStoreAppend appends batches of 10 node.output.delta
// events to one run.
func BenchmarkWorkflowStoreAppend(b *testing.B) {
	s := memory.NewWorkflowStore()
	defer s.Close()
	w, v, err := s.CreateWorkflow(b.Context(), workflow.Workflow{ID: "wf-1", OwnerID: "alice"}, workflow.Version{ID: "wv-1"})
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := s.CreateRun(b.Context(), workflow.Run{ID: "run-1", WorkflowID: w.ID, VersionID: v.ID, OwnerID: "alice"}, nil); err != nil {
		b.Fatal(err)
	}
	batch := make([]workflow.NewEvent, 10)
	for i := range batch {
		batch[i] = workflow.NewEvent{Event: workflow.EventNodeOutputDelta, NodeID: "n1", Data: json.RawMessage(`{"channel":"text","delta":"token "}`)}
	}
	for b.Loop() {
		if _, err := s.Append(b.Context(), workflow.AppendParams{RunID: "run-1", Events: batch}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "events/s")
}
