package postgres

import (
	"context"
	"crypto/rand"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// RunEventStore is the runevents.Store of a DB: table run_events, seqs from
// the per-thread counter rows of run_event_threads. It is safe for
// concurrent use, by any number of processes sharing the database.
type RunEventStore struct {
	pool       *pgxpool.Pool
	durability string
	maxTrace   int

	mu         sync.RWMutex // guards closed against the sends to committers
	closed     bool
	committers []*committer
	// groupCommit holds OnGroupCommit's function, shared with the
	// committers.
	groupCommit runevents.GroupCommitHook
	// origin tells this store's notifications from other processes' (see
	// notifyOrigin).
	origin string
}

var (
	_ runevents.Store          = (*RunEventStore)(nil)
	_ runevents.Durability     = (*RunEventStore)(nil)
	_ runevents.OwnedAppender  = (*RunEventStore)(nil)
	_ runevents.GroupCommitter = (*RunEventStore)(nil)
)

func newRunEventStore(pool *pgxpool.Pool, durability string, maxTrace, committers int, onCommit func(int)) *RunEventStore {
	s := &RunEventStore{pool: pool, durability: durability, maxTrace: maxTrace, origin: rand.Text()[:16]}
	for range committers {
		s.committers = append(s.committers, newCommitter(pool, s.origin, onCommit, &s.groupCommit))
	}
	return s
}

// OnGroupCommit implements runevents.GroupCommitter. The committers run
// side by side, each for its share of the threads, so f may be called
// concurrently for different threads.
func (s *RunEventStore) OnGroupCommit(f func(recs []runevents.Record)) { s.groupCommit.Set(f) }

// Durability reports the durability mode of the DB (see DB.Durability).
func (s *RunEventStore) Durability() string { return s.durability }

// Close stops accepting writes, waits for the queued ones to be committed
// and answered, and returns. It does not close the pool, which belongs to
// the DB. Close is idempotent.
func (s *RunEventStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for _, c := range s.committers {
		close(c.queue)
	}
	s.mu.Unlock()
	for _, c := range s.committers {
		<-c.stopped
	}
	return nil
}

// Put appends one event through the group committer.
func (s *RunEventStore) Put(ctx context.Context, e runevents.NewEvent) (runevents.Record, error) {
	rec, err := runevents.Prepare(e, time.Now(), s.maxTrace)
	if err != nil {
		return runevents.Record{}, err
	}
	if err := checkStorable(rec, -1); err != nil {
		return runevents.Record{}, err
	}
	recs := []runevents.Record{rec}
	if err := s.write(ctx, &writeRequest{ctx: ctx, recs: recs}); err != nil {
		return runevents.Record{}, err
	}
	return recs[0], nil
}

// PutBatch appends events of one thread atomically, through the group
// committer: the batch may share its transaction with other writes, never
// be split.
func (s *RunEventStore) PutBatch(ctx context.Context, events []runevents.NewEvent) ([]runevents.Record, error) {
	recs, err := s.prepareBatch(events)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	if err := s.write(ctx, &writeRequest{ctx: ctx, recs: recs}); err != nil {
		return nil, err
	}
	return recs, nil
}

// prepareBatch prepares events for a batch write and checks that
// PostgreSQL can store them.
func (s *RunEventStore) prepareBatch(events []runevents.NewEvent) ([]runevents.Record, error) {
	recs, err := runevents.PrepareBatch(events, time.Now(), s.maxTrace)
	if err != nil {
		return nil, err
	}
	if err := checkStorableBatch(recs); err != nil {
		return nil, err
	}
	return recs, nil
}

// PutBatchOwned is PutBatch when the thread's first row is userID's,
// read by the append's own statement; otherwise it writes nothing and
// returns runevents.ErrNotFirstOwner. Rows committed after the
// statement's snapshot do not count: a thread created by a concurrent
// write answers ErrNotFirstOwner.
func (s *RunEventStore) PutBatchOwned(ctx context.Context, userID string, events []runevents.NewEvent) ([]runevents.Record, error) {
	if userID == "" {
		return nil, runstream.Errorf(runstream.CodeInvalidArgument, "postgres: put events: an owner is required")
	}
	recs, err := s.prepareBatch(events)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	req := &writeRequest{ctx: ctx, recs: recs, owner: userID}
	if err := s.write(ctx, req); err != nil {
		return nil, err
	}
	if req.refused {
		return nil, runevents.ErrNotFirstOwner
	}
	return recs, nil
}

// write queues req (records of one thread) to the thread's committer and
// waits for the outcome or for ctx.
func (s *RunEventStore) write(ctx context.Context, req *writeRequest) error {
	recs := req.recs
	req.done = make(chan error, 1)
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return errClosed()
	}
	c := s.committers[shard(recs[0].ThreadID, len(s.committers))]
	select {
	case c.queue <- req:
	case <-ctx.Done():
		s.mu.RUnlock()
		return cancelled(ctx.Err())
	}
	s.mu.RUnlock()
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return cancelled(ctx.Err())
	}
}

func errClosed() *runstream.Error {
	return runstream.Errorf(runstream.CodeUnavailable, "postgres: run event store is closed")
}

// PutIfAbsent locks the thread's counter row first, so that the existence
// check and the insert are atomic against every writer of the thread in
// every process; then it returns the earliest row of (thread, run, event
// type) or appends e.
func (s *RunEventStore) PutIfAbsent(ctx context.Context, e runevents.NewEvent) (runevents.Record, bool, error) {
	rec, err := runevents.Prepare(e, time.Now(), s.maxTrace)
	if err != nil {
		return runevents.Record{}, false, err
	}
	if err := checkStorable(rec, -1); err != nil {
		return runevents.Record{}, false, err
	}
	if err := s.checkOpen(); err != nil {
		return runevents.Record{}, false, err
	}
	var existing []runevents.Record
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Adding 0 to the counter takes its row lock, creating the row
		// for a new thread.
		if _, err := tx.Exec(ctx, `INSERT INTO run_event_threads (thread_id, last_seq) VALUES ($1, 0)
			ON CONFLICT (thread_id) DO UPDATE SET last_seq = run_event_threads.last_seq`, rec.ThreadID); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT `+recordColumns+` FROM run_events
			WHERE thread_id = $1 AND run_id = $2 AND event_type = $3 ORDER BY seq LIMIT 1`,
			rec.ThreadID, rec.RunID, string(rec.EventType))
		if err != nil {
			return err
		}
		if existing, err = scanRecords(rows); err != nil || len(existing) > 0 {
			return err
		}
		var cols columns
		cols.add(&rec)
		return tx.QueryRow(ctx, appendRows, append(cols.args(rec.ThreadID), untagged)...).Scan(&rec.Seq)
	})
	if err != nil {
		return runevents.Record{}, false, dbError(err, "put event if absent")
	}
	if len(existing) > 0 {
		if existing[0].UserID != rec.UserID {
			return runevents.Record{}, false, runstream.Errorf(runstream.CodeConflict,
				"an event of type %s already exists in this run and belongs to another owner", rec.EventType)
		}
		return existing[0], false, nil
	}
	return rec, true, nil
}

func (s *RunEventStore) checkOpen() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return errClosed()
	}
	return nil
}
