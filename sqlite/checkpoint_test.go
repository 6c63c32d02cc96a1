package sqlite

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream/runevents"
)

// openCheckpointed opens a database (synchronous=NORMAL, for speed) whose
// checkpointer runs every interval and finds the WAL long at frames.
func openCheckpointed(t *testing.T, interval time.Duration, frames int) *DB {
	t.Helper()
	db, err := Open(t.Context(), Config{Path: filepath.Join(t.TempDir(), "runstream.db"), Synchronous: SynchronousNormal,
		checkpointInterval: interval, walRestartFrames: frames})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Under a steady stream of commits the WAL still starts over: the write
// loop lets a checkpoint catch up once the WAL is long, so the file stays
// near that length instead of growing with every commit.
func TestWALStartsOverUnderSteadyWrites(t *testing.T) {
	t.Parallel()
	db := openCheckpointed(t, 5*time.Millisecond, 40)
	path := db.cfg.Path
	content := []byte(`"` + strings.Repeat("x", 200) + `"`)
	// Writers that always have the next append queued: the write loop
	// never idles, so no background checkpoint ever finishes between
	// two commits.
	const writers, appends = 8, 300
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range appends {
				_, err := db.RunEvents().Put(t.Context(), runevents.NewEvent{
					ThreadID: "t", RunID: "r", EventType: "message", Category: runevents.CategoryMessage,
					Content: content, Metadata: fmt.Appendf(nil, `{"writer":%d,"i":%d}`, w, i),
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	info, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	header := make([]byte, 32)
	f, err := os.Open(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadAt(header, 0); err != nil {
		t.Fatal(err)
	}
	// The WAL header's checkpoint sequence number counts the restarts.
	restarts := binary.BigEndian.Uint32(header[12:16])
	t.Logf("%d groups, WAL %d bytes, %d restarts, %d catch-ups", db.stats.transactions.Load(), info.Size(), restarts, db.checkpointer.caughtUp.Load())
	if restarts == 0 {
		t.Errorf("the WAL never started over in %d group commits", db.stats.transactions.Load())
	}
	// Every catch-up starts the WAL over (none waits for a checkpoint of
	// a WAL that cannot restart): no more catch-ups than restarts.
	if caughtUp := db.checkpointer.caughtUp.Load(); caughtUp > int64(restarts)+1 {
		t.Errorf("%d catch-ups for %d restarts, want one each", caughtUp, restarts)
	}
}

// A catch-up's own checkpoint finds the long WAL it was asked for, which
// the next write starts over: it does not ask for another catch-up (each
// restart cost two, the second on a WAL of a few frames).
func TestCatchUpDoesNotAskForAnother(t *testing.T) {
	t.Parallel()
	db := openCheckpointed(t, time.Hour, 10) // no background checkpoint
	for i := range 30 {
		if _, err := db.RunEvents().Put(t.Context(), runevents.NewEvent{ThreadID: "t", RunID: "r", EventType: runevents.EventRunStart,
			Category: runevents.CategoryTrace, Metadata: fmt.Appendf(nil, `{"i":%d}`, i)}); err != nil {
			t.Fatal(err)
		}
	}
	db.checkpointer.behind.Store(true) // as a background checkpoint of this WAL would
	db.checkpointer.catchUp()
	if n := db.checkpointer.caughtUp.Load(); n != 1 {
		t.Fatalf("%d catch-ups ran, want 1", n)
	}
	if db.checkpointer.behind.Load() {
		t.Error("the catch-up marked the checkpointer behind again")
	}
}

// A reader that keeps a transaction open stops the WAL from starting
// over; the write loop then waits for a catch-up at most once per
// background checkpoint, not before every group.
func TestOpenReaderCostsACatchUpPerCheckpointAtMost(t *testing.T) {
	t.Parallel()
	db := openCheckpointed(t, 20*time.Millisecond, 10)
	put := func(i int) {
		t.Helper()
		if _, err := db.RunEvents().Put(t.Context(), runevents.NewEvent{ThreadID: "t", RunID: "r", EventType: runevents.EventRunStart,
			Category: runevents.CategoryTrace, Metadata: fmt.Appendf(nil, `{"i":%d}`, i)}); err != nil {
			t.Fatal(err)
		}
	}
	put(0)
	reader, err := db.readers.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Rollback()
	var n int
	if err := reader.QueryRow("SELECT count(*) FROM run_events").Scan(&n); err != nil { // takes its snapshot
		t.Fatal(err)
	}
	ticks0, caughtUp0 := db.checkpointer.ticks.Load(), db.checkpointer.caughtUp.Load()
	for i := 1; i <= 300; i++ {
		put(i)
	}
	ticks, caughtUp := db.checkpointer.ticks.Load()-ticks0, db.checkpointer.caughtUp.Load()-caughtUp0
	t.Logf("300 groups, %d background checkpoints, %d catch-ups", ticks, caughtUp)
	if caughtUp > ticks+1 {
		t.Errorf("%d catch-ups for %d background checkpoints: want one at most per checkpoint", caughtUp, ticks)
	}
}
