package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/runstream/runstream"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Synchronous modes accepted by Config.Synchronous.
const (
	SynchronousFull   = "FULL"
	SynchronousNormal = "NORMAL"
)

// Config configures Open.
type Config struct {
	// Path is the database file; it is created when missing. Required.
	Path string

	// Synchronous is the SQLite synchronous mode: "FULL" (an acknowledged
	// write survives power loss) or "NORMAL" (it survives a process crash;
	// the last transactions may be lost on power loss). Case-insensitive.
	// Defaults to "FULL".
	Synchronous string

	// BusyTimeout is how long a write waits for another process holding
	// the write lock before it fails with CodeUnavailable. Defaults to 5s.
	BusyTimeout time.Duration

	// MaxTraceContent is the byte limit of trace content, as in
	// runevents.Prepare. Defaults to runevents.DefaultMaxTraceContent.
	MaxTraceContent int

	// ReadConns is the number of read-only connections. Defaults to 4.
	ReadConns int

	// OnCommit, when set, is told the number of writes of each group
	// transaction committed, from the write loop's goroutine (metrics).
	// It must be quick.
	OnCommit func(requests int)

	// checkpointInterval and walRestartFrames are the checkpointer's
	// (tests shorten them); zero: the package's constants.
	checkpointInterval time.Duration
	walRestartFrames   int
}

// withDefaults returns c with defaults applied, or a CodeInvalidArgument
// error.
func (c Config) withDefaults() (Config, error) {
	if c.Path == "" {
		return c, runstream.Errorf(runstream.CodeInvalidArgument, "sqlite: config: Path is required")
	}
	switch strings.ToUpper(c.Synchronous) {
	case "", SynchronousFull:
		c.Synchronous = SynchronousFull
	case SynchronousNormal:
		c.Synchronous = SynchronousNormal
	default:
		return c, runstream.Errorf(runstream.CodeInvalidArgument, "sqlite: config: Synchronous must be FULL or NORMAL, got %q", c.Synchronous)
	}
	if c.BusyTimeout < 0 || c.MaxTraceContent < 0 || c.ReadConns < 0 {
		return c, runstream.Errorf(runstream.CodeInvalidArgument, "sqlite: config: BusyTimeout, MaxTraceContent and ReadConns must not be negative")
	}
	if c.BusyTimeout == 0 {
		c.BusyTimeout = 5 * time.Second
	}
	if c.ReadConns == 0 {
		c.ReadConns = 4
	}
	if c.checkpointInterval == 0 {
		c.checkpointInterval = checkpointInterval
	}
	if c.walRestartFrames == 0 {
		c.walRestartFrames = walRestartFrames
	}
	return c, nil
}

// DB is an open SQLite database: one writer connection, fed by a single
// group-commit goroutine, and a pool of read-only connections. The stores
// of this package share it. It is safe for concurrent use.
type DB struct {
	cfg     Config
	writer  *sql.DB    // exactly one connection; used only by the write loop and Open
	readers *sql.DB    // read-only connections
	reads   *stmtCache // the prepared statements of readers

	synchronous string // as reported by PRAGMA synchronous
	queue       chan *writeRequest
	quit        chan struct{} // closed by Close: the write loop stops
	loopDone    chan struct{} // closed when the write loop has returned
	stats       writeStats
	// beforeCommit run, in order, after the ops of every group transaction
	// and before its commit: stores write there what their ops deferred.
	// They run again after the ops of requests that joined the group
	// meanwhile (DB.runTx). Set while Open runs; used by the write loop
	// only.
	beforeCommit []writeOp
	// afterCommit run, in order, after every group transaction committed,
	// once its callers are answered. Set while Open runs; used by the
	// write loop only.
	afterCommit []func(tx *sql.Tx)

	runEvents   *RunEventStore
	workflows   *WorkflowStore
	runs        *RunStore
	idempotency *IdempotencyStore
	// checkpointer copies the WAL into the file off the writer's path.
	checkpointer *checkpointer

	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) the database at cfg.Path in WAL mode with
// the configured synchronous mode and foreign keys on, applies the embedded
// migrations that are not yet recorded, and starts the write loop.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	path, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, runstream.Wrap(err, runstream.CodeInvalidArgument, "sqlite: config: invalid Path")
	}
	uri := "file:" + (&url.URL{Path: path}).EscapedPath()
	common := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)", cfg.BusyTimeout.Milliseconds())

	// journal_mode is a property of the file, set once by checkPragmas.
	// temp_store=MEMORY keeps the statement journal of multi-row inserts
	// off the disk.
	// wal_autocheckpoint(0): the checkpointer, not the writer, checkpoints.
	writer, err := sql.Open("sqlite", uri+"?"+common+
		"&_pragma=synchronous("+cfg.Synchronous+")&_pragma=temp_store(MEMORY)&_pragma=wal_autocheckpoint(0)&_txlock=immediate")
	if err != nil {
		return nil, sqlError("sqlite: open", err)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)

	db := &DB{
		cfg:      cfg,
		writer:   writer,
		queue:    make(chan *writeRequest, maxGroupRequests),
		quit:     make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	if err := db.checkPragmas(ctx); err != nil {
		writer.Close()
		return nil, err
	}
	if err := migrate(ctx, writer, migrationFiles); err != nil {
		writer.Close()
		return nil, err
	}

	// The read pool opens after the writer so that the WAL index exists.
	// Readers do not map the file (mmap_size stays 0): a reader that
	// begins a read after any commit drops its mapping with its page
	// cache, so under a steady stream of appends every read paid an
	// munmap, an mmap and a page fault per page it touched, which cost
	// more than the preads that replace them (see docs/BENCHMARKS.md).
	readers, err := sql.Open("sqlite", uri+"?mode=ro&"+common+"&_pragma=query_only(1)")
	if err != nil {
		writer.Close()
		return nil, sqlError("sqlite: open read pool", err)
	}
	readers.SetMaxOpenConns(cfg.ReadConns)
	readers.SetMaxIdleConns(cfg.ReadConns)
	if err := readers.PingContext(ctx); err != nil {
		readers.Close()
		writer.Close()
		return nil, sqlError("sqlite: open read pool", err)
	}
	db.readers, db.reads = readers, newStmtCache(readers)

	if db.runEvents, err = newRunEventStore(ctx, db); err != nil {
		readers.Close()
		writer.Close()
		return nil, err
	}
	if db.workflows, err = newWorkflowStore(ctx, db); err != nil {
		db.runEvents.closeStatements()
		readers.Close()
		writer.Close()
		return nil, err
	}
	db.runs, db.idempotency = newRunStore(db), newIdempotencyStore(db)
	ckpt, err := sql.Open("sqlite", uri+"?"+common+"&_pragma=synchronous("+cfg.Synchronous+")")
	if err != nil {
		db.runEvents.closeStatements()
		db.workflows.closeStatements()
		readers.Close()
		writer.Close()
		return nil, sqlError("sqlite: open checkpointer", err)
	}
	ckpt.SetMaxOpenConns(1)
	db.checkpointer = startCheckpointer(ckpt, cfg.checkpointInterval, cfg.walRestartFrames)
	go db.writeLoop()
	return db, nil
}

// checkPragmas switches the file to WAL, verifies that WAL and the
// synchronous mode took effect and records the mode for Durability.
func (db *DB) checkPragmas(ctx context.Context) error {
	var mode string
	if err := db.writer.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return sqlError("sqlite: open: read journal_mode", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return runstream.Errorf(runstream.CodeUnavailable, "sqlite: open: journal_mode is %q, want wal", mode)
	}
	var sync int
	if err := db.writer.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		return sqlError("sqlite: open: read synchronous", err)
	}
	names := map[int]string{0: "OFF", 1: SynchronousNormal, 2: SynchronousFull, 3: "EXTRA"}
	db.synchronous = names[sync]
	if db.synchronous != db.cfg.Synchronous {
		return runstream.Errorf(runstream.CodeUnavailable, "sqlite: open: synchronous is %q, want %q", db.synchronous, db.cfg.Synchronous)
	}
	return nil
}

// Synchronous returns the synchronous mode in effect, "FULL" or "NORMAL",
// as SQLite reports it.
func (db *DB) Synchronous() string { return db.synchronous }

// Durability states what an acknowledged write survives, for start-up logs
// and /readyz.
func (db *DB) Durability() string {
	if db.synchronous == SynchronousFull {
		return "sqlite WAL synchronous=FULL: an acknowledged write survives power loss"
	}
	return "sqlite WAL synchronous=" + db.synchronous + ": an acknowledged write survives a process crash; the last transactions may be lost on power loss"
}

// PoolStats returns the number of connections in use and idle, the
// writer's included, for metrics.
func (db *DB) PoolStats() (inUse, idle int) {
	r, w := db.readers.Stats(), db.writer.Stats()
	return r.InUse + w.InUse, r.Idle + w.Idle
}

// Close stops the write loop after the group in progress (which takes
// in the writes queued until its commit), fails the writes queued after
// it with CodeUnavailable, and closes every connection. It is safe to
// call more than once.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.workflows.Close() // later calls fail with CodeUnavailable
		close(db.quit)
		<-db.loopDone
		var errs []error
		errs = append(errs, db.runEvents.closeStatements(), db.workflows.closeStatements())
		errs = append(errs, db.checkpointer.close(), db.reads.close(), db.readers.Close(), db.writer.Close())
		if err := errors.Join(errs...); err != nil {
			db.closeErr = sqlError("sqlite: close", err)
		}
	})
	return db.closeErr
}

// RunEvents returns the run-event store over db. Every call returns the
// same store. Closing the store does not close db.
func (db *DB) RunEvents() *RunEventStore { return db.runEvents }

// Workflows returns the workflow store over db. Every call returns the
// same store. Closing the store does not close db.
func (db *DB) Workflows() *WorkflowStore { return db.workflows }

// Runs returns the thread run and feedback store over db. Every call
// returns the same store; it fails with CodeUnavailable once db is closed.
func (db *DB) Runs() *RunStore { return db.runs }

// Idempotency returns the idempotency-key store over db. Every call
// returns the same store; it fails with CodeUnavailable once db is closed.
func (db *DB) Idempotency() *IdempotencyStore { return db.idempotency }
