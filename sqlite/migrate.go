package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/runstream/runstream"
)

// migrationFiles holds the schema migrations, named NNNN_description.sql
// with a positive version number. A migration, once released, never
// changes: a new one is added with the next number.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one numbered schema change.
type migration struct {
	version int
	name    string // file name
	sql     string
}

// loadMigrations reads the *.sql files of fsys's "migrations" directory,
// sorted by version. Versions must be unique and start at 1 without holes.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	var out []migration
	for _, name := range names {
		base := path.Base(name)
		prefix, _, ok := strings.Cut(base, "_")
		version, err := strconv.Atoi(prefix)
		if !ok || err != nil || version <= 0 {
			return nil, fmt.Errorf("load migrations: %s: want NNNN_description.sql", base)
		}
		text, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("load migrations: %w", err)
		}
		out = append(out, migration{version: version, name: base, sql: string(text)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("load migrations: %s: want version %d (versions start at 1, no gaps or duplicates)", m.name, i+1)
		}
	}
	return out, nil
}

// migrate applies the migrations of fsys that db has not recorded in
// schema_migrations, each in its own BEGIN IMMEDIATE transaction together
// with its record, so that a migration is applied whole or not at all and
// two processes opening the same file apply it once. It refuses a database
// whose schema is newer than fsys knows.
func migrate(ctx context.Context, db *sql.DB, fsys fs.FS) error {
	migrations, err := loadMigrations(fsys)
	if err != nil {
		return runstream.Wrap(err, runstream.CodeInternal, "sqlite: migrate: invalid embedded migrations")
	}
	const create = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TEXT NOT NULL
	) STRICT`
	if _, err := db.ExecContext(ctx, create); err != nil {
		return sqlError("sqlite: migrate: create schema_migrations", err)
	}
	var latest int
	if err := db.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&latest); err != nil {
		return sqlError("sqlite: migrate: read schema_migrations", err)
	}
	if latest > len(migrations) {
		return runstream.Errorf(runstream.CodeInternal, "sqlite: migrate: database schema version %d is newer than this binary's %d", latest, len(migrations))
	}
	for _, m := range migrations[latest:] {
		if err := applyMigration(ctx, db, m); err != nil {
			return err
		}
	}
	return nil
}

// applyMigration runs m and records it in one transaction, unless another
// process recorded it first.
func applyMigration(ctx context.Context, db *sql.DB, m migration) error {
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the writer DSN sets _txlock
	if err != nil {
		return sqlError("sqlite: migrate: begin "+m.name, err)
	}
	defer tx.Rollback()
	var done int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM schema_migrations WHERE version = ?", m.version).Scan(&done); err != nil {
		return sqlError("sqlite: migrate: "+m.name, err)
	}
	if done > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return sqlError("sqlite: migrate: apply "+m.name, err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
		m.version, m.name, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return sqlError("sqlite: migrate: record "+m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return sqlError("sqlite: migrate: commit "+m.name, err)
	}
	return nil
}
