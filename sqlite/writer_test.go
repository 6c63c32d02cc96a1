package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// holdWriteLock takes path's write lock from a connection of its own (as
// another process would) and returns the function that releases it.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	other := openRawWriter(t, path)
	tx, err := other.BeginTx(t.Context(), nil) // BEGIN IMMEDIATE
	if err != nil {
		t.Fatalf("take the write lock: %v", err)
	}
	return func() {
		if err := tx.Rollback(); err != nil {
			t.Errorf("release the write lock: %v", err)
		}
	}
}

// waitUntil polls cond until it holds; it fails the test after a minute.
// It waits for a state of the write loop, it does not measure time.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

type putResult struct {
	rec runevents.Record
	err error
}

// putAsync runs Put in a goroutine and returns the channel of its result.
func putAsync(ctx context.Context, s *RunEventStore, e runevents.NewEvent) <-chan putResult {
	ch := make(chan putResult, 1)
	go func() {
		rec, err := s.Put(ctx, e)
		ch <- putResult{rec, err}
	}()
	return ch
}

func traceEvent(thread string) runevents.NewEvent {
	return runevents.NewEvent{ThreadID: thread, RunID: "r1", EventType: runevents.EventRunStart, Category: runevents.CategoryTrace, UserID: "u"}
}

// queueInOrder returns a function that runs f, which makes one write, in
// a goroutine and waits until that write is queued: writes then queue in
// the order of the calls. The write loop must be held (blockWriter).
func queueInOrder(t *testing.T, db *DB) func(f func()) {
	queued := len(db.queue)
	return func(f func()) {
		t.Helper()
		go f()
		queued++
		waitUntil(t, "the write is queued", func() bool { return len(db.queue) == queued })
	}
}

// blockWriter holds the write lock and makes the write loop take one
// request, which then waits for the lock inside its group; requests sent
// afterwards queue up behind it. release lets everything proceed; the
// blocker's result arrives on the returned channel.
func blockWriter(t *testing.T, db *DB) (release func(), blocker <-chan putResult) {
	t.Helper()
	release = holdWriteLock(t, db.cfg.Path)
	started := db.stats.started.Load()
	blocker = putAsync(t.Context(), db.RunEvents(), traceEvent("blocker"))
	waitUntil(t, "the write loop takes the blocking request", func() bool { return db.stats.started.Load() == started+1 })
	return release, blocker
}

func TestGroupCommitBatchesQueuedWrites(t *testing.T) {
	t.Parallel()
	db := newDB(t, Config{BusyTimeout: time.Minute})
	s := db.RunEvents()
	release, blocker := blockWriter(t, db)

	const n = 50
	results := make([]<-chan putResult, n)
	for i := range results {
		results[i] = putAsync(t.Context(), s, traceEvent("grouped"))
	}
	waitUntil(t, "every write is queued", func() bool { return len(db.queue) == n })
	tx0, req0 := db.stats.transactions.Load(), db.stats.requests.Load()
	release()

	if r := <-blocker; r.err != nil {
		t.Fatalf("blocking Put: %v", r.err)
	}
	seen := map[int64]bool{}
	for _, ch := range results {
		r := <-ch
		if r.err != nil {
			t.Fatalf("Put: %v", r.err)
		}
		seen[r.rec.Seq] = true
	}
	for seq := int64(1); seq <= n; seq++ {
		if !seen[seq] {
			t.Errorf("seq %d missing; got %v", seq, seen)
		}
	}
	// The blocker's transaction was counted before; the 50 writes queued
	// while it waited joined it: no other transaction, 51 requests.
	if tx, req := db.stats.transactions.Load()-tx0, db.stats.requests.Load()-req0; tx != 0 || req != n+1 {
		t.Errorf("%d more transactions for %d requests, want none for %d (the queued writes join the blocker's)", tx, req, n+1)
	}
}

// poisonThread appends thread's first event, then writes a row the
// counter does not know of at seq 2, so that the next append to thread
// breaks UNIQUE (thread_id, seq): an unexpected SQL error.
func poisonThread(t *testing.T, db *DB, thread string) {
	t.Helper()
	if _, err := db.RunEvents().Put(t.Context(), traceEvent(thread)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.writer.ExecContext(t.Context(), `INSERT INTO run_events (thread_id, run_id, event_type, category, content, metadata, seq, created_at)
		VALUES (?, 'r1', 'run.start', 'trace', '""', '{}', 2, '2025-01-01T00:00:00.000000+00:00')`, thread); err != nil {
		t.Fatal(err)
	}
}

// TestGroupFailureDoesNotFailOthers: a group that fails is retried
// request by request; only the request at fault fails, only what
// committed is handed to OnGroupCommit, and the appends the group had
// written before it failed (flushed for a delete) are not kept.
func TestGroupFailureDoesNotFailOthers(t *testing.T) {
	t.Parallel()
	db := newDB(t, Config{BusyTimeout: time.Minute})
	s := db.RunEvents()
	g := watchGroupCommits(t, db)
	poisonThread(t, db, "bad")

	release, blocker := blockWriter(t, db)
	enqueue := queueInOrder(t, db)
	results := map[string]chan putResult{}
	put := func(thread string) {
		results[thread] = make(chan putResult, 1)
		enqueue(func() { rec, err := s.Put(t.Context(), traceEvent(thread)); results[thread] <- putResult{rec, err} })
	}
	put("good-1")
	put("good-2")
	deleted := make(chan error, 1)
	enqueue(func() { _, err := s.DeleteByRun(t.Context(), "other", "r1", runevents.AnyOwner); deleted <- err })
	put("bad")
	tx0 := db.stats.transactions.Load()
	release()
	if r := <-blocker; r.err != nil {
		t.Fatalf("blocking Put: %v", r.err)
	}

	for _, name := range []string{"good-1", "good-2"} {
		if r := <-results[name]; r.err != nil || r.rec.Seq != 1 {
			t.Errorf("Put to %s: seq %d, %v; want seq 1, no error", name, r.rec.Seq, r.err)
		}
	}
	if err := <-deleted; err != nil {
		t.Errorf("DeleteByRun: %v", err)
	}
	r := <-results["bad"]
	wantCode(t, r.err, runstream.CodeInternal, "Put to bad")
	if msg := runstream.ErrorMessage(r.err); strings.Contains(strings.ToLower(msg), "unique") {
		t.Errorf("error message %q carries driver text", msg)
	}
	// One group that failed, then each of its four requests alone.
	if tx := db.stats.transactions.Load() - tx0; tx != 5 {
		t.Errorf("%d transactions, want 5 (the group, then 4 retries)", tx)
	}
	for thread, want := range map[string]int{"good-1": 1, "good-2": 1, "bad": 2} {
		rows, err := s.ListEvents(t.Context(), runevents.ListEventsParams{ThreadID: thread, RunID: "r1", Owner: runevents.AnyOwner, Limit: 10})
		if err != nil || len(rows) != want {
			t.Errorf("thread %s: %d rows (%v), want %d", thread, len(rows), err, want)
		}
	}
	// Close runs after the write loop's last group: every call is in, and
	// the store's state is the loop's last.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"bad:1"}, {"blocker:1"}, {"good-1:1"}, {"good-2:1"}}
	if calls := g.seqsOf(); !reflect.DeepEqual(calls, want) {
		t.Errorf("OnGroupCommit calls %v, want %v", calls, want)
	}
	for i, p := range s.flushed[:cap(s.flushed)] {
		if p != nil {
			t.Errorf("flushed[%d] still holds an append of %s", i, p.recs[0].ThreadID)
		}
	}
}

func TestCancelledQueuedWriteIsNotWritten(t *testing.T) {
	t.Parallel()
	db := newDB(t, Config{BusyTimeout: time.Minute})
	s := db.RunEvents()
	release, blocker := blockWriter(t, db)

	ctx, cancel := context.WithCancel(t.Context())
	cancelled := putAsync(ctx, s, traceEvent("cancelled"))
	waitUntil(t, "the write is queued", func() bool { return len(db.queue) == 1 })
	cancel()
	r := <-cancelled
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("cancelled Put: %v, want context.Canceled", r.err)
	}
	wantCode(t, r.err, runstream.CodeUnavailable, "cancelled Put")

	release()
	if r := <-blocker; r.err != nil {
		t.Fatalf("blocking Put: %v", r.err)
	}
	// A write queued after the cancelled one has passed the write loop.
	if _, err := s.Put(t.Context(), traceEvent("after")); err != nil {
		t.Fatal(err)
	}
	rows, err := s.ListEvents(t.Context(), runevents.ListEventsParams{ThreadID: "cancelled", RunID: "r1", Owner: runevents.AnyOwner, Limit: 10})
	if err != nil || len(rows) != 0 {
		t.Errorf("cancelled write: %d rows stored (%v), want none", len(rows), err)
	}
}

func TestBusyTimeoutIsUnavailable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "runstream.db")
	db := newDB(t, Config{Path: path, BusyTimeout: 50 * time.Millisecond})
	release := holdWriteLock(t, path)
	defer release()
	_, err := db.RunEvents().Put(t.Context(), traceEvent("t"))
	wantCode(t, err, runstream.CodeUnavailable, "Put while another connection holds the write lock")
}

// Within one group, appends are written at the end of the transaction, but
// seqs follow the queue order and ops that read or delete rows see the
// appends queued before them.
func TestDeferredAppendsKeepGroupOrder(t *testing.T) {
	t.Parallel()
	db := newDB(t, Config{BusyTimeout: time.Minute})
	s := db.RunEvents()
	release, blocker := blockWriter(t, db)

	enqueue := queueInOrder(t, db)
	delivery := runevents.NewEvent{ThreadID: "t", RunID: "r1", EventType: runevents.EventRunDelivery, Category: runevents.CategoryOutputs, UserID: "u"}
	first := make(chan putResult, 1)
	enqueue(func() { rec, err := s.Put(t.Context(), delivery); first <- putResult{rec, err} })
	type ifAbsent struct {
		rec     runevents.Record
		created bool
		err     error
	}
	second := make(chan ifAbsent, 1)
	enqueue(func() {
		rec, created, err := s.PutIfAbsent(t.Context(), delivery)
		second <- ifAbsent{rec, created, err}
	})
	batched := make(chan error, 1)
	enqueue(func() {
		_, err := s.PutBatch(t.Context(), []runevents.NewEvent{traceEvent("t"), traceEvent("t")})
		batched <- err
	})
	deleted := make(chan int, 1)
	enqueue(func() {
		n, err := s.DeleteByRun(t.Context(), "t", "r1", runevents.OwnedBy("u"))
		if err != nil {
			t.Error(err)
		}
		deleted <- n
	})
	last := make(chan putResult, 1)
	enqueue(func() { rec, err := s.Put(t.Context(), traceEvent("t")); last <- putResult{rec, err} })
	release()
	if r := <-blocker; r.err != nil {
		t.Fatal(r.err)
	}

	a := <-first
	if a.err != nil || a.rec.Seq != 1 {
		t.Fatalf("Put: seq %d, %v; want 1", a.rec.Seq, a.err)
	}
	if b := <-second; b.err != nil || b.created || b.rec.Seq != 1 {
		t.Errorf("PutIfAbsent after a queued Put of the same type: seq %d, created %v, %v; want the Put's row", b.rec.Seq, b.created, b.err)
	}
	if err := <-batched; err != nil {
		t.Fatal(err)
	}
	if n := <-deleted; n != 3 {
		t.Errorf("DeleteByRun deleted %d rows, want the 3 appended before it", n)
	}
	if r := <-last; r.err != nil || r.rec.Seq != 4 {
		t.Errorf("last Put: seq %d, %v; want 4", r.rec.Seq, r.err)
	}
	if tx := db.stats.started.Load(); tx != 1 {
		t.Errorf("%d groups, want 1 (the blocker's, which the queued writes join)", tx)
	}
}

// ownedAsync runs PutBatchOwned of one event in a goroutine and returns
// the channel of its result.
func ownedAsync(ctx context.Context, s *RunEventStore, user string, e runevents.NewEvent) <-chan putResult {
	ch := make(chan putResult, 1)
	go func() {
		var r putResult
		recs, err := s.PutBatchOwned(ctx, user, []runevents.NewEvent{e})
		if len(recs) == 1 {
			r.rec = recs[0]
		}
		r.err = err
		ch <- r
	}()
	return ch
}

// In one group, PutBatchOwned is checked against the thread as flushed
// before its round of the group (here: as committed, plus the blocker's
// row): an append refused there takes no seq and fails no other write of
// the group, and a thread whose first row is written by an earlier write
// of the same round is not yet anyone's.
func TestPutBatchOwnedInAGroup(t *testing.T) {
	t.Parallel()
	db := newDB(t, Config{BusyTimeout: time.Minute})
	s := db.RunEvents()
	withUser := func(e runevents.NewEvent, user string) runevents.NewEvent { e.UserID = user; return e }
	if _, err := s.Put(t.Context(), withUser(traceEvent("old"), "alice")); err != nil {
		t.Fatal(err)
	}
	release, blocker := blockWriter(t, db)
	tx0 := db.stats.transactions.Load()
	queued := len(db.queue)
	next := func(ch <-chan putResult) <-chan putResult {
		t.Helper()
		queued++
		waitUntil(t, "the write is queued", func() bool { return len(db.queue) == queued })
		return ch
	}
	newFirst := next(putAsync(t.Context(), s, withUser(traceEvent("new"), "alice")))
	newOwned := next(ownedAsync(t.Context(), s, "alice", withUser(traceEvent("new"), "alice")))
	bobs := next(ownedAsync(t.Context(), s, "bob", withUser(traceEvent("old"), "bob")))
	alices := next(ownedAsync(t.Context(), s, "alice", withUser(traceEvent("old"), "alice")))
	release()

	if r := <-blocker; r.err != nil {
		t.Fatalf("blocking Put: %v", r.err)
	}
	if r := <-newFirst; r.err != nil || r.rec.Seq != 1 {
		t.Errorf("the new thread's first Put = seq %d, %v; want 1", r.rec.Seq, r.err)
	}
	if r := <-newOwned; !errors.Is(r.err, runevents.ErrNotFirstOwner) {
		t.Errorf("PutBatchOwned to a thread created in the same group: %v, want ErrNotFirstOwner", r.err)
	}
	if r := <-bobs; !errors.Is(r.err, runevents.ErrNotFirstOwner) {
		t.Errorf("bob's PutBatchOwned to alice's thread: %v, want ErrNotFirstOwner", r.err)
	}
	if r := <-alices; r.err != nil || r.rec.Seq != 2 {
		t.Errorf("alice's PutBatchOwned to her thread = seq %d, %v; want 2 (bob's refused append took none)", r.rec.Seq, r.err)
	}
	if tx := db.stats.transactions.Load() - tx0; tx != 0 {
		t.Errorf("the queued appends took %d more transactions, want none: they join the blocker's, and a refused append must not roll it back", tx)
	}
}

// groupCommits records what OnGroupCommit is handed, and the rows the
// database holds at that moment (read on a connection of its own, so a
// call before the commit would see none of its rows).
type groupCommits struct {
	mu    sync.Mutex
	calls [][]runevents.Record
	rows  []int
}

func watchGroupCommits(t *testing.T, db *DB) *groupCommits {
	t.Helper()
	g := &groupCommits{}
	reader := openRawWriter(t, db.cfg.Path)
	db.RunEvents().OnGroupCommit(func(recs []runevents.Record) {
		var n int
		if err := reader.QueryRow("SELECT count(*) FROM run_events").Scan(&n); err != nil {
			t.Error(err)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		g.calls = append(g.calls, slices.Clone(recs))
		g.rows = append(g.rows, n)
	})
	return g
}

// seqsOf returns the calls' records as "thread:seq" lists.
func (g *groupCommits) seqsOf() [][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out [][]string
	for _, call := range g.calls {
		var s []string
		for _, r := range call {
			s = append(s, fmt.Sprintf("%s:%d", r.ThreadID, r.Seq))
		}
		out = append(out, s)
	}
	return out
}

// The appends of one group transaction reach OnGroupCommit in one call,
// once committed: each thread's records ascending by seq, as their Puts
// queued.
func TestGroupCommitHandsAppendsToOneCall(t *testing.T) {
	t.Parallel()
	db := newDB(t, Config{BusyTimeout: time.Minute})
	s := db.RunEvents()
	g := watchGroupCommits(t, db)
	release, blocker := blockWriter(t, db)

	enqueue := queueInOrder(t, db)
	var results []chan putResult
	for _, thread := range []string{"a", "b", "a", "b", "a"} {
		ch := make(chan putResult, 1)
		enqueue(func() { rec, err := s.Put(t.Context(), traceEvent(thread)); ch <- putResult{rec, err} })
		results = append(results, ch)
	}
	release()
	if r := <-blocker; r.err != nil {
		t.Fatal(r.err)
	}
	for _, ch := range results {
		if r := <-ch; r.err != nil {
			t.Fatal(r.err)
		}
	}
	// The call comes once the Puts are answered.
	// The Puts queued while the blocker waited joined its group.
	waitUntil(t, "OnGroupCommit is handed the group", func() bool { return len(g.seqsOf()) == 1 })
	want := [][]string{{"blocker:1", "a:1", "b:1", "a:2", "b:2", "a:3"}}
	if got := g.seqsOf(); !reflect.DeepEqual(got, want) {
		t.Errorf("OnGroupCommit calls %v, want %v", got, want)
	}
	if !reflect.DeepEqual(g.rows, []int{6}) {
		t.Errorf("rows stored at the call %v, want [6]: the call after the commit", g.rows)
	}
}
