package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/runstream/runstream/jsonl"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/postgres"
	"github.com/runstream/runstream/redact"
	"github.com/runstream/runstream/runchunks"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/sqlite"
	"github.com/runstream/runstream/workflow"
)

// backend is the opened store of a server: its name, where its data lives,
// its durability mode, and the domain stores it provides.
type backend struct {
	name       string
	location   string
	durability string
	runEvents  runevents.Store
	workflows  workflow.Store
	// runs, threads and idempotency serve the thread API; nil when the
	// backend does not provide them (the thread endpoints then answer
	// UNAVAILABLE).
	runs        runevents.RunStore
	threads     runevents.ThreadReader
	idempotency runevents.IdempotencyStore
	// chunks keeps the chunks of the LangGraph run streams (package
	// langgraph) in the store's database, with --run-events jsonl: too.
	chunks runchunks.Store
	// wakeChunks, set before listen runs, receives the chunk pushes of
	// every instance (PostgreSQL LISTEN) with their run id and hub seq.
	wakeChunks func(runID string, seq int64)
	ready      func(context.Context) error
	// listen, when not nil, delivers the appends of every instance, this
	// one's included (PostgreSQL LISTEN), until ctx is done: workflow
	// appends to wakeRun with their run id and newest seq, thread appends
	// to wakeThread with their thread id and newest seq, except this
	// one's that the run-event store's group commit hook publishes (the
	// thread log, which publishes to the hub wakeThread wakes).
	listen func(ctx context.Context, wakeRun, wakeThread func(id string, seq int64))
	// listener reports the state of the listener listen runs: whether it
	// is connected and how often it reconnected; nil without a listener.
	listener func() (connected bool, reconnects int64)
	// pool reports the store's connections in use and idle; nil: none.
	pool  func() (inUse, idle int)
	close func() error
}

// openBackend opens the store named by cfg.store and, when cfg.runEvents
// names one, the store that takes the thread run events in its place.
func openBackend(ctx context.Context, cfg serveConfig, logger *slog.Logger) (*backend, error) {
	var jsonlDir string
	switch {
	case cfg.runEvents == "":
	case strings.HasPrefix(cfg.runEvents, "jsonl:") && cfg.runEvents != "jsonl:":
		jsonlDir = strings.TrimPrefix(cfg.runEvents, "jsonl:")
	default:
		return nil, fmt.Errorf("%w: --run-events %q: want jsonl:DIR, or nothing to keep run events in the store", errUsage, cfg.runEvents)
	}
	b, err := openStore(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	if jsonlDir == "" {
		return b, nil
	}
	if err := b.useJSONL(jsonlDir, logger); err != nil {
		return nil, errors.Join(err, b.close())
	}
	return b, nil
}

// useJSONL puts the thread run events of b in the JSONL store in dir
// (created when missing). The run-event store of b's own database is left
// unused; workflows, thread run rows and idempotency keys stay there. The
// JSONL store is closed with b and answers b's readiness check with it.
func (b *backend) useJSONL(dir string, logger *slog.Logger) error {
	events, err := jsonl.Open(jsonl.Config{Dir: dir, Logger: logger})
	if err != nil {
		return fmt.Errorf("open run events in %s: %w", dir, err)
	}
	abs, _ := filepath.Abs(dir)
	storeReady, storeClose := b.ready, b.close
	b.runEvents, b.threads = events, events
	b.location += "; run events: " + abs
	b.durability += "; run events: " + events.Durability()
	b.ready = func(ctx context.Context) error {
		if err := storeReady(ctx); err != nil {
			return err
		}
		return events.Ping(ctx)
	}
	b.close = func() error { return errors.Join(events.Close(), storeClose()) }
	return nil
}

// openStore opens the store named by cfg.store.
func openStore(ctx context.Context, cfg serveConfig, logger *slog.Logger) (*backend, error) {
	switch storeKind(cfg.store) {
	case "memory":
		events, workflows, runs := memory.NewRunEventStore(), memory.NewWorkflowStore(), memory.NewRunStore()
		return &backend{
			name:        "memory",
			location:    "process memory (nothing survives a restart)",
			durability:  "memory: none",
			runEvents:   events,
			workflows:   workflows,
			runs:        runs,
			chunks:      memory.NewChunkStore(runs),
			threads:     events,
			idempotency: memory.NewIdempotencyStore(),
			ready:       func(context.Context) error { return nil },
			close:       func() error { return errors.Join(events.Close(), workflows.Close()) },
		}, nil
	case "sqlite":
		return openSQLite(ctx, strings.TrimPrefix(cfg.store, "sqlite:"), cfg.sqliteSync, cfg.onCommit)
	case "postgres":
		return openPostgres(ctx, cfg.store, cfg.postgresSchema, logger, cfg.onCommit)
	default:
		return nil, fmt.Errorf("%w: --store %q: want sqlite:PATH, postgres://… or memory:", errUsage, redactURL(cfg.store))
	}
}

// storeKind names the backend of a --store URL as backend.name does, or
// "unknown".
func storeKind(store string) string {
	switch {
	case store == "memory:":
		return "memory"
	case strings.HasPrefix(store, "sqlite:"):
		return "sqlite"
	case strings.HasPrefix(store, "postgres://"), strings.HasPrefix(store, "postgresql://"):
		return "postgres"
	}
	return "unknown"
}

// openSQLite opens (creating it and its directory when missing) the SQLite
// database at path; onCommit (nil: none) is told of its group commits.
func openSQLite(ctx context.Context, path, synchronous string, onCommit func(int)) (*backend, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: --store sqlite: needs a file path, as in sqlite:./runstream-data/runstream.db", errUsage)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create the data directory: %w", err)
	}
	db, err := sqlite.Open(ctx, sqlite.Config{Path: path, Synchronous: synchronous, OnCommit: onCommit})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	abs, _ := filepath.Abs(path)
	return &backend{
		name:        "sqlite",
		location:    abs,
		durability:  db.Durability(),
		runEvents:   db.RunEvents(),
		workflows:   db.Workflows(),
		runs:        db.Runs(),
		chunks:      db.Chunks(),
		threads:     db.RunEvents(),
		idempotency: db.Idempotency(),
		ready:       db.Ping,
		pool:        db.PoolStats,
		close:       db.Close,
	}, nil
}

// openPostgres connects to PostgreSQL; other instances' appends reach this
// one through LISTEN/NOTIFY. onCommit (nil: none) is told of its group
// commits.
func openPostgres(ctx context.Context, url, schema string, logger *slog.Logger, onCommit func(int)) (*backend, error) {
	db, err := postgres.Open(ctx, postgres.Config{URL: url, Schema: schema, Logger: logger, OnCommit: onCommit})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", redactURL(url), err)
	}
	var listener atomic.Pointer[postgres.Listener]
	b := &backend{
		name:        "postgres",
		location:    redactURL(url),
		durability:  db.Durability(),
		runEvents:   db.RunEvents(),
		workflows:   db.Workflows(),
		runs:        db.Runs(),
		chunks:      db.Chunks(),
		threads:     db.RunEvents(),
		idempotency: db.Idempotency(),
		ready:       db.Ping,
		listener: func() (bool, int64) {
			if l := listener.Load(); l != nil {
				return l.BackendPID() != 0, l.Reconnects()
			}
			return false, 0
		},
		pool:  db.PoolStats,
		close: db.Close,
	}
	b.listen = func(ctx context.Context, wakeRun, wakeThread func(id string, seq int64)) {
		// The thread log is the store's group commit hook and publishes
		// to the hub wakeThread wakes: this instance's own appends need
		// no wake-up.
		l := db.NewListener(wakeRun).OnThreadAppends(wakeThread).SkipOwnPublished()
		if b.wakeChunks != nil {
			l.OnChunkAppends(b.wakeChunks)
		}
		listener.Store(l)
		l.Run(ctx)
	}
	return b, nil
}

// redactURL hides the secrets of a store URL in messages, as package
// redact hides them anywhere (the password of its user information, its
// password parameters); a query that does not parse is hidden whole.
func redactURL(s string) string {
	if base, query, ok := strings.Cut(s, "?"); ok {
		if _, err := url.ParseQuery(query); err != nil {
			s = base + "?xxxxx"
		}
	}
	return redact.Text(s)
}
