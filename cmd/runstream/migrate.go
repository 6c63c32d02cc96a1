package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/postgres"
	"github.com/runstream/runstream/sqlite"
)

// migrate applies the store's missing schema migrations and exits, as
// serve does when it starts: for an upgrade done before the new servers
// start, or a database prepared ahead of its first server. It prints the
// schema version before and after. A schema newer than the binary's is an
// error, and nothing is changed (serve refuses it on SQLite, and runs on
// it on PostgreSQL, leaving the newer migrations alone).
func (m *Main) migrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg serveConfig
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.StringVar(&cfg.store, "store", "sqlite:./runstream-data/runstream.db", "store URL: sqlite:PATH (created when missing) or postgres://…")
	fs.StringVar(&cfg.postgresSchema, "postgres-schema", "", "PostgreSQL schema of runstream's tables, created when missing (default: the server's search_path)")
	if err := m.parseFlags(fs, args, stderr, "runstream migrate [flags]"); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: migrate takes no arguments, got %q", errUsage, fs.Arg(0))
	}
	name := redactURL(cfg.store)
	kind := storeKind(cfg.store)
	switch kind {
	case "memory":
		fmt.Fprintln(stdout, "--store memory: keeps nothing on disk and has no schema; nothing to migrate")
		return nil
	case "sqlite":
		if strings.TrimPrefix(cfg.store, "sqlite:") == "" {
			return fmt.Errorf("%w: --store sqlite: needs a file path, as in sqlite:./runstream-data/runstream.db", errUsage)
		}
	case "postgres":
	default:
		return fmt.Errorf("%w: --store %q: want sqlite:PATH or postgres://…", errUsage, name)
	}
	before, latest, err := schemaVersion(ctx, kind, cfg)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", name, err)
	}
	if before > latest {
		// serve on PostgreSQL runs on such a schema (an older instance
		// during an upgrade); migrating it with this binary is a mistake.
		return fmt.Errorf("migrate %s: the schema's version %d is newer than this binary's %d: nothing changed; run the newer binary's migrate", name, before, latest)
	}
	cfg.sqliteSync = sqlite.SynchronousFull
	open := m.openBackend
	if open == nil {
		open = openBackend
	}
	b, err := open(ctx, cfg, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return fmt.Errorf("migrate %s: %w", name, err)
	}
	if err := b.close(); err != nil {
		return fmt.Errorf("migrate %s: close: %w", name, err)
	}
	after, _, err := schemaVersion(ctx, kind, cfg)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", name, err)
	}
	if after == before {
		fmt.Fprintf(stdout, "%s: schema version %d, up to date (this binary's latest is %d)\n", name, after, latest)
		return nil
	}
	applied := "migrations"
	if after-before == 1 {
		applied = "migration"
	}
	fmt.Fprintf(stdout, "%s: schema version %d → %d (%d %s applied)\n", name, before, after, after-before, applied)
	return nil
}

// schemaVersion reads the schema version of the store of cfg, of kind
// sqlite or postgres, without changing it (0 for a database that does not
// exist yet), and the newest version this binary knows.
func schemaVersion(ctx context.Context, kind string, cfg serveConfig) (version, latest int, err error) {
	if kind == "sqlite" {
		in, err := sqlite.Inspect(ctx, strings.TrimPrefix(cfg.store, "sqlite:"))
		if runstream.ErrorCodeOf(err) == runstream.CodeNotFound {
			return 0, in.LatestVersion, nil
		}
		return in.SchemaVersion, in.LatestVersion, err
	}
	in, err := postgres.Inspect(ctx, cfg.store, cfg.postgresSchema)
	return in.SchemaVersion, in.LatestVersion, err
}
