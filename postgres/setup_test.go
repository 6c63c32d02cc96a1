package postgres

import (
	"context"
	"crypto/rand"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// urlEnv names the variable holding the test database's URL, e.g.
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable.
const urlEnv = "RUNSTREAM_TEST_POSTGRES_URL"

// testURL returns the test database's URL or skips the test.
func testURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(urlEnv)
	if url == "" {
		t.Skip(urlEnv + " is not set: PostgreSQL tests skipped (set it to e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	}
	return url
}

// newSchema creates a schema with a random name and drops it, with
// everything in it, at cleanup.
func newSchema(t testing.TB) string {
	t.Helper()
	url := testURL(t)
	name := "rs_test_" + strings.ToLower(rand.Text()[:16])
	execSQL(t, url, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize())
	t.Cleanup(func() { execSQL(t, url, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE") })
	return name
}

// execSQL runs one statement on a connection of its own.
func execSQL(t testing.TB, url, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// openDB opens a DB over schema with a small pool and closes it at
// cleanup.
func openDB(t testing.TB, schema string) *DB {
	t.Helper()
	db, err := Open(context.Background(), Config{URL: testURL(t), Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
