package postgres

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// Config configures Open.
type Config struct {
	// URL is the connection string, a postgres:// URL or keyword/value
	// pairs as libpq accepts them. Required.
	URL string
	// Schema is the schema holding the tables. Open creates it when it is
	// missing, and every connection of the pool has it alone on its
	// search_path. Defaults to "", which keeps the server's search_path.
	Schema string
	// MaxConns is the size of the connection pool. Defaults to 10.
	MaxConns int32
	// MaxTraceContent is the byte limit of trace content (see the runevents
	// package doc). Defaults to runevents.DefaultMaxTraceContent.
	MaxTraceContent int
	// Committers is the number of goroutines that group-commit run event
	// writes, each holding one connection while it writes. All writes of a
	// thread go to the same committer. The workflow store has as many
	// committers of its own, for workflow appends (all appends to a run go
	// to the same one). Defaults to 2.
	Committers int
	// Logger receives the warnings of listeners (see Listener). Defaults to
	// slog.Default().
	Logger *slog.Logger
	// OnCommit, when set, is told the number of writes of each group
	// transaction committed (run events and workflow appends), from the
	// committers' goroutines (metrics). It must be quick.
	OnCommit func(requests int)
}

const (
	defaultMaxConns   = 10
	defaultCommitters = 2
)

// CreateSchema creates schema, empty, unless it exists, on a connection of
// its own to url (a URL Open takes): for the benchmarks and tests that
// give each run a schema of its own.
func CreateSchema(ctx context.Context, url, schema string) error {
	return execOnce(ctx, url, "create schema", "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize())
}

// DropSchema drops schema, with everything in it, when it exists, on a
// connection of its own to url (a URL Open takes).
func DropSchema(ctx context.Context, url, schema string) error {
	return execOnce(ctx, url, "drop schema", "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
}

// execOnce runs one statement on a connection of its own to url, whose
// pool parameters (pool_max_conns…) it accepts and ignores.
func execOnce(ctx context.Context, url, op, sql string) error {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return runstream.Wrap(err, runstream.CodeInvalidArgument, "postgres: %s: the URL does not parse", op)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return dbError(err, op+": connect")
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return dbError(err, op)
	}
	return nil
}

// DB is a connection pool to a migrated PostgreSQL database and the stores
// built on it. It is safe for concurrent use.
type DB struct {
	pool        *pgxpool.Pool
	durability  string
	runEvents   *RunEventStore
	workflows   *WorkflowStore
	runs        *RunStore
	idempotency *IdempotencyStore
	logger      *slog.Logger
}

// Open connects to the database, applies the embedded migrations that are
// not applied yet, and reads the durability mode. Errors are
// *runstream.Error values whose messages never contain the connection
// string or the driver's text; the driver error is their cause.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if cfg.URL == "" {
		return nil, runstream.Errorf(runstream.CodeInvalidArgument, "postgres: open: a connection URL is required")
	}
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, runstream.Wrap(err, runstream.CodeInvalidArgument, "postgres: open: invalid connection URL")
	}
	if cfg.Schema != "" {
		pcfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{cfg.Schema}.Sanitize()
	}
	pcfg.MaxConns = orDefault(cfg.MaxConns, defaultMaxConns)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, dbError(err, "open")
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, dbError(err, "open: cannot reach the database")
	}
	if err := migrate(ctx, pool, cfg.Schema, migrationFiles); err != nil {
		pool.Close()
		return nil, err
	}
	var syncCommit string
	if err := pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&syncCommit); err != nil {
		pool.Close()
		return nil, dbError(err, "open: read synchronous_commit")
	}
	db := &DB{pool: pool, durability: "postgres synchronous_commit=" + syncCommit}
	db.runEvents = newRunEventStore(pool, db.durability, cfg.MaxTraceContent, orDefault(cfg.Committers, defaultCommitters), cfg.OnCommit)
	db.workflows = newWorkflowStore(pool, db.durability, orDefault(cfg.Committers, defaultCommitters), cfg.OnCommit)
	db.runs, db.idempotency = &RunStore{pool: pool}, &IdempotencyStore{pool: pool}
	db.logger = cfg.Logger
	if db.logger == nil {
		db.logger = slog.Default()
	}
	return db, nil
}

// orDefault returns v, or def when v is not positive.
func orDefault[T int | int32](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Durability reports the server's synchronous_commit setting, read at
// Open: "postgres synchronous_commit=on" means an acknowledged write is in
// the write-ahead log on disk.
func (db *DB) Durability() string { return db.durability }

// RunEvents returns the run event store of db. Every call returns the same
// store.
func (db *DB) RunEvents() *RunEventStore { return db.runEvents }

// PoolStats returns the number of the pool's connections in use and
// idle, for metrics.
func (db *DB) PoolStats() (inUse, idle int) {
	st := db.pool.Stat()
	return int(st.AcquiredConns()), int(st.IdleConns())
}

// Close stops the stores (waiting for their pending writes) and closes the
// pool.
func (db *DB) Close() error {
	err := errors.Join(db.runEvents.Close(), db.workflows.Close())
	db.pool.Close()
	return err
}

// dbError wraps a driver error as a *runstream.Error whose message names
// only the operation: CodeUnavailable when the database could not be
// reached or asked to retry, CodeInternal otherwise.
func dbError(err error, op string) *runstream.Error {
	code := runstream.CodeInternal
	if unavailable(err) {
		code = runstream.CodeUnavailable
	}
	return runstream.Wrap(err, code, "postgres: %s", op)
}

func unavailable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			strings.HasPrefix(pgErr.Code, "57P"), // shutdown, cannot connect now
			pgErr.Code == "53300",                // too many connections
			pgErr.Code == "40001",                // serialization failure
			pgErr.Code == "40P01":                // deadlock detected
			return true
		}
		return false
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) || errors.As(err, &netErr) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.Timeout(err) || pgconn.SafeToRetry(err)
}

var _ runevents.Durability = (*DB)(nil)
