package workflowsvc_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/workflow"
	"github.com/runstream/runstream/workflowsvc"
)

// heldRunReads counts GetRun calls and holds each until release is closed.
type heldRunReads struct {
	workflow.Store
	calls   atomic.Int32
	release chan struct{}
}

func (s *heldRunReads) GetRun(ctx context.Context, id string, owner runstream.Owner) (workflow.Run, error) {
	s.calls.Add(1)
	<-s.release
	return s.Store.GetRun(ctx, id, owner)
}

// Stream openings for one run that arrive while its read is in flight
// share that read: followers reconnecting at once make one store read.
func TestSimultaneousStreamsShareTheRunRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewWorkflowStore()
		t.Cleanup(func() { mem.Close() })
		wf, v, err := mem.CreateWorkflow(t.Context(), workflow.Workflow{ID: "wf_1", OwnerID: "u", Name: "test"},
			workflow.Version{ID: "wv_1", Definition: json.RawMessage(`{"name":"test","nodes":[]}`)})
		if err != nil {
			t.Fatal(err)
		}
		run, _, err := mem.CreateRun(t.Context(), workflow.Run{ID: "run_1", WorkflowID: wf.ID, VersionID: v.ID, OwnerID: "u", Input: json.RawMessage(`{}`)},
			[]workflow.NewEvent{{Event: workflow.EventRunCreated, Data: json.RawMessage(`{"version":1,"versionId":"wv_1"}`)}})
		if err != nil {
			t.Fatal(err)
		}
		store := &heldRunReads{Store: mem, release: make(chan struct{})}
		svc := workflowsvc.New(store, nil, live.New(live.Config{}), workflowsvc.Config{})
		const requests = 20
		var wg sync.WaitGroup
		for range requests {
			wg.Go(func() {
				if _, err := svc.OpenRunStream(t.Context(), "u", run.ID); err != nil {
					t.Error(err)
				}
			})
		}
		synctest.Wait() // one read held in GetRun, the other openings waiting on it
		close(store.release)
		wg.Wait()
		if n := store.calls.Load(); n != 1 {
			t.Errorf("%d store reads for %d simultaneous openings, want 1", n, requests)
		}
	})
}
