package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// TestOpenRace opens one fresh schema from several DBs at once, then again:
// every Open succeeds and each embedded migration is recorded once.
func TestOpenRace(t *testing.T) {
	schema := newSchema(t)
	want, err := loadMigrations(migrationFiles)
	if err != nil || len(want) == 0 {
		t.Fatalf("embedded migrations: %d, %v", len(want), err)
	}
	var wg sync.WaitGroup
	dbs := make([]*DB, 4)
	errs := make([]error, len(dbs))
	for i := range dbs {
		wg.Go(func() {
			dbs[i], errs[i] = Open(t.Context(), Config{URL: testURL(t), Schema: schema, MaxConns: 2})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		t.Cleanup(func() { dbs[i].Close() })
	}
	again := openDB(t, schema) // idempotent on a migrated schema
	var versions []int32
	rows, err := again.pool.Query(t.Context(), "SELECT version FROM schema_migrations ORDER BY version")
	if err == nil {
		versions, err = pgx.CollectRows(rows, pgx.RowTo[int32])
	}
	if err != nil {
		t.Fatal(err)
	}
	var wantVersions []int32
	for _, m := range want {
		wantVersions = append(wantVersions, int32(m.version))
	}
	if !slices.Equal(versions, wantVersions) {
		t.Errorf("schema_migrations holds %v, want %v", versions, wantVersions)
	}
}

// TestOpenCreatesSchema opens a schema that does not exist yet.
func TestOpenCreatesSchema(t *testing.T) {
	url := testURL(t)
	schema := "rs_test_" + strings.ToLower(rand.Text()[:16])
	t.Cleanup(func() { execSQL(t, url, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE") })
	db := openDB(t, schema)
	var tables int
	if err := db.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_tables
		WHERE schemaname = $1 AND tablename IN ('run_events', 'run_event_threads', 'schema_migrations')`, schema).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 3 {
		t.Errorf("schema %s holds %d of the 3 tables", schema, tables)
	}
}

// TestMigrate runs the runner on migration sets of its own: versions apply
// in number order, once, only the new ones on a later run, and a failing
// migration rolls the whole run back.
func TestMigrate(t *testing.T) {
	schema := newSchema(t)
	pool := testPool(t, schema)
	ctx := t.Context()
	files := fstest.MapFS{
		// The log table records the order in which migrations ran.
		"migrations/0002_second.sql": {Data: []byte("INSERT INTO log VALUES (2);")},
		"migrations/0001_first.sql":  {Data: []byte("CREATE TABLE log (v int); INSERT INTO log VALUES (1);")},
		"migrations/0010_tenth.sql":  {Data: []byte("INSERT INTO log VALUES (10);")},
	}
	if err := migrate(ctx, pool, schema, files); err != nil {
		t.Fatalf("first run: %v", err)
	}
	wantLog(t, pool, []int32{1, 2, 10})
	if err := migrate(ctx, pool, schema, files); err != nil {
		t.Fatalf("second run: %v", err)
	}
	wantLog(t, pool, []int32{1, 2, 10})

	files["migrations/0011_eleventh.sql"] = &fstest.MapFile{Data: []byte("INSERT INTO log VALUES (11);")}
	files["migrations/0012_broken.sql"] = &fstest.MapFile{Data: []byte("INSERT INTO log VALUES (12); SELECT no_such_column FROM log;")}
	err := migrate(ctx, pool, schema, files)
	if runstream.ErrorCodeOf(err) != runstream.CodeInternal || !strings.Contains(runstream.ErrorMessage(err), "0012_broken") ||
		strings.Contains(runstream.ErrorMessage(err), "no_such_column") {
		t.Errorf("broken migration: %v; want CodeInternal naming 0012_broken without the driver's text", err)
	}
	wantLog(t, pool, []int32{1, 2, 10}) // 0011 rolled back with 0012
	var recorded int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM schema_migrations").Scan(&recorded); err != nil || recorded != 3 {
		t.Errorf("schema_migrations holds %d rows (%v), want 3", recorded, err)
	}
}

func wantLog(t *testing.T, pool *pgxpool.Pool, want []int32) {
	t.Helper()
	rows, err := pool.Query(t.Context(), "SELECT v FROM log")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("migrations ran %v, want %v", got, want)
	}
}

func TestLoadMigrationsRefusesBadSets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files fstest.MapFS
	}{
		{"unnumbered", fstest.MapFS{"migrations/first.sql": {}}},
		{"three digits", fstest.MapFS{"migrations/001_first.sql": {}}},
		{"upper case", fstest.MapFS{"migrations/0001_First.sql": {}}},
		{"duplicate version", fstest.MapFS{"migrations/0001_a.sql": {}, "migrations/0001_b.sql": {}}},
		{"no directory", fstest.MapFS{"other/0001_a.sql": {}}},
	}
	for _, tc := range tests {
		if _, err := loadMigrations(tc.files); err == nil {
			t.Errorf("%s: loadMigrations accepted the set", tc.name)
		}
	}
}

func testPool(t *testing.T, schema string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestOpenErrorsHideConnectionString checks that failing Opens return a
// *runstream.Error whose message holds neither the URL nor its password
// nor the driver's text, and whose full text (for logs) has no password.
func TestOpenErrorsHideConnectionString(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-pw"
	tests := []struct {
		name string
		url  string
		code runstream.ErrorCode
	}{
		{"nothing listens", "postgres://runstream:" + secret + "@127.0.0.1:1/test?sslmode=disable&connect_timeout=2", runstream.CodeUnavailable},
		{"unparsable", "postgres://runstream:" + secret + "@127.0.0.1:notaport/test", runstream.CodeInvalidArgument},
		{"bad option", "postgres://runstream:" + secret + "@127.0.0.1/test?sslmode=bogus", runstream.CodeInvalidArgument},
		{"empty", "", runstream.CodeInvalidArgument},
	}
	for _, tc := range tests {
		_, err := Open(t.Context(), Config{URL: tc.url})
		var e *runstream.Error
		if !errors.As(err, &e) {
			t.Errorf("%s: %v (%T), want a *runstream.Error", tc.name, err, err)
			continue
		}
		if e.Code != tc.code {
			t.Errorf("%s: code %s, want %s", tc.name, e.Code, tc.code)
		}
		if strings.Contains(e.Message, secret) || strings.Contains(e.Message, "127.0.0.1") || strings.Contains(e.Message, "runstream:") {
			t.Errorf("%s: message %q leaks the connection string", tc.name, e.Message)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error text %q leaks the password", tc.name, err)
		}
	}
}

// TestQueryErrorsHideDriverText breaks the table under a store: the error
// is CodeInternal and names only the operation.
func TestQueryErrorsHideDriverText(t *testing.T) {
	db := openDB(t, newSchema(t))
	ctx := t.Context()
	if _, err := db.pool.Exec(ctx, "ALTER TABLE run_events RENAME TO gone"); err != nil {
		t.Fatal(err)
	}
	_, err := db.RunEvents().CountMessages(ctx, "t1", runevents.AnyOwner)
	if runstream.ErrorCodeOf(err) != runstream.CodeInternal || runstream.ErrorMessage(err) != "postgres: count messages" {
		t.Errorf("CountMessages on a missing table: code %s message %q; want CodeInternal \"postgres: count messages\"",
			runstream.ErrorCodeOf(err), runstream.ErrorMessage(err))
	}
	_, err = db.RunEvents().Put(ctx, prepEvent("t1", "r1"))
	if runstream.ErrorCodeOf(err) != runstream.CodeInternal || runstream.ErrorMessage(err) != "postgres: put events" {
		t.Errorf("Put on a missing table: code %s message %q; want CodeInternal \"postgres: put events\"",
			runstream.ErrorCodeOf(err), runstream.ErrorMessage(err))
	}
}

// TestDurability reads synchronous_commit as the pool's connections have
// it: the server's setting, or the one the URL sets.
func TestDurability(t *testing.T) {
	url := testURL(t)
	var server string
	if err := testPool(t, "public").QueryRow(t.Context(), "SHOW synchronous_commit").Scan(&server); err != nil {
		t.Fatal(err)
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	tests := []struct{ url, want string }{
		{url, "postgres synchronous_commit=" + server},
		{url + sep + "synchronous_commit=off", "postgres synchronous_commit=off"},
		{url + sep + "synchronous_commit=remote_apply", "postgres synchronous_commit=remote_apply"},
	}
	for _, tc := range tests {
		db, err := Open(context.Background(), Config{URL: tc.url, Schema: newSchema(t), MaxConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		if got := db.Durability(); got != tc.want {
			t.Errorf("Durability() = %q, want %q", got, tc.want)
		}
		if got := db.RunEvents().Durability(); got != tc.want {
			t.Errorf("RunEvents().Durability() = %q, want %q", got, tc.want)
		}
		db.Close()
	}
}
