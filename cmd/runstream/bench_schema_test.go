package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/runstream/runstream/postgres"
)

// TestBenchSchema: a PostgreSQL benchmark run gets a schema of its own,
// new for each run, named in the store URL the servers get (the search
// path, which every build takes) and dropped at the run's end, unless
// --postgres-schema names one, which is kept.
func TestBenchSchema(t *testing.T) {
	url := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("RUNSTREAM_TEST_POSTGRES_URL is not set: skipping the benchmark schema test")
	}
	ctx := t.Context()
	// tables returns the schemas holding a run_events table.
	tables := func() map[string]bool {
		t.Helper()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		rows, err := conn.Query(ctx, "SELECT table_schema FROM information_schema.tables WHERE table_name = 'run_events'")
		if err != nil {
			t.Fatal(err)
		}
		schemas, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, s := range schemas {
			out[s] = true
		}
		return out
	}
	// serve opens the store as a bench server does, which migrates it.
	serve := func(store string) {
		t.Helper()
		db, err := postgres.Open(ctx, postgres.Config{URL: store, MaxConns: 1})
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	schemaOf := func(store string) string {
		t.Helper()
		_, query, _ := strings.Cut(store, "?")
		for _, kv := range strings.Split(query, "&") {
			if v, ok := strings.CutPrefix(kv, "search_path="); ok {
				return strings.Trim(strings.ReplaceAll(v, "%22", `"`), `"`)
			}
		}
		t.Fatalf("store %s names no search_path", store)
		return ""
	}

	cfg := benchConfig{store: url}
	first, dropFirst, err := benchSchema(ctx, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	second, dropSecond, err := benchSchema(ctx, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if schemaOf(first) == schemaOf(second) {
		t.Fatalf("two runs share the schema %s", schemaOf(first))
	}
	serve(first)
	serve(second)
	if got := tables(); !got[schemaOf(first)] || !got[schemaOf(second)] {
		t.Fatalf("the servers' tables are in %v; want %s and %s", got, schemaOf(first), schemaOf(second))
	}
	dropFirst()
	if got := tables(); got[schemaOf(first)] || !got[schemaOf(second)] {
		t.Errorf("after the first run's drop the tables are in %v; want %s only", got, schemaOf(second))
	}
	dropSecond()
	if got := tables(); got[schemaOf(second)] {
		t.Errorf("the second run's schema %s is left", schemaOf(second))
	}

	cfg.postgresSchema = "rs_bench_named_test"
	t.Cleanup(func() { dropSchema(t, url, cfg.postgresSchema) })
	named, drop, err := benchSchema(ctx, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if schemaOf(named) != cfg.postgresSchema {
		t.Fatalf("schema %q, want the one named", schemaOf(named))
	}
	serve(named)
	drop()
	if !tables()[cfg.postgresSchema] {
		t.Errorf("the named schema was dropped")
	}
}
