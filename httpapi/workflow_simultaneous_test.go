package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
	"github.com/runstream/runstream/workflowsvc"
)

// readBarrier is a workflow store whose first n GetRun calls return only
// once all n were made: n requests that read a run all see it as it was
// before any of them wrote.
type readBarrier struct {
	workflow.Store
	mu      sync.Mutex
	waiting int
	all     chan struct{}
}

func newReadBarrier(s workflow.Store, n int) *readBarrier {
	return &readBarrier{Store: s, waiting: n, all: make(chan struct{})}
}

func (b *readBarrier) GetRun(ctx context.Context, id string, owner runstream.Owner) (workflow.Run, error) {
	run, err := b.Store.GetRun(ctx, id, owner)
	b.mu.Lock()
	first := b.waiting > 0
	if first {
		if b.waiting--; b.waiting == 0 {
			close(b.all)
		}
	}
	b.mu.Unlock()
	if first {
		<-b.all
	}
	return run, err
}

// Of simultaneous cancels of a running run, which all read it running
// before any appends, one appends run.cancel_requested; every one answers
// 202 with the cancelling run.
func TestSimultaneousCancels(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{})
	if _, err := env.log.Append(t.Context(), workflow.AppendParams{RunID: env.run.ID, Events: []workflow.NewEvent{{
		Event: workflow.EventRunStarted, Data: json.RawMessage(`{"startedAt":"2026-11-29T10:00:00Z","workerId":"w1"}`),
	}}}); err != nil {
		t.Fatal(err)
	}
	const callers = 10
	env.api.workflows = workflowsvc.New(newReadBarrier(env.store, callers), env.log, env.hub, workflowsvc.Config{})
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			resp, err := http.Post(env.srv.URL+"/api/workflows/runs/"+env.run.ID+"/cancel", "application/json", nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var view struct{ Status string }
			if err := json.NewDecoder(resp.Body).Decode(&view); err != nil || resp.StatusCode != http.StatusAccepted || view.Status != "cancelling" {
				t.Errorf("cancel: %d %+v %v", resp.StatusCode, view, err)
			}
		})
	}
	wg.Wait()
	events, err := env.store.ListEvents(t.Context(), env.run.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var requested int
	for _, e := range events {
		if e.Event == workflow.EventRunCancelRequested {
			requested++
		}
	}
	if requested != 1 {
		t.Errorf("%d run.cancel_requested events after %d simultaneous cancels, want 1", requested, callers)
	}
}
