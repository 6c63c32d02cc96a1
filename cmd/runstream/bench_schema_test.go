package main

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/runstream/runstream/postgres"
)

// TestBenchSchema: a PostgreSQL benchmark run gets a schema of its own,
// new for each run and dropped at its end, unless --postgres-schema names
// one, which is kept.
func TestBenchSchema(t *testing.T) {
	url := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("RUNSTREAM_TEST_POSTGRES_URL is not set: skipping the benchmark schema test")
	}
	ctx := t.Context()
	exists := func(schema string) bool {
		t.Helper()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	create := func(schema string) {
		t.Helper()
		db, err := postgres.Open(ctx, postgres.Config{URL: url, Schema: schema, MaxConns: 1})
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
	}

	cfg := benchConfig{store: url}
	first, dropFirst := benchSchema(cfg, io.Discard)
	second, dropSecond := benchSchema(cfg, io.Discard)
	if first == second {
		t.Fatalf("two runs share the schema %s", first)
	}
	create(first)
	create(second)
	dropFirst()
	if exists(first) || !exists(second) {
		t.Errorf("after the first run's drop: first exists %v, second %v; want false, true", exists(first), exists(second))
	}
	dropSecond()
	if exists(second) {
		t.Errorf("the second run's schema %s is left", second)
	}

	cfg.postgresSchema = "rs_bench_named_test"
	t.Cleanup(func() { dropSchema(t, url, cfg.postgresSchema) })
	named, drop := benchSchema(cfg, io.Discard)
	if named != cfg.postgresSchema {
		t.Fatalf("schema %q, want the one named", named)
	}
	create(named)
	drop()
	if !exists(named) {
		t.Errorf("the named schema was dropped")
	}
}
