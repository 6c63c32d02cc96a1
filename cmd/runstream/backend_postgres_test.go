package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/workflow"
)

// TestOpenPostgresThreadStores opens the PostgreSQL backend and uses the
// stores of the thread API through it: the run store, the thread reader
// and the idempotency store are provided and share the database.
func TestOpenPostgresThreadStores(t *testing.T) {
	t.Parallel()
	b := openTestPostgres(t)
	if b.runs == nil || b.threads == nil || b.idempotency == nil {
		t.Fatalf("backend stores: runs %v, threads %v, idempotency %v; want all three", b.runs, b.threads, b.idempotency)
	}
	ctx := t.Context()
	if _, err := b.runs.PutRun(ctx, runevents.ThreadRun{ThreadID: "t1", RunID: "r1", OwnerID: "alice", Status: runevents.RunRunning}); err != nil {
		t.Fatalf("PutRun: %v", err)
	}
	if _, err := b.runs.GetRun(ctx, "t1", "r1", runevents.OwnedBy("alice")); err != nil {
		t.Errorf("GetRun: %v", err)
	}
	rec, err := b.runEvents.Put(ctx, runevents.NewEvent{ThreadID: "t1", RunID: "r1", UserID: "alice",
		EventType: runevents.EventRunStart, Category: runevents.CategoryTrace})
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	got, err := b.threads.ListThreadEvents(ctx, runevents.ListThreadEventsParams{ThreadID: "t1", Owner: runevents.OwnedBy("alice"), Limit: 10})
	if err != nil || len(got) != 1 || got[0].Seq != rec.Seq {
		t.Errorf("ListThreadEvents = %d rows, %v; want the row put", len(got), err)
	}
	if resp, err := b.idempotency.Begin(ctx, "alice", "k1", []byte("hash")); err != nil || resp != nil {
		t.Errorf("Begin = %+v, %v; want a reservation", resp, err)
	}
}

// TestOpenPostgresListenDeliversSeq: the PostgreSQL backend's listener
// hands on the run id, or the thread id, and the newest seq of an append,
// which the hub needs to ignore the notifications of appends it delivered
// already.
func TestOpenPostgresListenDeliversSeq(t *testing.T) {
	t.Parallel()
	b := openTestPostgres(t)
	type notice struct {
		runID string
		seq   int64
	}
	heard, threadHeard := make(chan notice, 16), make(chan notice, 16)
	ctx, cancel := context.WithCancel(t.Context())
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		// Notification channels are the database's, not the schema's: the
		// appends of other tests running meanwhile are heard too.
		b.listen(ctx, func(runID string, seq int64) {
			if runID == "run_listen" {
				heard <- notice{runID, seq}
			}
		}, func(threadID string, seq int64) {
			if threadID == "t_listen" {
				threadHeard <- notice{threadID, seq}
			}
		})
	}()
	defer func() { cancel(); <-listening }()

	w, v, err := b.workflows.CreateWorkflow(t.Context(), workflow.Workflow{ID: "wf_listen", OwnerID: "u", Name: "listen"},
		workflow.Version{ID: "wv_listen", Definition: json.RawMessage(`{"name":"listen","nodes":[]}`)})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := b.workflows.CreateRun(t.Context(), workflow.Run{ID: "run_listen", WorkflowID: w.ID, VersionID: v.ID, OwnerID: "u", Input: json.RawMessage(`{}`)},
		[]workflow.NewEvent{{Event: workflow.EventRunCreated, Data: json.RawMessage(`{"version":1,"versionId":"wv_listen"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	// The listener may connect after the first append: append until it
	// hears one, then check the seq of what it heard.
	deadline := time.After(10 * time.Second)
	for heardRun := false; !heardRun; {
		stored, err := b.workflows.Append(t.Context(), workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{
			{Event: workflow.EventRunQueued, Data: json.RawMessage(`{"queue":"q"}`)},
		}})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case n := <-heard:
			if n.runID != run.ID || n.seq < 1 || n.seq > stored[0].Seq {
				t.Fatalf("heard %+v, want run %s and a seq from 1 to %d", n, run.ID, stored[0].Seq)
			}
			heardRun = true
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatal("no notification in 10 s")
		}
	}
	// The listener listens: a thread append is heard at once.
	recs, err := b.runEvents.PutBatch(t.Context(), []runevents.NewEvent{
		{ThreadID: "t_listen", RunID: "r1", EventType: runevents.EventRunStart, Category: runevents.CategoryTrace, Content: json.RawMessage(`{"chain":null}`)},
		{ThreadID: "t_listen", RunID: "r1", EventType: runevents.EventRunStart, Category: runevents.CategoryTrace, Content: json.RawMessage(`{"chain":null}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-threadHeard:
		if n != (notice{"t_listen", recs[1].Seq}) {
			t.Errorf("heard %+v, want thread t_listen and seq %d", n, recs[1].Seq)
		}
	case <-deadline:
		t.Fatal("no thread notification in 10 s")
	}

	// Once the store's group commit hook publishes its appends (the
	// thread log does, to the hub the listener wakes), the listener leaves
	// them out; an append outside the hook (PutIfAbsent) is heard.
	published := make(chan int64, 16)
	b.runEvents.(runevents.GroupCommitter).OnGroupCommit(func(recs []runevents.Record) {
		published <- recs[len(recs)-1].Seq
	})
	hooked, err := b.runEvents.Put(t.Context(), runevents.NewEvent{ThreadID: "t_listen", RunID: "r1",
		EventType: runevents.EventRunStart, Category: runevents.CategoryTrace, Content: json.RawMessage(`{"chain":null}`)})
	if err != nil {
		t.Fatal(err)
	}
	if seq := <-published; seq != hooked.Seq {
		t.Fatalf("the hook published seq %d, want %d", seq, hooked.Seq)
	}
	outside, _, err := b.runEvents.PutIfAbsent(t.Context(), runevents.NewEvent{ThreadID: "t_listen", RunID: "r1",
		EventType: runevents.EventRunDelivery, Category: runevents.CategoryOutputs, UserID: "u"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-threadHeard: // in commit order: the hooked append's would come first
		if n.seq != outside.Seq {
			t.Errorf("heard seq %d, want %d: the append the hook published is left out, the other heard", n.seq, outside.Seq)
		}
	case <-deadline:
		t.Fatal("no notification of the append outside the hook in 10 s")
	}
}

// openTestPostgres opens the PostgreSQL backend in a schema of its own,
// closed and dropped when the test ends, or skips the test without
// RUNSTREAM_TEST_POSTGRES_URL.
func openTestPostgres(t *testing.T) *backend {
	t.Helper()
	url := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("RUNSTREAM_TEST_POSTGRES_URL is not set: skipping the PostgreSQL backend test")
	}
	schema := fmt.Sprintf("rs_cmd_test_%d", time.Now().UnixNano())
	t.Cleanup(func() { dropSchema(t, url, schema) })
	b, err := openPostgres(t.Context(), url, schema, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return b
}
