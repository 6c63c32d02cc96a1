package sqlite

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/runeventstest"
)

// ownedStore is a run-event store that closes its DB when closed, as the
// conformance suite expects of the stores it opens.
type ownedStore struct {
	*RunEventStore
	db *DB
}

func (s ownedStore) Close() error { return errors.Join(s.RunEventStore.Close(), s.db.Close()) }

// openStore opens a DB at path with cfg and returns its run-event store.
func openStore(tb testing.TB, cfg Config) ownedStore {
	tb.Helper()
	db, err := Open(tb.Context(), cfg)
	if err != nil {
		tb.Fatalf("Open(%+v): %v", cfg, err)
	}
	return ownedStore{RunEventStore: db.RunEvents(), db: db}
}

func TestRunEventStoreConformance(t *testing.T) {
	t.Parallel()
	for _, sync := range []string{SynchronousFull, SynchronousNormal} {
		t.Run(sync, func(t *testing.T) {
			t.Parallel()
			runeventstest.RunEventStore(t, runeventstest.Harness{
				Open: func(t *testing.T) runevents.Store {
					return openStore(t, Config{Path: filepath.Join(t.TempDir(), "runstream.db"), Synchronous: sync})
				},
				OpenReopenable: func(t *testing.T) (runevents.Store, func() runevents.Store) {
					cfg := Config{Path: filepath.Join(t.TempDir(), "runstream.db"), Synchronous: sync}
					cur := openStore(t, cfg)
					return cur, func() runevents.Store {
						if err := cur.Close(); err != nil {
							t.Fatalf("Close before reopen: %v", err)
						}
						cur = openStore(t, cfg)
						return cur
					}
				},
			})
		})
	}
}

func BenchmarkRunEventStore(b *testing.B) {
	for _, sync := range []string{SynchronousFull, SynchronousNormal} {
		b.Run(sync, func(b *testing.B) {
			dir := b.TempDir()
			n := 0
			runeventstest.BenchmarkRunEventStore(b, runeventstest.BenchHarness{
				Open: func(b *testing.B) runevents.Store {
					n++ // every benchmark gets its own, empty file
					return openStore(b, Config{Path: filepath.Join(dir, fmt.Sprintf("bench-%d.db", n)), Synchronous: sync})
				},
				Dir: dir,
			})
		})
	}
}
