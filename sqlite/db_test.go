package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
	"go.uber.org/goleak"
)

// newDB opens a DB in a fresh directory and closes it at cleanup.
func newDB(t *testing.T, cfg Config) *DB {
	t.Helper()
	if cfg.Path == "" {
		cfg.Path = filepath.Join(t.TempDir(), "runstream.db")
	}
	db, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open(%+v): %v", cfg, err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

func wantCode(t *testing.T, err error, code runstream.ErrorCode, what string) {
	t.Helper()
	var e *runstream.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Errorf("%s: error %v, want a *runstream.Error with code %s", what, err, code)
	}
}

func TestOpenRejectsInvalidConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"NoPath", Config{}},
		{"SynchronousOff", Config{Path: filepath.Join(dir, "a.db"), Synchronous: "OFF"}},
		{"SynchronousExtra", Config{Path: filepath.Join(dir, "b.db"), Synchronous: "EXTRA"}},
		{"SynchronousTypo", Config{Path: filepath.Join(dir, "c.db"), Synchronous: "FULLL"}},
		{"NegativeBusyTimeout", Config{Path: filepath.Join(dir, "d.db"), BusyTimeout: -1}},
		{"NegativeReadConns", Config{Path: filepath.Join(dir, "e.db"), ReadConns: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db, err := Open(t.Context(), tc.cfg)
			if err == nil {
				db.Close()
			}
			wantCode(t, err, runstream.CodeInvalidArgument, "Open")
		})
	}
}

func TestSynchronousReported(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		given, want, durability string
		pragma                  int
	}{
		{"", SynchronousFull, "survives power loss", 2},
		{"full", SynchronousFull, "survives power loss", 2},
		{"NORMAL", SynchronousNormal, "may be lost on power loss", 1},
		{"normal", SynchronousNormal, "may be lost on power loss", 1},
	} {
		t.Run(tc.given, func(t *testing.T) {
			t.Parallel()
			db := newDB(t, Config{Synchronous: tc.given})
			if got := db.Synchronous(); got != tc.want {
				t.Errorf("Synchronous() = %q, want %q", got, tc.want)
			}
			if got := db.RunEvents().Durability(); !strings.Contains(got, "synchronous="+tc.want) || !strings.Contains(got, tc.durability) {
				t.Errorf("Durability() = %q, want synchronous=%s and %q", got, tc.want, tc.durability)
			}
			// The writer connection really runs in that mode, in WAL.
			var sync int
			var mode string
			if err := db.writer.QueryRow("PRAGMA synchronous").Scan(&sync); err != nil {
				t.Fatal(err)
			}
			if err := db.writer.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
				t.Fatal(err)
			}
			if sync != tc.pragma || mode != "wal" {
				t.Errorf("writer: synchronous=%d journal_mode=%s, want %d and wal", sync, mode, tc.pragma)
			}
			var fk int
			if err := db.writer.QueryRow("PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
				t.Errorf("writer: foreign_keys=%d (%v), want 1", fk, err)
			}
		})
	}
}

func TestReadPoolCannotWrite(t *testing.T) {
	t.Parallel()
	db := newDB(t, Config{})
	_, err := db.readers.ExecContext(t.Context(), "INSERT INTO run_event_threads (thread_id, last_seq) VALUES ('t', 1)")
	if err == nil {
		t.Fatal("a write on the read pool succeeded")
	}
}

// appliedMigrations returns schema_migrations as "version name applied_at"
// lines.
func appliedMigrations(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT version, name, applied_at FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var version int
		var name, at string
		if err := rows.Scan(&version, &name, &at); err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Join([]string{strconv.Itoa(version), name, at}, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMigrationsRecordedAndIdempotent(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "runstream.db")
	embedded, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	if len(embedded) == 0 || embedded[0].name != "0001_run_events.sql" {
		t.Fatalf("embedded migrations %v, want 0001_run_events.sql first", embedded)
	}

	db, err := Open(t.Context(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	first := appliedMigrations(t, db.writer)
	if len(first) != len(embedded) {
		t.Fatalf("schema_migrations after Open: %q, want the %d embedded migrations", first, len(embedded))
	}
	for i, m := range embedded {
		if !strings.Contains(first[i], " "+m.name+" ") {
			t.Errorf("schema_migrations[%d] = %q, want %s", i, first[i], m.name)
		}
	}
	rec, err := db.RunEvents().Put(t.Context(), runevents.NewEvent{ThreadID: "t", RunID: "r", EventType: "run.start", Category: "trace"})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	// Reopening applies nothing again (same applied_at) and keeps the data.
	db = newDB(t, Config{Path: path})
	if again := appliedMigrations(t, db.writer); strings.Join(again, "\n") != strings.Join(first, "\n") {
		t.Errorf("schema_migrations after reopen:\n%s\nwant unchanged:\n%s", strings.Join(again, "\n"), strings.Join(first, "\n"))
	}
	got, err := db.RunEvents().ListEvents(t.Context(), runevents.ListEventsParams{ThreadID: "t", RunID: "r", Owner: runevents.AnyOwner, Limit: 10})
	if err != nil || len(got) != 1 || got[0].Seq != rec.Seq {
		t.Errorf("after reopen: %v, %v; want the row written before", got, err)
	}
}

// openRawWriter opens a connection to path configured like the writer, for
// driving migrate directly.
func openRawWriter(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	one := &fstest.MapFile{Data: []byte("CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1);")}
	two := &fstest.MapFile{Data: []byte("CREATE TABLE b (y INTEGER);")}
	broken := &fstest.MapFile{Data: []byte("CREATE TABLE c (z INTEGER); THIS IS NOT SQL;")}

	t.Run("AppliesInOrderOnce", func(t *testing.T) {
		t.Parallel()
		db := openRawWriter(t, filepath.Join(t.TempDir(), "m.db"))
		fsys := fstest.MapFS{"migrations/0002_b.sql": two, "migrations/0001_a.sql": one}
		for range 2 {
			if err := migrate(t.Context(), db, fsys); err != nil {
				t.Fatalf("migrate: %v", err)
			}
		}
		var n int
		if err := db.QueryRow("SELECT count(*) FROM a").Scan(&n); err != nil || n != 1 {
			t.Errorf("table a has %d rows (%v), want 1: the first migration ran once", n, err)
		}
		if got := appliedMigrations(t, db); len(got) != 2 || !strings.HasPrefix(got[0], "1 0001_a.sql ") || !strings.HasPrefix(got[1], "2 0002_b.sql ") {
			t.Errorf("schema_migrations = %q", got)
		}
	})
	t.Run("FailedMigrationRollsBack", func(t *testing.T) {
		t.Parallel()
		db := openRawWriter(t, filepath.Join(t.TempDir(), "m.db"))
		err := migrate(t.Context(), db, fstest.MapFS{"migrations/0001_a.sql": one, "migrations/0002_c.sql": broken})
		if err == nil {
			t.Fatal("migrate with a broken migration succeeded")
		}
		if strings.Contains(runstream.ErrorMessage(err), "THIS") {
			t.Errorf("error message %q leaks the SQL", runstream.ErrorMessage(err))
		}
		if got := appliedMigrations(t, db); len(got) != 1 {
			t.Errorf("schema_migrations = %q, want only 0001", got)
		}
		if _, err := db.Exec("SELECT * FROM c"); err == nil {
			t.Error("table c of the failed migration exists")
		}
	})
	t.Run("RefusesNewerSchema", func(t *testing.T) {
		t.Parallel()
		db := openRawWriter(t, filepath.Join(t.TempDir(), "m.db"))
		if err := migrate(t.Context(), db, fstest.MapFS{"migrations/0001_a.sql": one, "migrations/0002_b.sql": two}); err != nil {
			t.Fatal(err)
		}
		if err := migrate(t.Context(), db, fstest.MapFS{"migrations/0001_a.sql": one}); err == nil {
			t.Error("migrate accepted a database whose schema is newer than its migrations")
		}
	})
	for name, fsys := range map[string]fstest.MapFS{
		"Gap":       {"migrations/0001_a.sql": one, "migrations/0003_b.sql": two},
		"Duplicate": {"migrations/0001_a.sql": one, "migrations/0001_b.sql": two},
		"NoNumber":  {"migrations/first.sql": one},
		"Zero":      {"migrations/0000_a.sql": one},
	} {
		t.Run("Rejects"+name, func(t *testing.T) {
			t.Parallel()
			if _, err := loadMigrations(fsys); err == nil {
				t.Errorf("loadMigrations accepted %v", fsys)
			}
		})
	}
}

func TestClosed(t *testing.T) {
	t.Parallel()
	e := runevents.NewEvent{ThreadID: "t", RunID: "r", EventType: "run.start", Category: "trace"}

	t.Run("Store", func(t *testing.T) {
		t.Parallel()
		db := newDB(t, Config{})
		s := db.RunEvents()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		_, err := s.Put(t.Context(), e)
		wantCode(t, err, runstream.CodeUnavailable, "Put after store Close")
		_, err = s.CountMessages(t.Context(), "t", runevents.AnyOwner)
		wantCode(t, err, runstream.CodeUnavailable, "CountMessages after store Close")
	})
	t.Run("DB", func(t *testing.T) {
		t.Parallel()
		db, err := Open(t.Context(), Config{Path: filepath.Join(t.TempDir(), "runstream.db")})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		_, err = db.RunEvents().Put(t.Context(), e)
		wantCode(t, err, runstream.CodeUnavailable, "Put after DB Close")
	})
}

func TestCancelledCallsAreUnavailable(t *testing.T) {
	t.Parallel()
	db := newDB(t, Config{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s := db.RunEvents()
	_, err := s.ListEvents(ctx, runevents.ListEventsParams{ThreadID: "t", RunID: "r", Owner: runevents.AnyOwner, Limit: 1})
	wantCode(t, err, runstream.CodeUnavailable, "ListEvents with a cancelled context")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("ListEvents: %v, want context.Canceled in the chain", err)
	}
	_, err = s.Put(ctx, runevents.NewEvent{ThreadID: "t", RunID: "r", EventType: "run.start", Category: "trace"})
	wantCode(t, err, runstream.CodeUnavailable, "Put with a cancelled context")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Put: %v, want context.Canceled in the chain", err)
	}
}

// Not parallel: goleak sees the goroutines of the whole process.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	db, err := Open(t.Context(), Config{Path: filepath.Join(t.TempDir(), "runstream.db")})
	if err != nil {
		t.Fatal(err)
	}
	s := db.RunEvents()
	if _, err := s.Put(t.Context(), runevents.NewEvent{ThreadID: "t", RunID: "r", EventType: "run.start", Category: "trace"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CountMessages(t.Context(), "t", runevents.AnyOwner); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, ignore)
}
