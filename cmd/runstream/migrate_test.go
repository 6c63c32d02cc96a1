package main

import (
	"bytes"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runstream/runstream/internal/binarytest"
	"github.com/runstream/runstream/postgres"
	"github.com/runstream/runstream/sqlite"
)

// migrateCmd runs "runstream migrate" with args; it returns the error and
// stdout.
func migrateCmd(t *testing.T, args ...string) (error, string) {
	t.Helper()
	m := &Main{Getenv: func(string) string { return "" }}
	var stdout, stderr bytes.Buffer
	err := m.Run(t.Context(), append([]string{"migrate"}, args...), &stdout, &stderr)
	return err, stdout.String()
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
	if !strings.Contains(out, "schema version 0 → ") || !strings.Contains(out, "migrations applied") {
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
	if !strings.Contains(out, "migrations applied") {
		t.Errorf("migrate printed %q", out)
	}
	if err, out := migrateCmd(t, flags...); err != nil || !strings.Contains(out, "up to date") {
		t.Errorf("second migrate: %v, %q", err, out)
	}
}

func TestMigrateUsage(t *testing.T) {
	t.Parallel()
	if err, out := migrateCmd(t, "--store", "memory:"); err != nil || !strings.Contains(out, "nothing to migrate") {
		t.Errorf("memory: %v, %q", err, out)
	}
	for _, args := range [][]string{{"--store", "mysql://x"}, {"extra"}} {
		if err, _ := migrateCmd(t, args...); !errors.Is(err, errUsage) {
			t.Errorf("migrate %q: err = %v, want a usage error", args, err)
		}
	}
	if err, _ := migrateCmd(t, "--help"); err != nil {
		t.Errorf("--help: %v", err)
	}
}
