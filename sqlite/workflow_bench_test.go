package sqlite

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/runstream/runstream/workflow"
)

// benchWorkflowRun opens a store with cfg and creates a run without events.
func benchWorkflowRun(b *testing.B, cfg Config) (ownedWorkflowStore, workflow.Run) {
	b.Helper()
	s := openWorkflowStore(b, cfg)
	b.Cleanup(func() { s.Close() })
	w, v, err := s.CreateWorkflow(b.Context(), workflow.Workflow{ID: "wf-1", OwnerID: "alice"}, workflow.Version{ID: "wv-1"})
	if err != nil {
		b.Fatalf("CreateWorkflow: %v", err)
	}
	r, _, err := s.CreateRun(b.Context(), workflow.Run{ID: "run-1", WorkflowID: w.ID, VersionID: v.ID, OwnerID: "alice"}, nil)
	if err != nil {
		b.Fatalf("CreateRun: %v", err)
	}
	return s, r
}

// workflowDeltaEvent is a node.output.delta of about 100 bytes of data.
func workflowDeltaEvent(i int) workflow.NewEvent {
	return workflow.NewEvent{Event: workflow.EventNodeOutputDelta, NodeID: "n1", NodeRunID: "n1-r1",
		Data: json.RawMessage(fmt.Sprintf(`{"channel":"text","delta":"token %d of a streamed answer, about one line long","i":%d}`, i, i))}
}

// BenchmarkWorkflowAppend appends single events to one run from 1 and 64
// goroutines: an iteration hands one append to a free goroutine, so with
// 64 the write loop commits the appends that queue up meanwhile as one
// group.
func BenchmarkWorkflowAppend(b *testing.B) {
	for _, mode := range []string{SynchronousFull, SynchronousNormal} {
		for _, writers := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", mode, writers), func(b *testing.B) {
				s, run := benchWorkflowRun(b, Config{Path: filepath.Join(b.TempDir(), "bench.db"), Synchronous: mode})
				benchWorkflowAppend(b, s, run.ID, writers)
			})
		}
	}
}

func benchWorkflowAppend(b *testing.B, s ownedWorkflowStore, runID string, writers int) {
	jobs := make(chan int)
	var (
		wg   sync.WaitGroup
		once sync.Once
		fail error
	)
	for range writers {
		wg.Go(func() {
			for i := range jobs {
				_, err := s.Append(b.Context(), workflow.AppendParams{RunID: runID, Events: []workflow.NewEvent{workflowDeltaEvent(i)}})
				if err != nil {
					once.Do(func() { fail = err })
				}
			}
		})
	}
	before := s.db.stats.transactions.Load()
	n := 0
	for b.Loop() {
		jobs <- n
		n++
	}
	close(jobs)
	wg.Wait()
	if fail != nil {
		b.Fatalf("Append: %v", fail)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(n)/float64(s.db.stats.transactions.Load()-before), "events/tx")
}

// BenchmarkWorkflowListEvents reads pages of 500 events after a cursor of
// a run of 100,000 events, as an SSE replay or poll does.
func BenchmarkWorkflowListEvents(b *testing.B) {
	const events, page, batch = 100_000, 500, 1000
	s, run := benchWorkflowRun(b, Config{Path: filepath.Join(b.TempDir(), "bench.db")})
	for i := 0; i < events; i += batch {
		es := make([]workflow.NewEvent, batch)
		for k := range es {
			es[k] = workflowDeltaEvent(i + k)
		}
		if _, err := s.Append(b.Context(), workflow.AppendParams{RunID: run.ID, Events: es}); err != nil {
			b.Fatalf("Append: %v", err)
		}
	}
	after := int64(0)
	for b.Loop() {
		got, err := s.ListEvents(b.Context(), run.ID, after, page)
		if err != nil || len(got) != page || got[0].Seq != after+1 {
			b.Fatalf("ListEvents(after %d): %d events, %v", after, len(got), err)
		}
		after = (after + 7919*page) % (events - page) // cursors spread over the run
	}
	b.ReportMetric(float64(b.N*page)/b.Elapsed().Seconds(), "events/s")
}
