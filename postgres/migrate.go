package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runstream/runstream"
)

// migrationFiles holds the numbered migrations, NNNN_name.sql, applied in
// order of their number.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLockKey is the pg_advisory_xact_lock key that serialises
// migration runs of every instance sharing the database ("runstrm" in
// ASCII).
const migrationLockKey int64 = 0x72756e7374726d

var migrationName = regexp.MustCompile(`^([0-9]{4})_([a-z0-9_]+)\.sql$`)

// migration is one numbered SQL script.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads the migrations under migrations/ in fsys, sorted by
// version. Every .sql file must be named NNNN_name.sql with a unique NNNN.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []migration
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration %q: want a name like 0001_name.sql", e.Name())
		}
		version, _ := strconv.Atoi(m[1]) // four digits always parse
		if prev, ok := seen[version]; ok {
			return nil, fmt.Errorf("migrations %q and %q share version %d", prev, e.Name(), version)
		}
		seen[version] = e.Name()
		text, err := fs.ReadFile(fsys, "migrations/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", e.Name(), err)
		}
		out = append(out, migration{version: version, name: m[2], sql: string(text)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// migrate applies, in one transaction, the migrations of fsys that
// schema_migrations does not record, in version order, and records them.
// The transaction first takes an advisory lock, so that instances starting
// at once apply each migration exactly once: the later ones wait, then
// find the versions recorded. A failing migration rolls back the whole run.
// When schema is not empty it is created if missing. Versions recorded but
// unknown to this binary (applied by a newer one) are left alone.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, fsys fs.FS) error {
	migrations, err := loadMigrations(fsys)
	if err != nil {
		return runstream.Wrap(err, runstream.CodeInternal, "postgres: migrate: invalid embedded migrations")
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLockKey); err != nil {
			return dbError(err, "migrate: lock")
		}
		if schema != "" {
			if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
				return dbError(err, "migrate: create schema")
			}
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version integer PRIMARY KEY,
			name text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return dbError(err, "migrate: create schema_migrations")
		}
		rows, err := tx.Query(ctx, "SELECT version FROM schema_migrations")
		if err != nil {
			return dbError(err, "migrate: read schema_migrations")
		}
		applied, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return dbError(err, "migrate: read schema_migrations")
		}
		done := map[int]bool{}
		for _, v := range applied {
			done[int(v)] = true
		}
		for _, m := range migrations {
			if done[m.version] {
				continue
			}
			// No arguments: pgx sends the script with the simple protocol,
			// which runs several statements.
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return dbError(err, fmt.Sprintf("migrate: apply migration %04d_%s", m.version, m.name))
			}
			if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
				return dbError(err, "migrate: record migration")
			}
		}
		return nil
	})
	if err != nil {
		if e, ok := err.(*runstream.Error); ok {
			return e
		}
		return dbError(err, "migrate")
	}
	return nil
}
