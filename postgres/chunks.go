package postgres

import (
	"context"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runchunks"
	"github.com/runstream/runstream/runevents"
)

// ChunkNotifyChannel is the notification channel on which a push
// announces, on commit, the chunks and the end it wrote: payload "<run
// id>:<seq>", seq being the hub seq of the last (chunk index + 1; the end
// is the seq after the last chunk's).
const ChunkNotifyChannel = "runstream_chunks"

// ChunkStore is the runchunks.Store of a DB: runs in stream_runs, chunks
// in stream_chunks (migrations/0005_run_chunks.sql). A push is one
// transaction: a transaction-scoped advisory lock on the run id (so that
// two first pushes do not both create it), the run's row read FOR UPDATE
// (so that a cancel request waits for the push), runchunks.Plan, then the
// run, its new chunks, the cap's deletions, the thread run row and the
// notification. It is safe for concurrent use by any number of processes.
type ChunkStore struct {
	pool *pgxpool.Pool
}

var _ runchunks.Store = (*ChunkStore)(nil)

// Chunks returns the chunk store of db.
func (db *DB) Chunks() *ChunkStore { return &ChunkStore{pool: db.pool} }

const streamRunColumns = `run_id, thread_id, owner_id, epoch, next_index, first_index, status,
	lease_expires_at, cancel_action, cancel_requested_at, created_at, updated_at, ended_at`

func scanStreamRun(row pgx.Row) (runchunks.Run, error) {
	var (
		r                      runchunks.Run
		status                 string
		lease, cancelAt, ended *time.Time
		cancelAction           *string
	)
	if err := row.Scan(&r.RunID, &r.ThreadID, &r.OwnerID, &r.Epoch, &r.NextIndex, &r.FirstIndex, &status,
		&lease, &cancelAction, &cancelAt, &r.CreatedAt, &r.UpdatedAt, &ended); err != nil {
		return runchunks.Run{}, err
	}
	r.Status = runevents.RunStatus(status)
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	if lease != nil {
		r.LeaseExpiresAt = lease.UTC()
	}
	if cancelAction != nil {
		r.Cancel = &runchunks.Cancel{Action: *cancelAction}
		if cancelAt != nil {
			r.Cancel.RequestedAt = cancelAt.UTC()
		}
	}
	if ended != nil {
		r.EndedAt = ended.UTC()
	}
	return r, nil
}

func streamRunArgs(r runchunks.Run) []any {
	var cancelAction, cancelAt any
	if r.Cancel != nil {
		cancelAction, cancelAt = r.Cancel.Action, r.Cancel.RequestedAt
	}
	return []any{r.RunID, r.ThreadID, r.OwnerID, r.Epoch, r.NextIndex, r.FirstIndex, string(r.Status),
		nullTime(r.LeaseExpiresAt), cancelAction, cancelAt, r.CreatedAt, r.UpdatedAt, nullTime(r.EndedAt)}
}

const upsertStreamRunSQL = `INSERT INTO stream_runs (` + streamRunColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
	ON CONFLICT (run_id) DO UPDATE SET epoch = EXCLUDED.epoch, next_index = EXCLUDED.next_index,
		first_index = EXCLUDED.first_index, status = EXCLUDED.status, lease_expires_at = EXCLUDED.lease_expires_at,
		cancel_action = EXCLUDED.cancel_action, cancel_requested_at = EXCLUDED.cancel_requested_at,
		updated_at = EXCLUDED.updated_at, ended_at = EXCLUDED.ended_at`

// Push applies p as runchunks.Plan decides it, in one transaction.
func (s *ChunkStore) Push(ctx context.Context, p runchunks.Push) (runchunks.Result, error) {
	var (
		res     runchunks.Result
		outcome error
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res, outcome = runchunks.Result{}, nil
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "runstream_chunks:"+p.RunID); err != nil {
			return dbError(err, "push chunks: lock")
		}
		var cur *runchunks.Run
		r, err := scanStreamRun(tx.QueryRow(ctx, "SELECT "+streamRunColumns+" FROM stream_runs WHERE run_id = $1 FOR UPDATE", p.RunID))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return dbError(err, "push chunks: read run")
		default:
			cur = &r
		}
		res, outcome = runchunks.Plan(cur, p)
		if outcome != nil || res.Skipped || (cur != nil && cur.Ended()) {
			return nil
		}
		if res.Created || res.Ended {
			if outcome, err = putThreadRunStatus(ctx, tx, res.Run); outcome != nil || err != nil {
				return err
			}
		}
		b := &pgx.Batch{}
		b.Queue(upsertStreamRunSQL, streamRunArgs(res.Run)...)
		for _, c := range res.Appended {
			b.Queue("INSERT INTO stream_chunks (run_id, idx, event, data, created_at) VALUES ($1, $2, $3, $4, $5)",
				p.RunID, c.Index, c.Event, string(c.Data), c.CreatedAt)
		}
		// A new run has no stored chunks: Plan leaves out the appends below
		// its FirstIndex, so only an existing run's cap moves delete.
		if cur != nil && res.Run.FirstIndex > cur.FirstIndex {
			b.Queue("DELETE FROM stream_chunks WHERE run_id = $1 AND idx < $2", p.RunID, res.Run.FirstIndex)
		}
		if len(res.Appended) > 0 || res.Ended {
			seq := res.Run.NextIndex
			if res.Ended {
				seq++
			}
			b.Queue("SELECT pg_notify($1, $2)", ChunkNotifyChannel, p.RunID+":"+strconv.FormatInt(seq, 10))
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return dbError(err, "push chunks: write")
		}
		return nil
	})
	if err != nil {
		if e, ok := err.(*runstream.Error); ok {
			return runchunks.Result{}, e
		}
		return runchunks.Result{}, dbError(err, "push chunks")
	}
	return res, outcome
}

// putThreadRunStatus creates the thread run row of r with its status, or
// sets the status of the existing row; another owner's row is refused
// (the outcome, CodeNotFound).
func putThreadRunStatus(ctx context.Context, tx pgx.Tx, r runchunks.Run) (outcome, err error) {
	var owner string
	err = tx.QueryRow(ctx, "SELECT owner_id FROM thread_runs WHERE thread_id = $1 AND run_id = $2 FOR UPDATE", r.ThreadID, r.RunID).Scan(&owner)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		var args []any
		_, args, err = runRowArgs(runevents.ThreadRun{ThreadID: r.ThreadID, RunID: r.RunID, OwnerID: r.OwnerID, OperationKind: "run", Status: r.Status,
			CreatedAt: r.UpdatedAt, UpdatedAt: r.UpdatedAt}, r.UpdatedAt)
		if err == nil {
			_, err = tx.Exec(ctx, putRunSQL, args...)
		}
	case err != nil:
	case owner != r.OwnerID:
		return runchunks.NotFound(r.RunID), nil
	default:
		_, err = tx.Exec(ctx, "UPDATE thread_runs SET status = $1, updated_at = $2, updated_at_offset = 0 WHERE thread_id = $3 AND run_id = $4",
			string(r.Status), r.UpdatedAt, r.ThreadID, r.RunID)
	}
	if err != nil {
		return nil, dbError(err, "push chunks: thread run row")
	}
	return nil, nil
}

// GetRun returns the run.
func (s *ChunkStore) GetRun(ctx context.Context, runID string) (runchunks.Run, error) {
	r, err := scanStreamRun(s.pool.QueryRow(ctx, "SELECT "+streamRunColumns+" FROM stream_runs WHERE run_id = $1", runID))
	if errors.Is(err, pgx.ErrNoRows) {
		return runchunks.Run{}, runchunks.NotFound(runID)
	}
	if err != nil {
		return runchunks.Run{}, dbError(err, "get stream run")
	}
	return r, nil
}

// ReadChunks returns up to limit chunks with index > after, up to
// maxBytes of data (runchunks.Store): the sizes are summed in the
// statement, from the stored lengths, so the chunks past the bound are
// neither read nor sent.
func (s *ChunkStore) ReadChunks(ctx context.Context, runID string, after int64, limit, maxBytes int) ([]runchunks.Chunk, error) {
	if maxBytes <= 0 {
		maxBytes = math.MaxInt
	}
	rows, err := s.pool.Query(ctx, `SELECT idx, event, data, created_at FROM (
		SELECT idx, event, data, created_at, sum(octet_length(data)) OVER (ORDER BY idx) - octet_length(data) AS before
		FROM stream_chunks WHERE run_id = $1 AND idx > $2 ORDER BY idx LIMIT $3) page
		WHERE before < $4 ORDER BY idx`, runID, after, limit, int64(maxBytes))
	if err != nil {
		return nil, dbError(err, "read chunks")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (runchunks.Chunk, error) {
		var (
			c    runchunks.Chunk
			data string
		)
		err := row.Scan(&c.Index, &c.Event, &data, &c.CreatedAt)
		c.Data, c.CreatedAt = []byte(data), c.CreatedAt.UTC()
		return c, err
	})
	if err != nil {
		return nil, dbError(err, "read chunks")
	}
	return out, nil
}

// RequestCancel stores a cancel request on an active run.
func (s *ChunkStore) RequestCancel(ctx context.Context, runID, action string, at time.Time) (runchunks.Run, error) {
	r, err := scanStreamRun(s.pool.QueryRow(ctx, `UPDATE stream_runs
		SET cancel_action = $1, cancel_requested_at = CASE WHEN cancel_action IS NOT DISTINCT FROM $1 THEN coalesce(cancel_requested_at, $2) ELSE $2 END
		WHERE run_id = $3 AND ended_at IS NULL RETURNING `+streamRunColumns, action, at, runID))
	if errors.Is(err, pgx.ErrNoRows) {
		return s.GetRun(ctx, runID)
	}
	if err != nil {
		return runchunks.Run{}, dbError(err, "request cancel")
	}
	return r, nil
}

// ExpiredRuns returns up to limit active runs whose lease expired at now.
func (s *ChunkStore) ExpiredRuns(ctx context.Context, now time.Time, limit int) ([]runchunks.Run, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+streamRunColumns+" FROM stream_runs WHERE ended_at IS NULL AND lease_expires_at <= $1 ORDER BY lease_expires_at LIMIT $2", now, limit)
	if err != nil {
		return nil, dbError(err, "expired runs")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (runchunks.Run, error) { return scanStreamRun(row) })
	if err != nil {
		return nil, dbError(err, "expired runs")
	}
	return out, nil
}

// DeleteEndedChunks deletes the chunks of runs that ended before before.
func (s *ChunkStore) DeleteEndedChunks(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM stream_chunks WHERE run_id IN (SELECT run_id FROM stream_runs
			WHERE ended_at IS NOT NULL AND first_index < next_index AND ended_at < $1)`, before)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		_, err = tx.Exec(ctx, `UPDATE stream_runs SET first_index = next_index
			WHERE ended_at IS NOT NULL AND first_index < next_index AND ended_at < $1`, before)
		return err
	})
	if err != nil {
		return 0, dbError(err, "delete ended chunks")
	}
	return n, nil
}
