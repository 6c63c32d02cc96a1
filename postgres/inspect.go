package postgres

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runstream/runstream"
)

// Inspection is what Inspect reads of a database without changing it.
type Inspection struct {
	// SchemaVersion is the newest migration applied in the schema (0:
	// none); LatestVersion the newest this binary knows.
	SchemaVersion, LatestVersion int
	// SynchronousCommit is the server's synchronous_commit setting for
	// runstream's connections.
	SynchronousCommit string
	// ServerTime is the server's clock (clock_timestamp()) read in a query
	// that took RoundTrip, the last query of Inspect.
	ServerTime time.Time
	RoundTrip  time.Duration
}

// Inspect connects to the database at url, on schema when not empty, as
// Open would, and reads its schema version, its synchronous_commit and
// its clock, without creating or migrating anything (runstream doctor).
// Errors are *runstream.Error values without the URL or the driver's text
// (the driver error is their cause).
func Inspect(ctx context.Context, url, schema string) (Inspection, error) {
	conn, err := connect(ctx, url, schema)
	if err != nil {
		return Inspection{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	migrations, err := loadMigrations(migrationFiles)
	if err != nil {
		return Inspection{}, runstream.Wrap(err, runstream.CodeInternal, "postgres: inspect: invalid embedded migrations")
	}
	in := Inspection{LatestVersion: len(migrations)}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('schema_migrations') IS NOT NULL").Scan(&exists); err != nil {
		return in, dbError(err, "inspect: look for schema_migrations")
	}
	if exists {
		if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&in.SchemaVersion); err != nil {
			return in, dbError(err, "inspect: read schema_migrations")
		}
	}
	if err := conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&in.SynchronousCommit); err != nil {
		return in, dbError(err, "inspect: read synchronous_commit")
	}
	sent := time.Now()
	if err := conn.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&in.ServerTime); err != nil {
		return in, dbError(err, "inspect: read the clock")
	}
	in.RoundTrip = time.Since(sent)
	return in, nil
}

// CheckNotify checks that LISTEN/NOTIFY works on a connection to the
// database at url, as the Listener of every instance needs: it listens on
// a channel of its own, notifies it and waits for the notification within
// ctx. A connection through a transaction-pooling proxy fails here.
func CheckNotify(ctx context.Context, url string) error {
	conn, err := connect(ctx, url, "")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	channel := fmt.Sprintf("runstream_doctor_%d_%d", os.Getpid(), time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return dbError(err, "check notify: LISTEN")
	}
	if _, err := conn.Exec(ctx, "SELECT pg_notify($1, 'ping')", channel); err != nil {
		return dbError(err, "check notify: NOTIFY")
	}
	if _, err := conn.WaitForNotification(ctx); err != nil {
		return runstream.Wrap(err, runstream.CodeUnavailable, "postgres: a notification sent on this connection did not come back")
	}
	return nil
}

// connect opens one connection to url with schema alone on its
// search_path when not empty.
func connect(ctx context.Context, url, schema string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, runstream.Wrap(err, runstream.CodeInvalidArgument, "postgres: invalid connection URL")
	}
	if schema != "" {
		cfg.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, dbError(err, "cannot reach the database")
	}
	return conn, nil
}
