package main

import (
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/runstream/runstream/runevents"
)

// TestOpenPostgresThreadStores opens the PostgreSQL backend and uses the
// stores of the thread API through it: the run store, the thread reader
// and the idempotency store are provided and share the database.
func TestOpenPostgresThreadStores(t *testing.T) {
	t.Parallel()
	url := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("RUNSTREAM_TEST_POSTGRES_URL is not set: skipping the PostgreSQL backend test")
	}
	schema := fmt.Sprintf("rs_cmd_test_%d", time.Now().UnixNano())
	t.Cleanup(func() { dropSchema(t, url, schema) })
	b, err := openPostgres(t.Context(), url, schema, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
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
