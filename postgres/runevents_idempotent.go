package postgres

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

var _ runevents.IdempotentAppender = (*RunEventStore)(nil)

// completeOwnKeySQL stores the response under a key the same transaction
// inserted.
const completeOwnKeySQL = `UPDATE idempotency_keys SET status = $3, body = $4, completed_at = $5, expires_at = $6
	WHERE user_id = $1 AND key = $2`

// AppendIdempotent inserts the key's row, appends and stores the response
// in one transaction. The key row is inserted first: a concurrent call
// with the same key waits on it (ON CONFLICT waits for the inserting
// transaction), then finds the committed response and replays it, or, if
// the first rolled back, inserts the key itself. The key's row is locked
// before the thread's counter row, in every transaction that takes both,
// so the two cannot deadlock; the group committer takes counter rows
// only.
func (s *RunEventStore) AppendIdempotent(ctx context.Context, a runevents.IdempotentAppend) (runevents.IdempotentResult, error) {
	if err := firstError(s.checkOpen(), a.Validate(), checkText("idempotency user", a.UserID)); err != nil {
		return runevents.IdempotentResult{}, err
	}
	now := storeNow()
	recs, err := runevents.PrepareBatch(a.Events, time.Now(), s.maxTrace)
	if err != nil {
		return runevents.IdempotentResult{}, err
	}
	if err := checkStorableBatch(recs); err != nil {
		return runevents.IdempotentResult{}, err
	}
	thread := recs[0].ThreadID
	var (
		found    keyState
		conflict error
		result   runevents.IdempotentResult
	)
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		found, conflict, result = keyState{}, nil, runevents.IdempotentResult{}
		if _, err := tx.Exec(ctx, expireKeySQL, a.UserID, a.Key, now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sweepKeysSQL, now, sweepBatch); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, reserveKeySQL, a.UserID, a.Key, a.RequestHash, now.Add(IdempotencyTTL))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			found, err = readKey(ctx, tx, a.UserID, a.Key)
			return err
		}
		out, created := recs, true
		if a.IfAbsent {
			// Adding 0 to the counter takes its row lock, as PutIfAbsent does.
			if _, err := tx.Exec(ctx, `INSERT INTO run_event_threads (thread_id, last_seq) VALUES ($1, 0)
				ON CONFLICT (thread_id) DO UPDATE SET last_seq = run_event_threads.last_seq`, thread); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, `SELECT `+recordColumns+` FROM run_events
				WHERE thread_id = $1 AND run_id = $2 AND event_type = $3 ORDER BY seq LIMIT 1`,
				thread, recs[0].RunID, string(recs[0].EventType))
			if err != nil {
				return err
			}
			existing, err := scanRecords(rows)
			if err != nil {
				return err
			}
			if len(existing) > 0 {
				if existing[0].UserID != recs[0].UserID {
					conflict = runstream.Errorf(runstream.CodeConflict,
						"an event of type %s already exists in this run and belongs to another owner", recs[0].EventType)
					return errRollback
				}
				out, created = existing[:1], false
			}
		}
		if created {
			var cols columns
			for i := range recs {
				cols.add(&recs[i])
			}
			var first int64
			if err := tx.QueryRow(ctx, appendRows, append(cols.args(thread), untagged)...).Scan(&first); err != nil {
				return err
			}
			for i := range recs {
				recs[i].Seq = first + int64(i)
			}
		}
		resp, err := a.Response(cloneRecords(out), created)
		if err != nil {
			return err
		}
		resp.RequestHash = a.RequestHash
		resp.CreatedAt = orNow(resp.CreatedAt, now)
		body := resp.Body
		if body == nil {
			body = []byte{} // NULL marks a reservation
		}
		if _, err := tx.Exec(ctx, completeOwnKeySQL, a.UserID, a.Key, resp.Status, body, resp.CreatedAt, now.Add(IdempotencyTTL)); err != nil {
			return err
		}
		result.Response = resp
		if created {
			result.Appended = recs
		}
		return nil
	})
	switch {
	case conflict != nil:
		return runevents.IdempotentResult{}, conflict
	case err != nil:
		var rerr *runstream.Error
		if errors.As(err, &rerr) {
			return runevents.IdempotentResult{}, err
		}
		return runevents.IdempotentResult{}, dbError(err, "idempotent append")
	case found.lookedUp:
		resp, err := found.verdict(a.RequestHash)
		if err != nil {
			return runevents.IdempotentResult{}, err
		}
		return runevents.IdempotentResult{Response: *resp, Replayed: true}, nil
	}
	return result, nil
}

// errRollback ends a transaction whose outcome was recorded beforehand.
var errRollback = errors.New("rolled back on purpose")

// readKey reads the key's row.
func readKey(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, userID, key string) (keyState, error) {
	k := keyState{lookedUp: true}
	var (
		status    *int32
		completed *time.Time
	)
	err := q.QueryRow(ctx, readKeySQL, userID, key).Scan(&k.resp.RequestHash, &status, &k.resp.Body, &completed)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return k, nil
	case err != nil:
		return k, err
	}
	k.found = true
	if status != nil {
		k.completed = true
		k.resp.Status, k.resp.CreatedAt = int(*status), completed.UTC()
	}
	return k, nil
}

// verdict turns a key's row into the caller's answer: the stored response,
// nil for an absent key, or the error of a mismatch or a reservation. A
// key that vanished between a refused insert and its read is in progress:
// the retry finds it settled.
func (k keyState) verdict(requestHash []byte) (*runevents.IdempotentResponse, error) {
	switch {
	case k.lookedUp && !k.found:
		return nil, runevents.ErrIdempotencyInProgress()
	case !k.found:
		return nil, nil
	case !bytes.Equal(k.resp.RequestHash, requestHash):
		return nil, runevents.ErrIdempotencyMismatch()
	case !k.completed:
		return nil, runevents.ErrIdempotencyInProgress()
	}
	resp := k.resp
	return &resp, nil
}

// LookupIdempotent reads the key; an expired key is absent.
func (s *RunEventStore) LookupIdempotent(ctx context.Context, userID, key string, requestHash []byte) (*runevents.IdempotentResponse, error) {
	if err := firstError(s.checkOpen(), runevents.CheckIdempotencyKey(key), checkText("idempotency user", userID)); err != nil {
		return nil, err
	}
	k := keyState{}
	var (
		status    *int32
		completed *time.Time
	)
	err := s.pool.QueryRow(ctx, readKeySQL+` AND expires_at > $3`, userID, key, storeNow()).
		Scan(&k.resp.RequestHash, &status, &k.resp.Body, &completed)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, dbError(err, "idempotent lookup")
	}
	k.found = true
	if status != nil {
		k.completed = true
		k.resp.Status, k.resp.CreatedAt = int(*status), completed.UTC()
	}
	return k.verdict(requestHash)
}

func cloneRecords(recs []runevents.Record) []runevents.Record {
	out := make([]runevents.Record, len(recs))
	for i, r := range recs {
		out[i] = r.Clone()
	}
	return out
}
