package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/runstream/runstream/runchunks"
	"github.com/runstream/runstream/runevents"
)

// ChunkStore is the runchunks.Store of a DB: runs in stream_runs, chunks
// in stream_chunks (migrations/0006_run_chunks.sql). A push is one op of
// the group-commit loop: it reads the run, decides with runchunks.Plan and
// writes the run, its new chunks, the cap's deletions and the thread run
// row (created "running", terminal status with the end) in the same
// transaction. Reads use the read-only pool.
type ChunkStore struct {
	db *DB
}

var _ runchunks.Store = (*ChunkStore)(nil)

// Chunks returns the chunk store over db.
func (db *DB) Chunks() *ChunkStore { return &ChunkStore{db: db} }

const streamRunColumns = `run_id, thread_id, owner_id, epoch, next_index, first_index, status,
	lease_expires_at, cancel_action, cancel_requested_at, created_at, updated_at, ended_at`

// micros0 is t in microseconds, 0 for the zero time.
func micros0(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// fromMicros0 is micros0's inverse, in UTC.
func fromMicros0(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

func scanStreamRun(row interface{ Scan(...any) error }) (runchunks.Run, error) {
	var (
		r                       runchunks.Run
		status                  string
		lease, created, updated int64
		cancelAction            sql.NullString
		cancelAt, ended         sql.NullInt64
	)
	if err := row.Scan(&r.RunID, &r.ThreadID, &r.OwnerID, &r.Epoch, &r.NextIndex, &r.FirstIndex, &status,
		&lease, &cancelAction, &cancelAt, &created, &updated, &ended); err != nil {
		return runchunks.Run{}, err
	}
	r.Status = runevents.RunStatus(status)
	r.LeaseExpiresAt, r.CreatedAt, r.UpdatedAt = fromMicros0(lease), fromMicros0(created), fromMicros0(updated)
	if cancelAction.Valid {
		r.Cancel = &runchunks.Cancel{Action: cancelAction.String, RequestedAt: fromMicros0(cancelAt.Int64)}
	}
	if ended.Valid {
		r.EndedAt = fromMicros0(ended.Int64)
	}
	return r, nil
}

func streamRunArgs(r runchunks.Run) []any {
	var cancelAction, cancelAt, ended any
	if r.Cancel != nil {
		cancelAction, cancelAt = r.Cancel.Action, micros0(r.Cancel.RequestedAt)
	}
	if r.Ended() {
		ended = micros0(r.EndedAt)
	}
	return []any{r.RunID, r.ThreadID, r.OwnerID, r.Epoch, r.NextIndex, r.FirstIndex, string(r.Status),
		micros0(r.LeaseExpiresAt), cancelAction, cancelAt, micros0(r.CreatedAt), micros0(r.UpdatedAt), ended}
}

const upsertStreamRunSQL = `INSERT INTO stream_runs (` + streamRunColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (run_id) DO UPDATE SET epoch = excluded.epoch, next_index = excluded.next_index,
		first_index = excluded.first_index, status = excluded.status, lease_expires_at = excluded.lease_expires_at,
		cancel_action = excluded.cancel_action, cancel_requested_at = excluded.cancel_requested_at,
		updated_at = excluded.updated_at, ended_at = excluded.ended_at`

// Push applies p as runchunks.Plan decides it, in one transaction.
func (s *ChunkStore) Push(ctx context.Context, p runchunks.Push) (runchunks.Result, error) {
	if err := checkDBOpen(s.db); err != nil {
		return runchunks.Result{}, err
	}
	var (
		res     runchunks.Result
		outcome error // Plan's refusal: nothing written
	)
	err := s.db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, outcome = runchunks.Result{}, nil
		var cur *runchunks.Run
		r, err := scanStreamRun(tx.QueryRowContext(ctx, "SELECT "+streamRunColumns+" FROM stream_runs WHERE run_id = ?", p.RunID))
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return sqlError("sqlite: push chunks: read run", err)
		default:
			cur = &r
		}
		res, outcome = runchunks.Plan(cur, p)
		if outcome != nil || res.Skipped || (cur != nil && cur.Ended()) { // an ended run's duplicate writes nothing
			return nil
		}
		if res.Created || res.Ended {
			if outcome, err = putThreadRunStatus(ctx, tx, res.Run); outcome != nil || err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, upsertStreamRunSQL, streamRunArgs(res.Run)...); err != nil {
			return sqlError("sqlite: push chunks: write run", err)
		}
		for _, c := range res.Appended {
			if _, err := tx.ExecContext(ctx, "INSERT INTO stream_chunks (run_id, idx, event, data, created_at) VALUES (?, ?, ?, ?, ?)",
				p.RunID, c.Index, c.Event, []byte(c.Data), micros0(c.CreatedAt)); err != nil {
				return sqlError("sqlite: push chunks: insert chunk", err)
			}
		}
		// A new run has no stored chunks: Plan leaves out the appends below
		// its FirstIndex, so only an existing run's cap moves delete.
		if cur != nil && res.Run.FirstIndex > cur.FirstIndex {
			if _, err := tx.ExecContext(ctx, "DELETE FROM stream_chunks WHERE run_id = ? AND idx < ?", p.RunID, res.Run.FirstIndex); err != nil {
				return sqlError("sqlite: push chunks: cap", err)
			}
		}
		return nil
	})
	if err != nil {
		return runchunks.Result{}, err
	}
	return res, outcome
}

// putThreadRunStatus creates the thread run row of r with its status, or
// sets the status of the existing row; another owner's row is refused
// (the outcome, CodeNotFound).
func putThreadRunStatus(ctx context.Context, tx *sql.Tx, r runchunks.Run) (outcome, err error) {
	var owner string
	err = tx.QueryRowContext(ctx, "SELECT owner_id FROM thread_runs WHERE thread_id = ? AND run_id = ?", r.ThreadID, r.RunID).Scan(&owner)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		var args []any
		_, args, err = runRowArgs(runevents.ThreadRun{ThreadID: r.ThreadID, RunID: r.RunID, OwnerID: r.OwnerID, OperationKind: "run", Status: r.Status,
			CreatedAt: r.UpdatedAt, UpdatedAt: r.UpdatedAt}, r.UpdatedAt)
		if err == nil {
			_, err = tx.ExecContext(ctx, putRunSQL, args...)
		}
	case err != nil:
	case owner != r.OwnerID:
		return runchunks.NotFound(r.RunID), nil
	default:
		_, err = tx.ExecContext(ctx, "UPDATE thread_runs SET status = ?, updated_at = ?, updated_offset = 0 WHERE thread_id = ? AND run_id = ?",
			string(r.Status), micros0(r.UpdatedAt), r.ThreadID, r.RunID)
	}
	if err != nil {
		return nil, sqlError("sqlite: push chunks: thread run row", err)
	}
	return nil, nil
}

// GetRun returns the run.
func (s *ChunkStore) GetRun(ctx context.Context, runID string) (runchunks.Run, error) {
	if err := checkDBOpen(s.db); err != nil {
		return runchunks.Run{}, err
	}
	r, err := scanStreamRun(s.db.reads.queryRow(ctx, "SELECT "+streamRunColumns+" FROM stream_runs WHERE run_id = ?", runID))
	if errors.Is(err, sql.ErrNoRows) {
		return runchunks.Run{}, runchunks.NotFound(runID)
	}
	if err != nil {
		return runchunks.Run{}, sqlError("sqlite: get stream run", err)
	}
	return r, nil
}

// ReadChunks returns up to limit chunks with index > after, up to
// maxBytes of data (runchunks.Store): it stops reading rows there.
func (s *ChunkStore) ReadChunks(ctx context.Context, runID string, after int64, limit, maxBytes int) ([]runchunks.Chunk, error) {
	if err := checkDBOpen(s.db); err != nil {
		return nil, err
	}
	rows, err := s.db.reads.query(ctx, "SELECT idx, event, data, created_at FROM stream_chunks WHERE run_id = ? AND idx > ? ORDER BY idx LIMIT ?", runID, after, limit)
	if err != nil {
		return nil, sqlError("sqlite: read chunks", err)
	}
	defer rows.Close()
	var out []runchunks.Chunk
	read := 0
	for (maxBytes <= 0 || read < maxBytes) && rows.Next() {
		var (
			c       runchunks.Chunk
			created int64
		)
		if err := rows.Scan(&c.Index, &c.Event, (*[]byte)(&c.Data), &created); err != nil {
			return nil, sqlError("sqlite: read chunks", err)
		}
		c.CreatedAt = fromMicros0(created)
		out = append(out, c)
		read += len(c.Data)
	}
	if err := rows.Err(); err != nil {
		return nil, sqlError("sqlite: read chunks", err)
	}
	return out, nil
}

// RequestCancel stores a cancel request on an active run.
func (s *ChunkStore) RequestCancel(ctx context.Context, runID, action string, at time.Time) (runchunks.Run, error) {
	if err := checkDBOpen(s.db); err != nil {
		return runchunks.Run{}, err
	}
	var (
		run   runchunks.Run
		found bool
	)
	err := s.db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		found = false
		r, err := scanStreamRun(tx.QueryRowContext(ctx, `UPDATE stream_runs
			SET cancel_action = ?1, cancel_requested_at = CASE WHEN cancel_action IS ?1 THEN coalesce(cancel_requested_at, ?2) ELSE ?2 END
			WHERE run_id = ?3 AND ended_at IS NULL RETURNING `+streamRunColumns, action, micros0(at), runID))
		if errors.Is(err, sql.ErrNoRows) {
			r, err = scanStreamRun(tx.QueryRowContext(ctx, "SELECT "+streamRunColumns+" FROM stream_runs WHERE run_id = ?", runID))
		}
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return sqlError("sqlite: request cancel", err)
		}
		run, found = r, true
		return nil
	})
	if err != nil {
		return runchunks.Run{}, err
	}
	if !found {
		return runchunks.Run{}, runchunks.NotFound(runID)
	}
	return run, nil
}

// ExpiredRuns returns up to limit active runs whose lease expired at now.
func (s *ChunkStore) ExpiredRuns(ctx context.Context, now time.Time, limit int) ([]runchunks.Run, error) {
	if err := checkDBOpen(s.db); err != nil {
		return nil, err
	}
	rows, err := s.db.reads.query(ctx, "SELECT "+streamRunColumns+" FROM stream_runs WHERE ended_at IS NULL AND lease_expires_at <= ? ORDER BY lease_expires_at LIMIT ?", micros0(now), limit)
	if err != nil {
		return nil, sqlError("sqlite: expired runs", err)
	}
	defer rows.Close()
	var out []runchunks.Run
	for rows.Next() {
		r, err := scanStreamRun(rows)
		if err != nil {
			return nil, sqlError("sqlite: expired runs", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, sqlError("sqlite: expired runs", err)
	}
	return out, nil
}

// DeleteEndedChunks deletes the chunks of runs that ended before before.
func (s *ChunkStore) DeleteEndedChunks(ctx context.Context, before time.Time) (int64, error) {
	if err := checkDBOpen(s.db); err != nil {
		return 0, err
	}
	var n int64
	err := s.db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		n = 0
		res, err := tx.ExecContext(ctx, `DELETE FROM stream_chunks WHERE run_id IN (SELECT run_id FROM stream_runs
			WHERE ended_at IS NOT NULL AND first_index < next_index AND ended_at < ?)`, micros0(before))
		if err != nil {
			return sqlError("sqlite: delete ended chunks", err)
		}
		n, _ = res.RowsAffected()
		if _, err := tx.ExecContext(ctx, `UPDATE stream_runs SET first_index = next_index
			WHERE ended_at IS NOT NULL AND first_index < next_index AND ended_at < ?`, micros0(before)); err != nil {
			return sqlError("sqlite: delete ended chunks", err)
		}
		return nil
	})
	if err != nil {
		return 0, err // n may still be written by a write that outlived ctx
	}
	return n, nil
}
