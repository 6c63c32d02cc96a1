package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// RunEventStore is the runevents.Store of a DB: rows in run_events, the
// per-thread seq counter in run_event_threads. Writes go through the DB's
// group-commit loop; reads use the read-only pool.
type RunEventStore struct {
	db       *DB
	maxTrace int
	closed   atomic.Bool

	// Prepared once on the writer connection and reused by every group.
	bumpSeq     *sql.Stmt
	firstOfType *sql.Stmt
	firstOwner  *sql.Stmt // PutBatchOwned's check
	// inserts[k] inserts 1<<k rows in one statement, k < insertSizes.
	inserts [insertSizes]*sql.Stmt

	// The appends deferred in transaction pendingTx (see flushAppends).
	// Only the write loop uses them.
	pendingTx *sql.Tx
	pending   []*pendingAppend
	// The appends transaction flushedTx wrote (flushAppends), handed to
	// onGroupCommit once it committed. Only the write loop uses them.
	flushedTx   *sql.Tx
	flushed     []*pendingAppend
	groupCommit runevents.GroupCommitHook
}

// insertSizes is the number of multi-row insert statements: 1, 2, 4, … 64
// rows. A batch is inserted in chunks of these sizes (100 = 64+32+4),
// which costs less per row than one statement per row.
const insertSizes = 7

var (
	_ runevents.Store          = (*RunEventStore)(nil)
	_ runevents.Durability     = (*RunEventStore)(nil)
	_ runevents.OwnedAppender  = (*RunEventStore)(nil)
	_ runevents.GroupCommitter = (*RunEventStore)(nil)
)

// recordColumns are the columns scanRecord reads, in its order.
const recordColumns = "thread_id, run_id, user_id, event_type, category, content, metadata, seq, created_at"

// firstOfTypeSQL finds PutIfAbsent's existing row: the earliest of
// (thread, run, event type), whoever owns it.
const firstOfTypeSQL = `SELECT ` + recordColumns + ` FROM run_events
	WHERE thread_id = ? AND run_id = ? AND event_type = ? ORDER BY seq LIMIT 1`

func newRunEventStore(ctx context.Context, db *DB) (*RunEventStore, error) {
	s := &RunEventStore{db: db, maxTrace: db.cfg.MaxTraceContent}
	type statement struct {
		dst   **sql.Stmt
		query string
	}
	stmts := []statement{
		{&s.bumpSeq, `INSERT INTO run_event_threads (thread_id, last_seq) VALUES (?, ?)
			ON CONFLICT (thread_id) DO UPDATE SET last_seq = last_seq + excluded.last_seq
			RETURNING last_seq`},
		{&s.firstOfType, firstOfTypeSQL},
		{&s.firstOwner, firstThreadOwnerSQL},
	}
	for k := range s.inserts {
		values := strings.Repeat(", (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", 1<<k)[2:]
		stmts = append(stmts, statement{&s.inserts[k], `INSERT INTO run_events (thread_id, run_id, user_id,
			event_type, category, content, metadata, task_id, middleware_caller, seq, created_at) VALUES ` + values})
	}
	for _, st := range stmts {
		stmt, err := db.writer.PrepareContext(ctx, st.query)
		if err != nil {
			s.closeStatements()
			return nil, sqlError("sqlite: prepare run-event statements", err)
		}
		*st.dst = stmt
	}
	db.beforeCommit = append(db.beforeCommit, s.flushAppends)
	db.afterCommit = append(db.afterCommit, s.afterCommit)
	return s, nil
}

// OnGroupCommit implements runevents.GroupCommitter.
func (s *RunEventStore) OnGroupCommit(f func(recs []runevents.Record)) { s.groupCommit.Set(f) }

// afterCommit hands the records of the appends tx wrote to the group
// commit hook. It runs in the write loop once tx committed and the
// appends' callers were answered. Appends flushed by a transaction that
// rolled back are dropped here, not kept until the next flush.
func (s *RunEventStore) afterCommit(tx *sql.Tx) {
	flushed := s.flushed
	committed := s.flushedTx == tx
	s.flushedTx, s.flushed = nil, flushed[:0]
	defer clear(flushed)
	f := s.groupCommit.Func()
	if !committed || f == nil {
		return
	}
	if len(flushed) == 1 {
		f(flushed[0].recs)
		return
	}
	n := 0
	for _, p := range flushed {
		n += len(p.recs)
	}
	recs := make([]runevents.Record, 0, n)
	for _, p := range flushed {
		recs = append(recs, p.recs...)
	}
	f(recs)
}

func (s *RunEventStore) closeStatements() error {
	var errs []error
	for _, stmt := range append([]*sql.Stmt{s.bumpSeq, s.firstOfType, s.firstOwner}, s.inserts[:]...) {
		if stmt != nil {
			errs = append(errs, stmt.Close())
		}
	}
	return errors.Join(errs...)
}

// Durability states the durability of acknowledged writes.
func (s *RunEventStore) Durability() string { return s.db.Durability() }

// Close makes every later call fail with CodeUnavailable. It does not close
// the DB, which its owner closes.
func (s *RunEventStore) Close() error {
	s.closed.Store(true)
	return nil
}

// checkOpen fails once the store or its DB is closed.
func (s *RunEventStore) checkOpen() error {
	select {
	case <-s.db.quit:
		return closedError()
	default:
	}
	if s.closed.Load() {
		return closedError()
	}
	return nil
}

// PutIfAbsent appends e unless a row of (thread, run, event type) exists,
// in which case it returns the earliest such row, or CodeConflict when
// that row belongs to another owner. Check and append run in one write
// transaction, serialised with every other writer of the file.
func (s *RunEventStore) PutIfAbsent(ctx context.Context, e runevents.NewEvent) (runevents.Record, bool, error) {
	if err := s.checkOpen(); err != nil {
		return runevents.Record{}, false, err
	}
	rec, err := runevents.Prepare(e, time.Now(), s.maxTrace)
	if err != nil {
		return runevents.Record{}, false, err
	}
	args := rowArgs([]runevents.Record{rec})
	var (
		out      runevents.Record
		created  bool
		conflict bool
	)
	err = s.db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		created, conflict = false, false
		if err := s.flushAppends(ctx, tx); err != nil { // the lookup must see them
			return err
		}
		row := tx.StmtContext(ctx, s.firstOfType).QueryRowContext(ctx, rec.ThreadID, rec.RunID, string(rec.EventType))
		existing, err := scanRecord(row)
		switch {
		case err == nil:
			conflict = existing.UserID != rec.UserID
			out = existing
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return sqlError("sqlite: put run event if absent: look up", err)
		}
		last, err := s.reserveSeqs(ctx, tx, rec.ThreadID, 1)
		if err != nil {
			return err
		}
		args[seqColumn] = last
		if err := s.insertArgs(ctx, tx, args); err != nil {
			return err
		}
		out, created = rec, true
		out.Seq = last
		return nil
	})
	if err != nil {
		return runevents.Record{}, false, err
	}
	if conflict {
		return runevents.Record{}, false, runstream.Errorf(runstream.CodeConflict,
			"an event of type %q already exists for this run under another owner", rec.EventType)
	}
	return out, created, nil
}

// DeleteByThread deletes the thread's rows visible to owner. The thread's
// seq counter is kept, so seqs are not reused.
func (s *RunEventStore) DeleteByThread(ctx context.Context, threadID string, owner runevents.Owner) (int, error) {
	if err := firstError(s.checkOpen(), runevents.ValidateID("thread_id", threadID), runevents.CheckOwner(owner)); err != nil {
		return 0, err
	}
	w := where{}
	w.add("thread_id = ?", threadID)
	w.owner(owner)
	return s.delete(ctx, "sqlite: delete run events by thread", w)
}

// DeleteByRun deletes the run's rows visible to owner. The thread's seq
// counter is kept, so seqs are not reused.
func (s *RunEventStore) DeleteByRun(ctx context.Context, threadID, runID string, owner runevents.Owner) (int, error) {
	if err := firstError(s.checkOpen(), runevents.ValidateID("thread_id", threadID),
		runevents.ValidateID("run_id", runID), runevents.CheckOwner(owner)); err != nil {
		return 0, err
	}
	w := where{}
	w.add("thread_id = ?", threadID)
	w.add("run_id = ?", runID)
	w.owner(owner)
	return s.delete(ctx, "sqlite: delete run events by run", w)
}

func (s *RunEventStore) delete(ctx context.Context, op string, w where) (int, error) {
	var n int64
	err := s.db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := s.flushAppends(ctx, tx); err != nil { // rows appended before count
			return err
		}
		res, err := tx.ExecContext(ctx, "DELETE FROM run_events WHERE "+w.String(), w.args...)
		if err != nil {
			return sqlError(op, err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return sqlError(op, err)
		}
		return nil
	})
	return int(n), err
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
