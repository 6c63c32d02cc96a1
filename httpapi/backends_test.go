package httpapi

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/runstream/runstream/jsonl"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/postgres"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/sqlite"
)

// threadBackend opens new, empty thread stores of one backend for a test.
type threadBackend struct {
	name string
	open func(t *testing.T) (threadEventStore, runevents.RunStore, runevents.IdempotencyStore)
}

var memoryBackend = threadBackend{"memory", func(t *testing.T) (threadEventStore, runevents.RunStore, runevents.IdempotencyStore) {
	return memory.NewRunEventStore(), memory.NewRunStore(), memory.NewIdempotencyStore()
}}

var sqliteBackend = threadBackend{"sqlite", func(t *testing.T) (threadEventStore, runevents.RunStore, runevents.IdempotencyStore) {
	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: t.TempDir() + "/runstream.db"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db.RunEvents(), db.Runs(), db.Idempotency()
}}

// jsonlBackend keeps run events in JSONL files and thread run rows and
// idempotency keys in the SQLite file beside them, as serve --run-events
// jsonl:DIR does.
var jsonlBackend = threadBackend{"jsonl", func(t *testing.T) (threadEventStore, runevents.RunStore, runevents.IdempotencyStore) {
	dir := t.TempDir()
	events, err := jsonl.Open(jsonl.Config{Dir: dir + "/events"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { events.Close() })
	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: dir + "/runstream.db"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return events, db.Runs(), db.Idempotency()
}}

var schemaSeq atomic.Int64

var postgresBackend = threadBackend{"postgres", func(t *testing.T) (threadEventStore, runevents.RunStore, runevents.IdempotencyStore) {
	url := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL")
	schema := fmt.Sprintf("rs_httpapi_%d_%d", time.Now().UnixNano(), schemaSeq.Add(1))
	db, err := postgres.Open(context.Background(), postgres.Config{URL: url, Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return db.RunEvents(), db.Runs(), db.Idempotency()
}}

// forEachThreadBackend runs test as a subtest per backend: memory, SQLite,
// JSONL (run events; the rest in SQLite), and PostgreSQL when
// RUNSTREAM_TEST_POSTGRES_URL is set (the subtest skips with a message
// otherwise).
func forEachThreadBackend(t *testing.T, test func(t *testing.T, b threadBackend)) {
	for _, b := range []threadBackend{memoryBackend, sqliteBackend, jsonlBackend, postgresBackend} {
		t.Run(b.name, func(t *testing.T) {
			if b.name == "postgres" && os.Getenv("RUNSTREAM_TEST_POSTGRES_URL") == "" {
				t.Skip("RUNSTREAM_TEST_POSTGRES_URL is not set: skipping the PostgreSQL backend")
			}
			test(t, b)
		})
	}
}
