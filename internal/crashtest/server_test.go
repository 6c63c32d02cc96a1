package crashtest

import (
	"path/filepath"
	"testing"

	"github.com/runstream/runstream/internal/binarytest"
)

func TestMain(m *testing.M) { binarytest.Main(m) }

// server is one runstream serve process.
type server = binarytest.Server

// freePort returns a port nothing listens on now, for a server that must
// come back on the same address after a restart.
func freePort(t *testing.T) string { return binarytest.FreeAddr(t) }

// startServer runs the binary's serve on addr with args and waits until
// it listens. Its log goes to a file in dir, shown when the test fails.
func startServer(t *testing.T, dir, addr string, args ...string) *server {
	t.Helper()
	return binarytest.Start(t, dir, addr, args...)
}

// backendArgs returns the serve flags of a fresh store of the backend:
// a SQLite file in dir, a PostgreSQL schema of its own (dropped at the
// test's end), or, for "jsonl", thread run events (and their idempotency
// keys) in JSON Lines files under dir/events with the rest in a SQLite
// file. The PostgreSQL backend skips without RUNSTREAM_TEST_POSTGRES_URL.
func backendArgs(t *testing.T, backend, dir string) []string {
	t.Helper()
	switch backend {
	case "sqlite":
		return []string{"--store", "sqlite:" + filepath.Join(dir, "runstream.db")}
	case "jsonl":
		return []string{"--store", "sqlite:" + filepath.Join(dir, "runstream.db"), "--run-events", "jsonl:" + filepath.Join(dir, "events")}
	case "postgres":
		return binarytest.PostgresStore(t, "rs_crash_", "the PostgreSQL crash test")
	}
	t.Fatalf("unknown backend %q", backend)
	return nil
}
