package main

import (
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/runstream/runstream/internal/binarytest"
	"github.com/runstream/runstream/postgres"
	"github.com/runstream/runstream/sqlite"
)

// migrateCmd runs "runstream migrate" with args; it returns the error and
// stdout.
func migrateCmd(t *testing.T, args ...string) (error, string) {
	t.Helper()
	return commandOutput(t, "migrate", args...)
}

// migrate creates a SQLite database at the binary's schema, says so, and
// finds nothing to do the second time.
func TestMigrateSQLite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "data", "runstream.db")
	err, out := migrateCmd(t, "--store", "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	in, err := sqlite.Inspect(t.Context(), path)
	if err != nil || in.SchemaVersion != in.LatestVersion || in.JournalMode != "wal" {
		t.Fatalf("after migrate: %+v, %v; want the latest schema in WAL mode", in, err)
	}
	if !strings.Contains(out, "schema version 0 → ") || !strings.Contains(out, " applied)") {
		t.Errorf("first migrate printed %q", out)
	}
	if err, out := migrateCmd(t, "--store", "sqlite:"+path); err != nil || !strings.Contains(out, "up to date") {
		t.Errorf("second migrate: %v, %q", err, out)
	}
}

// A database whose schema is newer than the binary's is refused and left
// as it is.
func TestMigrateNewerSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "runstream.db")
	if err, _ := migrateCmd(t, "--store", "sqlite:"+path); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'from the future', '2030-01-01')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	err, _ = migrateCmd(t, "--store", "sqlite:"+path)
	if err == nil || !strings.Contains(err.Error(), "newer than this binary") || exitCode(err) != 1 {
		t.Errorf("migrate of a newer schema: %v", err)
	}
	if in, _ := sqlite.Inspect(t.Context(), path); in.SchemaVersion != 999 {
		t.Errorf("schema version %d after the refusal, want 999 kept", in.SchemaVersion)
	}
}

func TestMigratePostgres(t *testing.T) {
	t.Parallel()
	flags := binarytest.PostgresStore(t, "rs_migrate_", "the PostgreSQL migrate test")
	err, out := migrateCmd(t, flags...)
	if err != nil {
		t.Fatal(err)
	}
	in, err := postgres.Inspect(t.Context(), flags[1], flags[3])
	if err != nil || in.SchemaVersion == 0 || in.SchemaVersion != in.LatestVersion {
		t.Fatalf("after migrate: %+v, %v; want the latest schema", in, err)
	}
	if !strings.Contains(out, " applied)") {
		t.Errorf("migrate printed %q", out)
	}
	if err, out := migrateCmd(t, flags...); err != nil || !strings.Contains(out, "up to date") {
		t.Errorf("second migrate: %v, %q", err, out)
	}
	// A newer binary's migration: refused, and left alone.
	conn, err := pgx.Connect(t.Context(), flags[1])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), "INSERT INTO "+pgx.Identifier{flags[3], "schema_migrations"}.Sanitize()+" (version, name) VALUES (999, 'from the future')"); err != nil {
		t.Fatal(err)
	}
	err, _ = migrateCmd(t, flags...)
	if err == nil || !strings.Contains(err.Error(), "newer than this binary") || exitCode(err) != 1 {
		t.Errorf("migrate of a newer schema: %v", err)
	}
}

func TestMigrateUsage(t *testing.T) {
	t.Parallel()
	if err, out := migrateCmd(t, "--store", "memory:"); err != nil || !strings.Contains(out, "nothing to migrate") {
		t.Errorf("memory: %v, %q", err, out)
	}
	for _, args := range [][]string{{"--store", "mysql://x"}, {"extra"}, {"--store", "sqlite:"}} {
		if err, _ := migrateCmd(t, args...); !errors.Is(err, errUsage) {
			t.Errorf("migrate %q: err = %v, want a usage error", args, err)
		}
	}
	if err, _ := migrateCmd(t, "--help"); err != nil {
		t.Errorf("--help: %v", err)
	}
}

// A store URL in messages keeps no password: of its user information or
// of its query.
func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:secret@db:5432/rs":                         "postgres://[REDACTED:dsn]@db:5432/rs",
		"postgres://u@db/rs":                                     "postgres://u@db/rs",
		"postgres://db/rs?sslmode=disable&password=secret":       "postgres://db/rs?sslmode=disable&password=[REDACTED:key]",
		"postgres://u:p@w@db/rs?SSLPassword=secret&user=u":       "postgres://[REDACTED:dsn]@db/rs?SSLPassword=[REDACTED:key]&user=u",
		"postgres://db/rs?pass%77ord=secret":                     "postgres://db/rs?pass%77ord=[REDACTED:key]",
		"postgres://db/rs?%zz=secret":                            "postgres://db/rs?xxxxx",
		"sqlite:./runstream-data/runstream.db":                   "sqlite:./runstream-data/runstream.db",
		"postgres://u:secret@db/rs?options=-c%20search_path%3Dx": "postgres://[REDACTED:dsn]@db/rs?options=-c%20search_path%3Dx",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
