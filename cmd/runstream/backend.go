package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/postgres"
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
	ready       func(context.Context) error
	// listen, when not nil, delivers the appends of every instance, this
	// one's included (PostgreSQL LISTEN), each with its run id and newest
	// seq, until ctx is done.
	listen func(ctx context.Context, wake func(runID string, seq int64))
	close  func() error
}

// openBackend opens the store named by cfg.store.
func openBackend(ctx context.Context, cfg serveConfig, logger *slog.Logger) (*backend, error) {
	switch {
	case cfg.store == "memory:":
		events, workflows := memory.NewRunEventStore(), memory.NewWorkflowStore()
		return &backend{
			name:        "memory",
			location:    "process memory (nothing survives a restart)",
			durability:  "memory: none",
			runEvents:   events,
			workflows:   workflows,
			runs:        memory.NewRunStore(),
			threads:     events,
			idempotency: memory.NewIdempotencyStore(),
			ready:       func(context.Context) error { return nil },
			close:       func() error { return errors.Join(events.Close(), workflows.Close()) },
		}, nil
	case strings.HasPrefix(cfg.store, "sqlite:"):
		return openSQLite(ctx, strings.TrimPrefix(cfg.store, "sqlite:"), cfg.sqliteSync)
	case strings.HasPrefix(cfg.store, "postgres://"), strings.HasPrefix(cfg.store, "postgresql://"):
		return openPostgres(ctx, cfg.store, cfg.postgresSchema, logger)
	default:
		return nil, fmt.Errorf("%w: --store %q: want sqlite:PATH, postgres://… or memory:", errUsage, redactURL(cfg.store))
	}
}

// openSQLite opens (creating it and its directory when missing) the SQLite
// database at path.
func openSQLite(ctx context.Context, path, synchronous string) (*backend, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: --store sqlite: needs a file path, as in sqlite:./runstream-data/runstream.db", errUsage)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create the data directory: %w", err)
	}
	db, err := sqlite.Open(ctx, sqlite.Config{Path: path, Synchronous: synchronous})
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
		threads:     db.RunEvents(),
		idempotency: db.Idempotency(),
		ready:       db.Ping,
		close:       db.Close,
	}, nil
}

// openPostgres connects to PostgreSQL; other instances' appends reach this
// one through LISTEN/NOTIFY.
func openPostgres(ctx context.Context, url, schema string, logger *slog.Logger) (*backend, error) {
	db, err := postgres.Open(ctx, postgres.Config{URL: url, Schema: schema, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", redactURL(url), err)
	}
	return &backend{
		name:        "postgres",
		location:    redactURL(url),
		durability:  db.Durability(),
		runEvents:   db.RunEvents(),
		workflows:   db.Workflows(),
		runs:        db.Runs(),
		threads:     db.RunEvents(),
		idempotency: db.Idempotency(),
		ready:       db.Ping,
		listen: func(ctx context.Context, wake func(runID string, seq int64)) {
			db.NewListener(wake).Run(ctx)
		},
		close: db.Close,
	}, nil
}

// redactURL hides the password of a store URL in messages.
func redactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return s
	}
	user, _, _ := strings.Cut(rest[:at], ":")
	return scheme + "://" + user + ":xxxxx@" + rest[at+1:]
}
