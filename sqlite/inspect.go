package sqlite

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/runstream/runstream"
)

// Inspection is what Inspect reads of a database file without changing it.
type Inspection struct {
	// SchemaVersion is the newest migration applied (0: none);
	// LatestVersion the newest this binary knows.
	SchemaVersion, LatestVersion int
	// JournalMode is the file's journal mode: "wal" for a database Open
	// prepared.
	JournalMode string
}

// Inspect opens the database at path read-only, without creating or
// migrating it, and reads its schema version and journal mode (runstream
// doctor). A missing file is CodeNotFound; a file that cannot be read
// CodeUnavailable.
func Inspect(ctx context.Context, path string) (Inspection, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Inspection{}, runstream.Wrap(err, runstream.CodeInvalidArgument, "sqlite: inspect: invalid path")
	}
	if _, err := os.Stat(abs); err != nil {
		return Inspection{}, runstream.Wrap(err, runstream.CodeNotFound, "sqlite: no database file at %s", abs)
	}
	migrations, err := loadMigrations(migrationFiles)
	if err != nil {
		return Inspection{}, runstream.Wrap(err, runstream.CodeInternal, "sqlite: inspect: invalid embedded migrations")
	}
	in := Inspection{LatestVersion: len(migrations)}
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: abs}).EscapedPath()+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return in, sqlError("sqlite: inspect: open", err)
	}
	defer db.Close()
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&in.JournalMode); err != nil {
		return in, runstream.Wrap(err, runstream.CodeUnavailable, "sqlite: %s cannot be read as a SQLite database", abs)
	}
	in.JournalMode = strings.ToLower(in.JournalMode)
	var tables int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").Scan(&tables); err != nil {
		return in, sqlError("sqlite: inspect: read the schema", err)
	}
	if tables == 0 {
		return in, nil
	}
	if err := db.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&in.SchemaVersion); err != nil {
		return in, sqlError("sqlite: inspect: read schema_migrations", err)
	}
	return in, nil
}
