// Package backendtest is test support: new, empty thread stores (run
// events, run rows, idempotency keys) of each storage backend, for the
// tests that run the thread API over every backend.
package backendtest

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runstream/runstream/jsonl"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/postgres"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/sqlite"
)

// PostgresURLEnv names the environment variable that holds the URL of the
// PostgreSQL server the postgres backend uses.
const PostgresURLEnv = "RUNSTREAM_TEST_POSTGRES_URL"

// EventStore is a run-event store that also reads whole threads.
type EventStore interface {
	runevents.Store
	runevents.ThreadReader
}

// Stores are the thread stores of one backend.
type Stores struct {
	Events      EventStore
	Runs        runevents.RunStore
	Idempotency runevents.IdempotencyStore
}

// Backend opens new, empty thread stores of one backend for a test; they
// are closed (and a PostgreSQL schema dropped) when the test ends.
type Backend struct {
	Name string
	Open func(t testing.TB) Stores
}

// Memory keeps everything in process memory.
var Memory = Backend{"memory", func(t testing.TB) Stores {
	return Stores{memory.NewRunEventStore(), memory.NewRunStore(), memory.NewIdempotencyStore()}
}}

// SQLite keeps everything in one SQLite file of the test's directory.
var SQLite = Backend{"sqlite", func(t testing.TB) Stores {
	db := openSQLite(t, t.TempDir())
	return Stores{db.RunEvents(), db.Runs(), db.Idempotency()}
}}

// JSONL keeps run events in JSONL files and run rows and idempotency keys
// in the SQLite file beside them, as serve --run-events jsonl:DIR does.
var JSONL = Backend{"jsonl", func(t testing.TB) Stores {
	dir := t.TempDir()
	events, err := jsonl.Open(jsonl.Config{Dir: dir + "/events"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { events.Close() })
	db := openSQLite(t, dir)
	return Stores{events, db.Runs(), db.Idempotency()}
}}

var schemaSeq atomic.Int64

// Postgres keeps everything in a schema of its own on the server at
// $RUNSTREAM_TEST_POSTGRES_URL, dropped when the test ends. ForEach skips
// it when the variable is not set.
var Postgres = Backend{"postgres", func(t testing.TB) Stores {
	url := os.Getenv(PostgresURLEnv)
	schema := fmt.Sprintf("rs_backendtest_%d_%d", time.Now().UnixNano(), schemaSeq.Add(1))
	db, err := postgres.Open(context.Background(), postgres.Config{URL: url, Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		if err := postgres.DropSchema(context.Background(), url, schema); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return Stores{db.RunEvents(), db.Runs(), db.Idempotency()}
}}

func openSQLite(t testing.TB, dir string) *sqlite.DB {
	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: dir + "/runstream.db"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// All are the backends: memory, SQLite, JSONL (run events; the rest in
// SQLite) and PostgreSQL.
var All = []Backend{Memory, SQLite, JSONL, Postgres}

// ForEach runs test as a subtest per backend of All, named by the
// backend. The PostgreSQL subtest skips with a message when
// RUNSTREAM_TEST_POSTGRES_URL is not set.
func ForEach(t *testing.T, test func(t *testing.T, b Backend)) {
	for _, b := range All {
		t.Run(b.Name, func(t *testing.T) {
			if b.Name == Postgres.Name && os.Getenv(PostgresURLEnv) == "" {
				t.Skip(PostgresURLEnv + " is not set: skipping the PostgreSQL backend")
			}
			test(t, b)
		})
	}
}
