package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/runstream/runstream"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// maxGroupRequests bounds how many requests one group transaction carries,
// and is the capacity of the write queue.
const maxGroupRequests = 1024

// writeOp is one caller's work inside a group transaction on the writer
// connection. It returns an error only when the transaction must be rolled
// back; an outcome for its caller that writes nothing (a conflict, say) is
// recorded by the op itself. An op may run twice (after a rolled-back
// group), so it must set its results afresh each time. Ops run one at a
// time in the write loop's goroutine, so state that only ops touch needs
// no lock; work an op defers to the end of the transaction is done by
// DB.beforeCommit.
type writeOp func(ctx context.Context, tx *sql.Tx) error

// writeRequest is a queued writeOp and the channel its answer goes to.
type writeRequest struct {
	ctx  context.Context
	op   writeOp
	done chan error // buffered: the write loop never blocks on it
}

// writeStats counts the write loop's work, for tests and benchmarks.
type writeStats struct {
	transactions atomic.Int64 // BEGIN IMMEDIATE issued
	requests     atomic.Int64 // requests run (a retried one counts once)
	started      atomic.Int64 // groups taken from the queue
}

// write queues op for the write loop and waits for its answer. Every write
// of the package goes through here, so the writer connection has exactly
// one user. If ctx ends first write returns its error; the op may then
// still be committed.
func (db *DB) write(ctx context.Context, op writeOp) error {
	if ctx.Err() != nil {
		return ctxError(ctx)
	}
	r := &writeRequest{ctx: ctx, op: op, done: make(chan error, 1)}
	select {
	case db.queue <- r:
	case <-ctx.Done():
		return ctxError(ctx)
	case <-db.quit:
		return closedError()
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctxError(ctx)
	case <-db.loopDone:
		// The loop answers before it returns, so an answer sent is seen here.
		select {
		case err := <-r.done:
			return err
		default:
			return closedError()
		}
	}
}

// writeLoop takes a request and commits it with every request queued
// behind it, or queued while their transaction runs, as one group, until
// Close.
func (db *DB) writeLoop() {
	defer close(db.loopDone)
	group := make([]*writeRequest, 0, maxGroupRequests)
	for {
		select {
		case r := <-db.queue:
			group = db.takeQueued(db.appendLive(group[:0], r))
		case <-db.quit:
			db.failQueued()
			return
		}
		// A WAL the background checkpoints cannot keep up with is copied
		// now, with no commit in between, so that this group starts it
		// over (see checkpointer).
		if len(group) == 0 {
			continue
		}
		db.checkpointer.catchUp()
		db.stats.started.Add(1)
		db.commitGroup(group)
		clear(group[:cap(group)]) // the requests that joined it too
	}
}

// failQueued answers every queued request with closedError.
func (db *DB) failQueued() {
	for {
		select {
		case r := <-db.queue:
			r.done <- closedError()
		default:
			return
		}
	}
}

// takeQueued appends to group the requests queued now, up to
// maxGroupRequests in all, answering those whose caller gave up.
func (db *DB) takeQueued(group []*writeRequest) []*writeRequest {
	for len(group) < maxGroupRequests {
		select {
		case r := <-db.queue:
			group = db.appendLive(group, r)
		default:
			return group
		}
	}
	return group
}

// appendLive appends r to group, or answers it when its caller gave up.
func (db *DB) appendLive(group []*writeRequest, r *writeRequest) []*writeRequest {
	if r.ctx.Err() != nil {
		r.done <- ctxError(r.ctx)
		return group
	}
	return append(group, r)
}

// commitGroup runs group, whose callers had not given up when it was
// taken, and the requests queued while it runs, in one transaction and
// answers each. The requests that join the group are appended to group's
// array, whose capacity must be maxGroupRequests. When an op or the
// commit fails, the group is rolled back and every request is retried
// alone, so that one bad request gets its own error and does not fail
// the others. What committed is handed to afterCommit once its requests
// are answered: an answered request's goroutine is then ready to run
// before the work afterCommit starts (the followers the thread log
// wakes).
//
// A request queued while the group's ops run joins it, up to
// maxGroupRequests, instead of waiting for the group's commit and then
// paying for one of its own. The loop does not yield to let such
// requests in before it starts: under load (a thousand followers woken
// by the last commit) a yielding loop waited milliseconds for a
// processor, and each append with it.
func (db *DB) commitGroup(group []*writeRequest) {
	tx, live, err := db.runTx(group, db.takeQueued)
	db.stats.requests.Add(int64(len(live)))
	if err == nil && db.cfg.OnCommit != nil {
		db.cfg.OnCommit(len(live))
	}
	if err == nil || len(live) == 1 || errors.Is(err, errBegin) {
		for _, r := range live {
			r.done <- err
		}
		db.committed(tx)
		return
	}
	for _, r := range live {
		tx, _, err := db.runTx([]*writeRequest{r}, nil)
		r.done <- err
		db.committed(tx)
	}
}

// committed runs afterCommit for tx, nil when the transaction failed.
func (db *DB) committed(tx *sql.Tx) {
	if tx == nil {
		return
	}
	for _, f := range db.afterCommit {
		f(tx)
	}
}

// errBegin marks a failure to start the transaction, which no single
// request caused, so retrying them one by one would not help.
var errBegin = errors.New("begin transaction")

// runTx runs reqs in one BEGIN IMMEDIATE transaction and commits it.
// When more is not nil, each time the ops of reqs and DB.beforeCommit
// have run it is asked for more requests to run in the same transaction
// (it appends them to reqs); the commit comes when it has none.
// It returns the committed transaction, or nil and the error, and the
// requests it ran.
func (db *DB) runTx(reqs []*writeRequest, more func([]*writeRequest) []*writeRequest) (*sql.Tx, []*writeRequest, error) {
	// The transaction is not bound to any caller's context: one caller
	// giving up must not abort the others' writes.
	ctx := context.Background()
	db.stats.transactions.Add(1)
	tx, err := db.writer.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the writer DSN sets _txlock
	if err != nil {
		return nil, reqs, sqlError("sqlite: write", fmt.Errorf("%w: %w", errBegin, err))
	}
	for i := 0; ; {
		for ; i < len(reqs); i++ {
			if err := reqs[i].op(ctx, tx); err != nil {
				tx.Rollback()
				return nil, reqs, err
			}
		}
		for _, op := range db.beforeCommit {
			if err := op(ctx, tx); err != nil {
				tx.Rollback()
				return nil, reqs, err
			}
		}
		if more == nil {
			break
		}
		if reqs = more(reqs); i == len(reqs) {
			break
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, reqs, sqlError("sqlite: write: commit", err)
	}
	return tx, reqs, nil
}

// closedError answers calls on a closed store or database.
func closedError() error {
	return runstream.Errorf(runstream.CodeUnavailable, "sqlite: the store is closed")
}

// ctxError reports that ctx ended before the call completed. The result
// unwraps to ctx.Err().
func ctxError(ctx context.Context) error {
	return runstream.Wrap(ctx.Err(), runstream.CodeUnavailable, "sqlite: the call was cancelled or timed out")
}

// sqlError turns a driver error into a *runstream.Error whose message does
// not carry driver text: CodeUnavailable when the database is busy or
// locked by another process (retryable), CodeInternal otherwise. An error
// that already is a *runstream.Error is returned unchanged.
func sqlError(op string, err error) error {
	var rerr *runstream.Error
	if errors.As(err, &rerr) {
		return err
	}
	cause := fmt.Errorf("%s: %w", op, err)
	var serr *sqlite.Error
	if errors.As(err, &serr) {
		switch serr.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return runstream.Wrap(cause, runstream.CodeUnavailable, "%s: the database is busy", op)
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return runstream.Wrap(cause, runstream.CodeUnavailable, "%s: the call was cancelled or timed out", op)
	}
	return runstream.Wrap(cause, runstream.CodeInternal, "%s failed", op)
}
