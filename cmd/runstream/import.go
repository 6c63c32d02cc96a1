package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/deerflowimport"
	"github.com/runstream/runstream/eventlog"
)

// importCommand runs "runstream import deerflow": it copies a DeerFlow
// deployment's data into the store serve would open with the same flags.
func (m *Main) importCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "deerflow" {
		fmt.Fprintln(stderr, "Usage: runstream import deerflow --from DIR|FILE|URL [flags]")
		return fmt.Errorf("%w: import takes one kind of source: deerflow", errUsage)
	}
	cfg := serveConfig{openBackend: m.openBackend}
	var from []string
	opt := deerflowimport.Options{Progress: stderr}
	fs := flag.NewFlagSet("import deerflow", flag.ContinueOnError)
	fs.Func("from", "DeerFlow's data: its JSONL store directory (the one holding threads/), its SQLite file (or sqlite:PATH), or its PostgreSQL URL (postgres://…; ?search_path=SCHEMA selects a schema); repeat for several, e.g. the JSONL events and the database of the run rows and feedback", func(s string) error {
		from = append(from, s)
		return nil
	})
	fs.StringVar(&cfg.store, "store", "sqlite:./runstream-data/runstream.db", "runstream's store, as for serve: sqlite:PATH or postgres://…")
	fs.StringVar(&cfg.runEvents, "run-events", "", "where runstream keeps thread run events, as for serve: jsonl:DIR, or nothing for --store")
	fs.StringVar(&cfg.sqliteSync, "sqlite-synchronous", "FULL", "SQLite synchronous mode, as for serve")
	fs.StringVar(&cfg.postgresSchema, "postgres-schema", "", "PostgreSQL schema of runstream's tables, as for serve")
	fs.StringVar(&opt.DefaultOwner, "owner", "local", "owner given to the rows, run rows and feedback that name none and whose run row names none either (JSONL rows have no user_id: they take their run row's owner from a --from database, else this): a user id of runstream's auth; the default is the user of --auth none")
	fs.BoolVar(&opt.SkipBadRows, "skip-bad-rows", false, "import a thread without its refused rows instead of leaving the thread out (the rows are reported either way)")
	fs.IntVar(&opt.Every, "progress-every", 1000, "print a progress line every N rows read")
	maxRow := fs.Int("max-row-bytes", eventlog.DefaultMaxEventBytes, "largest content and metadata of one row, in bytes, as the ingest's limit; DeerFlow rows above it (a message with an inline image, say) are refused unless it is raised")
	if err := m.parseFlags(fs, args[1:], stderr, "runstream import deerflow --from DIR|FILE|URL [flags]"); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	switch {
	case len(from) == 0:
		return fmt.Errorf("%w: --from is required: DeerFlow's JSONL directory, SQLite file or PostgreSQL URL", errUsage)
	case cfg.store == "memory:":
		return fmt.Errorf("%w: --store memory: keeps nothing once the import ends; name the store serve uses", errUsage)
	case opt.Every < 1 || *maxRow < 1:
		return fmt.Errorf("%w: --progress-every and --max-row-bytes must be positive", errUsage)
	}
	sources, err := openSources(ctx, from)
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range sources {
			s.Close()
		}
	}()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	open := cfg.openBackend
	if open == nil {
		open = openBackend
	}
	b, err := open(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer b.close()
	if b.runs == nil || b.threads == nil {
		return fmt.Errorf("the %s store keeps no thread run rows: it cannot take an import", b.name)
	}
	validator, err := contracts.NewValidator()
	if err != nil {
		return fmt.Errorf("load contracts: %w", err)
	}
	target := deerflowimport.Target{
		Log:     eventlog.NewThreadLog(b.runEvents, validator, nil, eventlog.ThreadLimits{MaxEventBytes: *maxRow}),
		Threads: b.threads,
		Runs:    b.runs,
	}
	fmt.Fprintf(stderr, "deerflow import: into %s (%s)\n", b.name, b.location)
	sum, err := deerflowimport.Import(ctx, target, sources, opt, func(p deerflowimport.Problem) {
		fmt.Fprintf(stderr, "deerflow import: %s\n", p)
	})
	fmt.Fprintf(stderr, "deerflow import: %s\n", sum)
	if err != nil {
		return fmt.Errorf("deerflow import stopped: %w", err)
	}
	if !sum.OK() {
		return fmt.Errorf("deerflow import: %d rows or threads not imported (listed above)", len(sum.Problems))
	}
	return nil
}

// openSources opens each --from: a URL or a sqlite: path is a database,
// a directory a JSONL store, another file a SQLite database.
func openSources(ctx context.Context, from []string) ([]deerflowimport.Source, error) {
	var out []deerflowimport.Source
	fail := func(err error) ([]deerflowimport.Source, error) {
		for _, s := range out {
			s.Close()
		}
		return nil, err
	}
	for _, f := range from {
		var (
			s   deerflowimport.Source
			err error
		)
		info, statErr := os.Stat(f)
		switch {
		case strings.HasPrefix(f, "postgres://"), strings.HasPrefix(f, "postgresql://"), strings.HasPrefix(f, "sqlite:"):
			s, err = deerflowimport.OpenSQL(ctx, f)
		case statErr != nil:
			return fail(fmt.Errorf("%w: --from %s: %v", errUsage, f, statErr))
		case info.IsDir():
			s, err = deerflowimport.OpenJSONL(f)
		default:
			s, err = deerflowimport.OpenSQL(ctx, f)
		}
		if err != nil {
			return fail(err)
		}
		out = append(out, s)
	}
	return out, nil
}
