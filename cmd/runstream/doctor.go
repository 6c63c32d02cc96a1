package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/postgres"
	"github.com/runstream/runstream/sqlite"
)

// doctorConfig is the configuration of "runstream doctor": the flags of
// serve that name the deployment, and the thresholds of the checks.
type doctorConfig struct {
	store, postgresSchema, sqliteSync, dataDir string
	maxClockSkew                               time.Duration
	minFreeBytes                               uint64
	timeout                                    time.Duration
	// now is the local clock the skew is measured against; time.Now, or
	// a test's.
	now func() time.Time
}

// checkResult is the outcome of one check of the doctor.
type checkResult struct {
	name string
	// status is "ok", "warn", "FAIL" or "skip".
	status string
	detail string
	// fix says what to do about a warning or a failure.
	fix string
}

func ok(name, detail string) checkResult {
	return checkResult{name: name, status: "ok", detail: detail}
}
func skip(name, detail string) checkResult {
	return checkResult{name: name, status: "skip", detail: detail}
}
func failed(name, detail, fix string) checkResult {
	return checkResult{name: name, status: "FAIL", detail: detail, fix: fix}
}
func warned(name, detail, fix string) checkResult {
	return checkResult{name: name, status: "warn", detail: detail, fix: fix}
}

// errChecksFailed is the error of a doctor run with a failed check: exit
// status 1.
var errChecksFailed = errors.New("a check failed")

// doctor checks a deployment as serve would run it — the same flags and
// RUNSTREAM_* variables — and prints each check with what to fix. It
// returns errChecksFailed when a check failed (warnings do not fail).
func (m *Main) doctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := doctorConfig{now: time.Now}
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.StringVar(&cfg.store, "store", "sqlite:./runstream-data/runstream.db", "store URL of the deployment: sqlite:PATH, postgres://… or memory:")
	fs.StringVar(&cfg.postgresSchema, "postgres-schema", "", "PostgreSQL schema of runstream's tables (default: the server's search_path)")
	fs.StringVar(&cfg.sqliteSync, "sqlite-synchronous", "FULL", "the SQLite synchronous mode serve runs with: FULL or NORMAL")
	fs.StringVar(&cfg.dataDir, "data-dir", "./runstream-data", "the server's data directory, whose free space is checked")
	fs.DurationVar(&cfg.maxClockSkew, "max-clock-skew", time.Second, "largest difference allowed between this host's clock and PostgreSQL's")
	fs.Uint64Var(&cfg.minFreeBytes, "min-free-bytes", 1<<30, "least free space wanted on the volumes of the data directory and the SQLite database")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Second, "time allowed to each check that reaches the store")
	if err := m.parseFlags(fs, args, stderr, "runstream doctor [flags]"); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	results := runChecks(ctx, cfg)
	return printChecks(stdout, redactURL(cfg.store), results)
}

// runChecks runs every check of cfg's deployment.
func runChecks(ctx context.Context, cfg doctorConfig) []checkResult {
	switch kind := storeKind(cfg.store); kind {
	case "memory":
		return []checkResult{
			warned("store", "memory: nothing survives a restart", "use --store sqlite:PATH or postgres://… for data that must last"),
			diskCheck(cfg, cfg.dataDir),
		}
	case "sqlite":
		path := strings.TrimPrefix(cfg.store, "sqlite:")
		out := sqliteChecks(ctx, cfg, path)
		out = append(out,
			skip("clock", "the SQLite store uses this host's clock"),
			skip("listener", "a SQLite store has no PostgreSQL listener (one instance per database file)"),
			diskCheck(cfg, cfg.dataDir))
		if dir := filepath.Dir(path); !sameDir(dir, cfg.dataDir) {
			out = append(out, diskCheck(cfg, dir))
		}
		return out
	case "postgres":
		out := postgresChecks(ctx, cfg)
		return append(out, diskCheck(cfg, cfg.dataDir))
	default:
		return []checkResult{failed("store", fmt.Sprintf("--store %q is not a store URL", redactURL(cfg.store)), "give sqlite:PATH, postgres://… or memory:")}
	}
}

// sqliteChecks checks the SQLite database at path: it exists, is
// migrated, and is in WAL mode with a synchronous mode that keeps
// acknowledged writes.
func sqliteChecks(ctx context.Context, cfg doctorConfig, path string) []checkResult {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	in, err := sqlite.Inspect(ctx, path)
	switch {
	case runstream.ErrorCodeOf(err) == runstream.CodeNotFound:
		return []checkResult{failed("store", "no SQLite database at "+path,
			"start runstream serve once with this --store (it creates and migrates the database), or correct --store"),
			skip("durability", "no database")}
	case err != nil:
		return []checkResult{failed("store", runstream.ErrorMessage(err), "check the file's permissions and that it is a runstream SQLite database"),
			skip("durability", "the database cannot be read")}
	}
	out := []checkResult{migrationCheck(in.SchemaVersion, in.LatestVersion)}
	switch {
	case in.JournalMode != "wal":
		out = append(out, failed("durability", fmt.Sprintf("journal_mode is %s, not wal", in.JournalMode),
			"start runstream serve once with this --store: it sets WAL mode, which runstream needs for concurrent reads and its group commit"))
	case strings.EqualFold(cfg.sqliteSync, sqlite.SynchronousNormal):
		out = append(out, warned("durability", "WAL, synchronous=NORMAL: a power loss can lose the last acknowledged writes (a process crash cannot)",
			"run serve with --sqlite-synchronous FULL if acknowledged writes must survive power loss"))
	default:
		out = append(out, ok("durability", "WAL, synchronous=FULL: an acknowledged write survives power loss"))
	}
	return out
}

// postgresChecks checks the PostgreSQL database of cfg: reachable,
// migrated, synchronous_commit, clock skew and LISTEN/NOTIFY.
func postgresChecks(ctx context.Context, cfg doctorConfig) []checkResult {
	ictx, cancel := context.WithTimeout(ctx, cfg.timeout)
	in, err := postgres.Inspect(ictx, cfg.store, cfg.postgresSchema)
	local := cfg.now()
	cancel()
	if err != nil {
		return []checkResult{
			failed("store", "cannot reach PostgreSQL: "+runstream.ErrorMessage(err), "check the URL (host, port, database, user, password, sslmode), the network and pg_hba.conf"),
			skip("durability", "no connection"), skip("clock", "no connection"), skip("listener", "no connection"),
		}
	}
	out := []checkResult{migrationCheck(in.SchemaVersion, in.LatestVersion)}
	switch in.SynchronousCommit {
	case "off":
		out = append(out, failed("durability", "synchronous_commit=off: a crash of PostgreSQL can lose acknowledged writes",
			"set synchronous_commit to on (ALTER DATABASE … SET synchronous_commit = on, or in postgresql.conf)"))
	case "local":
		out = append(out, warned("durability", "synchronous_commit=local: a failover to a replica can lose acknowledged writes",
			"set synchronous_commit to on or remote_apply if the database has synchronous replicas"))
	default:
		out = append(out, ok("durability", "synchronous_commit="+in.SynchronousCommit+": an acknowledged write is on disk"))
	}
	out = append(out, clockCheck(cfg, in, local))
	return append(out, listenerCheck(ctx, cfg))
}

// clockCheck compares PostgreSQL's clock, read in in, with this host's
// clock read at local, right after.
func clockCheck(cfg doctorConfig, in postgres.Inspection, local time.Time) checkResult {
	skew := in.ServerTime.Sub(local.Add(-in.RoundTrip / 2))
	if skew.Abs() > cfg.maxClockSkew {
		way := "behind"
		if skew < 0 {
			way = "ahead of"
		}
		return failed("clock", fmt.Sprintf("this host's clock is %s %s PostgreSQL's (more than %s)", skew.Abs().Round(time.Millisecond), way, cfg.maxClockSkew),
			"synchronise the clocks of every instance and of PostgreSQL with NTP: run leases and event times compare them")
	}
	return ok("clock", fmt.Sprintf("%s from PostgreSQL's (round trip %s)", skew.Round(10*time.Microsecond), in.RoundTrip.Round(10*time.Microsecond)))
}

// listenerCheck checks that LISTEN/NOTIFY works on a connection such as
// the listener of serve opens.
func listenerCheck(ctx context.Context, cfg doctorConfig) checkResult {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if err := postgres.CheckNotify(ctx, cfg.store); err != nil {
		return failed("listener", "LISTEN/NOTIFY does not work: "+runstream.ErrorMessage(err),
			"connect runstream to PostgreSQL directly or through session pooling (a transaction-pooling proxy drops notifications); without them other instances' events reach followers only at the poll interval")
	}
	return ok("listener", "LISTEN/NOTIFY works: other instances' appends wake this one's followers")
}

// migrationCheck compares a store's schema version with the binary's.
func migrationCheck(version, latest int) checkResult {
	switch {
	case version == 0:
		return failed("store", "reachable, but not migrated (no runstream schema)",
			"start runstream serve once with this --store (and --postgres-schema): it applies the migrations at start")
	case version < latest:
		return failed("store", fmt.Sprintf("reachable, schema version %d, this binary's is %d", version, latest),
			"start runstream serve with this binary: it applies the missing migrations at start")
	case version > latest:
		return failed("store", fmt.Sprintf("reachable, schema version %d is newer than this binary's %d", version, latest),
			"run the newer runstream binary that migrated this store")
	}
	return ok("store", fmt.Sprintf("reachable and migrated (schema version %d)", version))
}

// diskCheck checks the free space of the volume of dir (or of its nearest
// existing parent, when it is not created yet).
func diskCheck(cfg doctorConfig, dir string) checkResult {
	at := dir
	for {
		if _, err := os.Stat(at); err == nil {
			break
		}
		parent := filepath.Dir(at)
		if parent == at {
			break
		}
		at = parent
	}
	free, err := freeBytes(at)
	if err != nil {
		return warned("disk", fmt.Sprintf("free space of %s unknown: %v", at, err), "check the free space of the data directory's volume yourself")
	}
	if free < cfg.minFreeBytes {
		return failed("disk", fmt.Sprintf("%s free on the volume of %s, less than %s", humanBytes(free), dir, humanBytes(cfg.minFreeBytes)),
			"free space on that volume or move the data to a larger one: a full disk makes every append fail")
	}
	return ok("disk", fmt.Sprintf("%s free on the volume of %s", humanBytes(free), dir))
}

// sameDir reports whether a and b name the same directory.
func sameDir(a, b string) bool {
	absA, errA := filepath.Abs(a)
	absB, errB := filepath.Abs(b)
	return errA == nil && errB == nil && absA == absB
}

// humanBytes writes n in binary units.
func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// printChecks prints results as a table, each warning and failure with
// its fix, and returns errChecksFailed when one failed.
func printChecks(w io.Writer, store string, results []checkResult) error {
	fmt.Fprintf(w, "runstream doctor: %s\n", store)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	failures := 0
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.status, r.name, r.detail)
		if r.fix != "" {
			fmt.Fprintf(tw, "\t\tfix: %s\n", r.fix)
		}
		if r.status == "FAIL" {
			failures++
		}
	}
	tw.Flush()
	if failures > 0 {
		fmt.Fprintf(w, "%d check(s) failed\n", failures)
		return fmt.Errorf("%w: %d of %d", errChecksFailed, failures, len(results))
	}
	fmt.Fprintln(w, "every check passed")
	return nil
}
